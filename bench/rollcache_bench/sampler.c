/*
 * sampler.c - `rollcache-bench sampler SOURCE [--connections N]
 * [--rounds R] [--cache-dir DIR] [--KEY VALUE ...]`: ingest throughput and
 * CPU seconds per GB of the samplers, against `curl --parallel
 * --parallel-max N` fetching the same objects to /dev/null in the same run.
 *
 * Each round runs curl to /dev/null, curl writing one file per object into
 * the directory that also holds the caches (so both pay for the disk), then
 * a full ingest into a fresh cache directory
 * (CRC checks, shuffle, shards written, fsync'd and cataloged), and deletes
 * that cache.  One curl run first warms the server's page cache and is not
 * counted.  The table shows the median round.  CPU time: getrusage of this
 * process for the ingest (it runs in-process), of the child for curl.
 * The like-for-like peer is curl writing files on the cache's filesystem:
 * an ingest stores every byte too; curl to /dev/null is the network path
 * alone (docs/bench-sampler.md).
 * s3:// sources get no curl column (curl would need the secret on its
 * command line).
 */
#include "bench/rollcache_bench/bench.h"
#include "cli/util.h"
#include "rc_config.h"

#if RC_HAVE_SAMPLER_INGEST

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cachefs/store.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/units.h"
#include "sampler/sampler.h"
#include "sampler/source.h"

#define MAX_ROUNDS 20

static double cpu_s(int who)
{
	struct rusage ru;
	getrusage(who, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path) == 0 || errno == ENOENT ? 0 : -1;
}

static void rm_tree(const char *dir)
{
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Runs curl -K cfg; returns 0 and wall/cpu seconds, or -1. */
static int run_curl(const char *cfg, unsigned conns, double *wall, double *cpu)
{
	char par[16];
	snprintf(par, sizeof(par), "%u", conns);
	const char *const argv[] = {"curl",
				    "--silent",
				    "--no-progress-meter",
				    "--show-error",
				    "--fail",
				    "--parallel",
				    "--parallel-max",
				    par,
				    "--config",
				    cfg,
				    NULL};
	double c0 = cpu_s(RUSAGE_CHILDREN), t0 = cmn_mono_s();
	int status = -1;
	if (cli_run(argv, false, &status) != 0) {
		fprintf(stderr, "rollcache-bench sampler: curl failed (status %d)\n", status);
		return -1;
	}
	*wall = cmn_mono_s() - t0;
	*cpu = cpu_s(RUSAGE_CHILDREN) - c0;
	return 0;
}

static int run_ingest(struct cmn_config *cfg, const char *dir, uint64_t *bytes, double *wall,
		      double *cpu)
{
	char err[1024];
	struct cfs_store *store = NULL;
	struct cfs_store_opts so = {.dir = dir, .limit = cfg->limit};
	int rc = cfs_store_open(&store, &so, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "rollcache-bench sampler: %s\n", err);
		return rc;
	}
	struct smp_sampler_opts o = {.cfg = cfg, .store = store, .seed = 1, .stop_when_full = true};
	struct smp_sampler *s = NULL;
	double c0 = cpu_s(RUSAGE_SELF), t0 = cmn_mono_s();
	rc = smp_sampler_new(&s, &o, err, sizeof(err));
	if (!rc)
		rc = smp_sampler_run(s, 0, err, sizeof(err));
	*wall = cmn_mono_s() - t0;
	*cpu = cpu_s(RUSAGE_SELF) - c0;
	if (rc) {
		fprintf(stderr, "rollcache-bench sampler: %s\n", err);
	} else {
		const struct smp_stats *st = smp_sampler_stats(s);
		*bytes = SMP_STAT_GET(st, bytes_fetched);
		if (SMP_STAT_GET(st, failed_objects) || SMP_STAT_GET(st, records_lost)) {
			fprintf(stderr,
				"rollcache-bench sampler: %" PRIu64 " objects failed, %" PRIu64
				" records lost: fix the source first\n",
				(uint64_t)SMP_STAT_GET(st, failed_objects),
				(uint64_t)SMP_STAT_GET(st, records_lost));
			rc = -EIO;
		}
	}
	smp_sampler_free(s);
	cfs_store_close(store);
	return rc;
}

int bench_sampler(int argc, char **argv)
{
	struct cmn_config cfg;
	char err[1024], dirbuf[4096], curlcfg[4200], curlfiles[4200], outdir[4200];
	const char *source = NULL, *cache_parent = NULL;
	unsigned rounds = 3;
	int ret = 2;
	bool have_limit = false, have_conns = false;

	cmn_config_init(&cfg);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			printf(
			    "usage: rollcache-bench sampler SOURCE [--connections N] [--rounds R]\n"
			    "                               [--cache-dir DIR] [--KEY VALUE ...]\n"
			    "Ingest throughput and CPU-s/GB against curl --parallel on the same "
			    "objects.\n");
			ret = 0;
			goto out;
		}
		if (!strncmp(a, "--", 2) && i + 1 < argc) {
			const char *v = argv[++i];
			if (!strcmp(a, "--rounds")) {
				rounds = (unsigned)strtoul(v, NULL, 10);
				if (rounds < 1 || rounds > MAX_ROUNDS) {
					fprintf(stderr,
						"rollcache-bench sampler: --rounds %s: expected "
						"1..%d\n",
						v, MAX_ROUNDS);
					goto out;
				}
				continue;
			}
			if (!strcmp(a, "--cache-dir")) {
				cache_parent = v;
				continue;
			}
			have_limit |= !strcmp(a, "--limit");
			have_conns |= !strcmp(a, "--connections");
			if (cmn_config_set(&cfg, a + 2, v, a, err, sizeof(err))) {
				fprintf(stderr, "rollcache-bench sampler: %s\n", err);
				goto out;
			}
		} else if (!source && a[0] != '-') {
			source = a;
		} else {
			fprintf(stderr, "rollcache-bench sampler: unexpected argument `%s`\n", a);
			goto out;
		}
	}
	if (!source) {
		fprintf(stderr,
			"rollcache-bench sampler: give a SOURCE (http://127.0.0.1:PORT/data/)\n");
		goto out;
	}
	if (cmn_config_set(&cfg, "url", source, "SOURCE", err, sizeof(err)) ||
	    (!have_limit && cmn_config_set(&cfg, "limit", "1P", "default", err, sizeof(err)))) {
		fprintf(stderr, "rollcache-bench sampler: %s\n", err);
		goto out;
	}
	(void)have_conns;
	if (cmn_config_finish(&cfg, err, sizeof(err))) {
		fprintf(stderr, "rollcache-bench sampler: %s\n", err);
		goto out;
	}
	ret = 1;

	/* the objects, for curl's config and the byte count */
	struct smp_stats lst = {0};
	struct smp_source_opts so = {.url = cfg.url,
				     .endpoint = cfg.endpoint,
				     .region = cfg.region,
				     .profile = cfg.profile,
				     .s3_addressing = (int)cfg.s3_addressing,
				     .timeout_ms = cfg.timeout_ms,
				     .retries = cfg.retries,
				     .stats = &lst};
	struct smp_source *st = NULL;
	struct smp_listing l = {0};
	if (smp_source_open(&st, &so, err, sizeof(err)) ||
	    smp_source_list(st, &l, err, sizeof(err))) {
		fprintf(stderr, "rollcache-bench sampler: %s\n", err);
		smp_source_free(st);
		goto out;
	}
	uint64_t total = 0;
	for (size_t i = 0; i < l.n; i++)
		total += l.v[i].size;

	const char *tmp = cache_parent	     ? cache_parent
			  : getenv("TMPDIR") ? getenv("TMPDIR")
					     : "/var/tmp";
	snprintf(dirbuf, sizeof(dirbuf), "%s/rollcache-bench-XXXXXX", tmp);
	if (!mkdtemp(dirbuf)) {
		fprintf(stderr, "rollcache-bench sampler: cannot create a directory in %s: %s\n",
			tmp, strerror(errno));
		smp_listing_free(&l);
		smp_source_free(st);
		goto out;
	}
	bool curl_ok = smp_source_scheme(st) != SMP_SCHEME_S3;
	snprintf(curlcfg, sizeof(curlcfg), "%s/curl-null.cfg", dirbuf);
	snprintf(curlfiles, sizeof(curlfiles), "%s/curl-files.cfg", dirbuf);
	snprintf(outdir, sizeof(outdir), "%s/curl-out", dirbuf);
	if (curl_ok) {
		/* one config writing to /dev/null, one writing files next to the caches */
		FILE *f = fopen(curlcfg, "w"), *g = fopen(curlfiles, "w");
		char url[8192];
		for (size_t i = 0; f && g && i < l.n; i++)
			if (smp_source_url(st, l.v[i].key, url, sizeof(url)) == 0) {
				fprintf(f, "url = \"%s\"\noutput = \"/dev/null\"\n", url);
				fprintf(g, "url = \"%s\"\noutput = \"%s/%zu\"\n", url, outdir, i);
			}
		bool bad = !f || !g;
		if (f && fclose(f) != 0)
			bad = true;
		if (g && fclose(g) != 0)
			bad = true;
		if (bad || mkdir(outdir, 0755) != 0) {
			fprintf(stderr, "rollcache-bench sampler: cannot write %s\n", curlcfg);
			curl_ok = false;
		}
	}
	size_t nobj = l.n;
	smp_listing_free(&l);
	smp_source_free(st);

	double cw[MAX_ROUNDS], cc[MAX_ROUNDS], fw[MAX_ROUNDS], fc[MAX_ROUNDS], iw[MAX_ROUNDS],
	    ic[MAX_ROUNDS], w, c;
	uint64_t ib = 0;
	if (curl_ok && run_curl(curlcfg, cfg.connections, &w, &c) != 0) /* warm-up */
		curl_ok = false;
	int rc = 0;
	for (unsigned r = 0; r < rounds && !rc; r++) {
		if (curl_ok && run_curl(curlcfg, cfg.connections, &cw[r], &cc[r]) != 0)
			curl_ok = false;
		if (curl_ok && run_curl(curlfiles, cfg.connections, &fw[r], &fc[r]) != 0)
			curl_ok = false;
		rm_tree(outdir);
		mkdir(outdir, 0755);
		char cdir[4200];
		snprintf(cdir, sizeof(cdir), "%s/cache-%u", dirbuf, r);
		rc = run_ingest(&cfg, cdir, &ib, &iw[r], &ic[r]);
		rm_tree(cdir);
	}
	rm_tree(dirbuf);
	if (rc)
		goto out;
	qsort(iw, rounds, sizeof(double), cmp_double);
	qsort(ic, rounds, sizeof(double), cmp_double);
	double gb = (double)total / 1e9, imbs = (double)total / 1e6 / iw[rounds / 2];
	char tb[32];
	printf("rollcache-bench sampler: %s\n", cfg.url);
	printf("  %zu objects, %s, connections %u, %u rounds (median shown)\n", nobj,
	       cmn_format_size(total, tb, sizeof(tb)), cfg.connections, rounds);
	printf("  %-34s %10s %12s %10s\n", "", "MB/s", "CPU-s/GB", "wall s");
	printf("  %-34s %10.1f %12.3f %10.3f\n", "rollcache ingest (CRC, shards)", imbs,
	       ic[rounds / 2] / gb, iw[rounds / 2]);
	if (curl_ok) {
		qsort(cw, rounds, sizeof(double), cmp_double);
		qsort(cc, rounds, sizeof(double), cmp_double);
		double cmbs = (double)total / 1e6 / cw[rounds / 2];
		char lbl[64];
		snprintf(lbl, sizeof(lbl), "curl --parallel-max %u > /dev/null", cfg.connections);
		printf("  %-34s %10.1f %12.3f %10.3f\n", lbl, cmbs, cc[rounds / 2] / gb,
		       cw[rounds / 2]);
		qsort(fw, rounds, sizeof(double), cmp_double);
		qsort(fc, rounds, sizeof(double), cmp_double);
		double fmbs = (double)total / 1e6 / fw[rounds / 2];
		snprintf(lbl, sizeof(lbl), "curl --parallel-max %u -o files", cfg.connections);
		printf("  %-34s %10.1f %12.3f %10.3f\n", lbl, fmbs, fc[rounds / 2] / gb,
		       fw[rounds / 2]);
		printf("  ingest / curl throughput: %.2fx (to /dev/null), %.2fx (to files, same "
		       "disk)\n",
		       imbs / cmbs, imbs / fmbs);
		printf("  ingest / curl CPU-s per GB: %.2fx (to /dev/null), %.2fx (to files, same "
		       "disk)\n",
		       ic[rounds / 2] / cc[rounds / 2], ic[rounds / 2] / fc[rounds / 2]);
	} else {
		printf("  curl baseline: not run (s3:// source, or curl failed)\n");
	}
	(void)ib;
	ret = 0;
out:
	cmn_config_free(&cfg);
	return ret;
}

#else /* !RC_HAVE_SAMPLER_INGEST */

#include <stdio.h>

int bench_sampler(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr,
		"rollcache-bench sampler: this build has no sampler support (needs libcurl, "
		"expat, libcrypto and the cachefs library)\n");
	return 1;
}

#endif
