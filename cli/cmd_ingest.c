/*
 * cmd_ingest.c - `rollcache ingest SOURCE --cache-dir DIR --limit SIZE
 * [--config FILE] [--KEY VALUE ...]`: run the samplers in the foreground
 * until every object of this rank was read or the cache is full (pre-warm).
 *
 * Extra flags (not configuration keys): --seed N (object order, shuffle),
 * --stats FILE (the sampler counters as JSON when done), --quiet (no
 * progress line).  Ctrl-C stops cleanly: shards being written are sealed or
 * discarded, never left half-visible (DESIGN 2).
 *
 * Exit: 0 all objects read (or the cache filled up); 1 a runtime failure, or
 * some objects could not be read (counted and named in the log; whole
 * objects given up on faults that may pass were first tried again in the
 * sampler's rounds, and those still given up are counted objects_partial:
 * a new run resumes them); 2 usage or configuration errors.
 */
#include "cli/cmd.h"
#include "rc_config.h"

#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if RC_HAVE_SAMPLER_INGEST
#include "cachefs/catalog.h"
#include "cachefs/store.h"
#include "common/config.h"
#include "common/log.h"
#include "common/units.h"
#include "sampler/sampler.h"

static struct smp_sampler *volatile running;

static void on_signal(int sig)
{
	(void)sig;
	if (running)
		smp_sampler_stop(running);
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: rollcache ingest SOURCE --cache-dir DIR --limit SIZE [--config FILE]\n"
		"                        [--KEY VALUE ...] [--seed N] [--stats FILE] [--quiet]\n"
		"SOURCE: file:///abs/dir/, http(s)://host/prefix/ or s3://bucket/prefix/\n");
}

struct progress_ctx {
	bool quiet, tty;
	uint64_t limit;
	uint64_t last_line_ms; /* not a terminal: one full line every 10 s */
};

static void on_progress(const struct smp_progress *p, const struct smp_stats *st, void *ctx)
{
	struct progress_ctx *pc = ctx;
	char fill[32], lim[32];
	if (pc->quiet)
		return;
	if (!pc->tty) {
		if (p->elapsed_ms < pc->last_line_ms + 10000)
			return;
		pc->last_line_ms = p->elapsed_ms;
	}
	double secs = p->elapsed_ms ? (double)p->elapsed_ms / 1000.0 : 1e-3;
	fprintf(stderr,
		"%singest: %" PRIu64 "/%" PRIu64 " objects, %" PRIu64
		" records, %.1f MB/s, %s / %s%s",
		pc->tty ? "\r" : "", p->objects_done, p->objects_total, p->records,
		(double)p->fetched / 1e6 / secs, cmn_format_size(p->bytes, fill, sizeof(fill)),
		cmn_format_size(pc->limit, lim, sizeof(lim)), pc->tty ? "   " : "\n");
}

static int write_stats(const char *path, const struct smp_stats *st, const struct smp_progress *p)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return -errno;
	fprintf(f, "{\n");
#define F(name) fprintf(f, "  \"%s\": %" PRIu64 ",\n", #name, (uint64_t)SMP_STAT_GET(st, name))
	F(requests);
	F(retries);
	F(retry_wait_ms);
	F(http_4xx);
	F(http_408_429);
	F(http_5xx);
	F(timeouts);
	F(net_errors);
	F(truncated);
	F(records_recovered);
	F(records_lost);
	F(failed_objects);
	F(objects_partial);
	F(enospc);
	F(objects_done);
	F(bytes_fetched);
	F(records_admitted);
	F(bytes_admitted);
	F(budget_waits);
#undef F
	fprintf(f,
		"  \"objects_total\": %" PRIu64 ",\n  \"elapsed_ms\": %" PRIu64
		",\n  \"full\": %s\n}\n",
		p->objects_total, p->elapsed_ms, p->full ? "true" : "false");
	return fclose(f) == 0 ? 0 : -errno;
}

int cmd_ingest(int argc, char **argv)
{
	struct cmn_config cfg;
	char err[1024];
	const char *source = NULL, *config = NULL, *stats_path = NULL;
	uint64_t seed = 1;
	bool quiet = false;
	int rc, ret = 2;

	cmn_config_init(&cfg);
	/* the config file first (precedence: command line > file > default) */
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--config") && i + 1 < argc)
			config = argv[i + 1];
	if (config && cmn_config_load_file(&cfg, config, err, sizeof(err))) {
		fprintf(stderr, "rollcache ingest: %s\n", err);
		goto out;
	}
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			ret = 0;
			goto out;
		} else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
			quiet = true;
		} else if (!strncmp(a, "--", 2)) {
			if (i + 1 >= argc) {
				fprintf(stderr, "rollcache ingest: %s needs a value\n", a);
				goto out;
			}
			const char *v = argv[++i];
			if (!strcmp(a, "--config"))
				continue;
			if (!strcmp(a, "--stats")) {
				stats_path = v;
				continue;
			}
			if (!strcmp(a, "--seed")) {
				char *e;
				seed = strtoull(v, &e, 0);
				if (*e || !*v) {
					fprintf(stderr,
						"rollcache ingest: --seed %s: expected a number\n",
						v);
					goto out;
				}
				continue;
			}
			if (cmn_config_set(&cfg, a + 2, v, a, err, sizeof(err))) {
				fprintf(stderr, "rollcache ingest: %s\n", err);
				goto out;
			}
		} else if (!source) {
			source = a;
		} else {
			fprintf(stderr, "rollcache ingest: unexpected argument `%s`\n", a);
			usage(stderr);
			goto out;
		}
	}
	if (source && cmn_config_set(&cfg, "url", source, "SOURCE", err, sizeof(err))) {
		fprintf(stderr, "rollcache ingest: %s\n", err);
		goto out;
	}
	if (!cfg.url) {
		fprintf(stderr, "rollcache ingest: no SOURCE: give it as the first argument or as "
				"url in [source]\n");
		usage(stderr);
		goto out;
	}
	if (cmn_config_finish(&cfg, err, sizeof(err))) {
		fprintf(stderr, "rollcache ingest: %s\n", err);
		goto out;
	}
	if (!cfg.cache_dir) {
		fprintf(stderr, "rollcache ingest: no cache directory: give --cache-dir DIR\n");
		goto out;
	}

	ret = 1;
	/*
	 * Freed memory stays with the process up to 64 MiB: with glibc's
	 * default (128 KiB, raised only by freed mmap chunks) the threads'
	 * arenas were shrunk by an madvise() after most raw group commits,
	 * each a TLB shootdown on every CPU (16,285 calls for 20,000 raw
	 * objects, `strace -c -f`).
	 */
	mallopt(M_TRIM_THRESHOLD, 64 << 20);
	struct cfs_store *store = NULL;
	/*
	 * A sync point every 250 ms, not the store's 5 s: ingest returns after
	 * its last one, and the writeback of what it sealed then runs while it
	 * copies, not all at its end (as cp -r's files wait for the `sync`
	 * after it).  20,000 objects of 2 KiB with periods of 100 and 300 ms:
	 * 1.47-1.59 s, against 1.67-1.89 s with 5 s (docs/benchmarks.md, "The
	 * copy's floor, and what ingest adds").
	 */
	struct cfs_store_opts so = {
	    .dir = cfg.cache_dir, .limit = cfg.limit, .verity = cfg.verity, .sync_period_ms = 250};
	rc = cfs_store_open(&store, &so, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "rollcache ingest: %s\n", err);
		ret = rc == -ENOTSUP ? 2 : 1; /* a setting this cache cannot honour: as mount */
		goto out;
	}
	uint32_t epoch = 0;
	if (cfs_catalog_current_epoch(cfs_store_catalog(store), &epoch) != 0)
		epoch = 0;

	struct progress_ctx pc = {.quiet = quiet, .tty = isatty(2), .limit = cfg.limit};
	struct smp_sampler_opts opts = {
	    .cfg = &cfg,
	    .store = store,
	    .seed = seed,
	    .stop_when_full = true,
	    .progress = on_progress,
	    .progress_ctx = &pc,
	};
	struct smp_sampler *s = NULL;
	rc = smp_sampler_new(&s, &opts, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "rollcache ingest: %s\n", err);
		cfs_store_close(store);
		ret = rc == -EINVAL || rc == -ENOTSUP || rc == -EACCES ? 2 : 1;
		goto out;
	}
	struct sigaction sa = {.sa_handler = on_signal}, old_int, old_term;
	sigemptyset(&sa.sa_mask);
	running = s;
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	rc = smp_sampler_run(s, epoch, err, sizeof(err));
	running = NULL;
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);

	struct smp_progress p;
	const struct smp_stats *st = smp_sampler_stats(s);
	smp_sampler_progress(s, &p);
	if (pc.tty && !quiet)
		fputc('\n', stderr);
	if (rc) {
		fprintf(stderr, "rollcache ingest: %s\n", err);
	} else {
		char b1[32], b2[32];
		double secs = p.elapsed_ms ? (double)p.elapsed_ms / 1000.0 : 1e-3;
		uint64_t failed = SMP_STAT_GET(st, failed_objects);
		uint64_t partial = SMP_STAT_GET(st, objects_partial);
		if (!quiet)
			fprintf(stderr,
				"ingest: %" PRIu64 "/%" PRIu64 " objects, %" PRIu64
				" records, %s admitted "
				"(limit %s%s) in %.1f s, %.1f MB/s; retries %" PRIu64
				", records recovered %" PRIu64 ", records lost %" PRIu64
				", failed objects %" PRIu64 " (partial %" PRIu64 ")\n",
				p.objects_done, p.objects_total, p.records,
				cmn_format_size(p.bytes, b1, sizeof(b1)),
				cmn_format_size(cfg.limit, b2, sizeof(b2)), p.full ? ", full" : "",
				secs, (double)SMP_STAT_GET(st, bytes_fetched) / 1e6 / secs,
				(uint64_t)SMP_STAT_GET(st, retries),
				(uint64_t)SMP_STAT_GET(st, records_recovered),
				(uint64_t)SMP_STAT_GET(st, records_lost), failed, partial);
		if (failed)
			fprintf(stderr,
				"rollcache ingest: %" PRIu64
				" objects could not be read whole (named above), %" PRIu64
				" of them left partial; run again to retry the ones not admitted\n",
				failed, partial);
		ret = failed ? 1 : 0;
	}
	if (stats_path && write_stats(stats_path, st, &p) != 0)
		fprintf(stderr, "rollcache ingest: cannot write %s\n", stats_path);
	smp_sampler_free(s);
	cfs_store_close(store);
out:
	cmn_config_free(&cfg);
	return ret;
}

#else /* !RC_HAVE_SAMPLER_INGEST */

int cmd_ingest(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr,
		"rollcache ingest: this build has no sampler support (needs libcurl, expat, "
		"libcrypto and the cachefs library): install libcurl4-openssl-dev libexpat1-dev "
		"libssl-dev and rebuild\n");
	return 1;
}

#endif
