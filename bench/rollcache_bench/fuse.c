/*
 * fuse.c - `rollcache-bench fuse`: reads through a rollcache mount
 * against direct reads of the same backing files, in the same run.
 *
 *   rollcache-bench fuse [--dir DIR] [--files N] [--size SIZE] [--ops N]
 *                        [--modes passthrough,pread,splice] [--keep]
 *                        [--rollcache PATH]
 *
 * Builds a cache of N sealed shards of SIZE bytes (random 1 MiB records
 * through cachefs/shard_writer.h, so the files are real sealed shards),
 * mounts it once per mode and measures on the same files.  The mounts are
 * `rollcache mount` of the rollcache built with this program
 * (RC_BENCH_ROLLCACHE, set by bench/meson.build), or of --rollcache PATH.
 *
 * Modes: `passthrough` is the default mount (the daemon serves a file's
 * first pass by pread, later opens are passed through to the backing file
 * by the kernel); `pread` and `splice` mount with -o no_passthrough, so the
 * daemon serves every uncached read, by pread + fuse_reply_buf or by splice
 * (fuse_reply_data with FUSE_BUF_IS_FD).  In those two modes:
 *
 *   seq 1M cold     1 MiB reads, file by file; backing files and the
 *                   mount's files dropped from the page cache (posix_fadvise
 *                   DONTNEED on both; a fresh mount per daemon read mode),
 *                   so every byte comes from the disk, through the daemon
 *                   for the mount;
 *   seq 1M daemon   the mount's page cache dropped (fadvise on the mount's
 *                   files) but the backing files cached: the FUSE round
 *                   trip alone;
 *   seq 1M warm     both page caches warm (keep_cache: no daemon involved);
 *   rand 4K/64K     random preads at 4 KiB-aligned offsets, cold (as above)
 *                   and warm.
 * In passthrough mode: seq cold on a fresh mount (the first pass: the
 * daemon), then seq cold, seq warm, rand cold and warm once every file was
 * served (passed through); the opens passed through are printed from
 * .rollcache/stats after the rows.
 *
 * Direct figures read the backing files with the same pattern and the same
 * cache state.  Each figure is the median of 3 runs (--reps), mount and
 * direct alternating, warm pairs in alternating order and over about 1 GiB
 * each (a warm pass of the default files takes 15-30 ms; the machine may be
 * shared).  Prints one table (MB/s and ratio mount/direct)
 * on stdout. Needs permission to mount FUSE; the mount is always unmounted.
 */
#include "bench/rollcache_bench/bench.h"
#include "cli/util.h"
#include "rc_config.h"

#include <stdio.h>

#if RC_HAVE_FUSE

#include "cachefs/shard_writer.h"
#include "cachefs/store.h"
#include "common/clock.h"
#include "common/crc32c.h"
#include "common/units.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define REC_PAYLOAD ((size_t)1 << 20)
#define MAX_FILES   64

struct bench {
	char dir[1024], cache[1100], empty[1100], mnt[1100], exe[PATH_MAX];
	int nfiles;
	uint64_t size;
	uint64_t ops;
	int64_t ids[MAX_FILES];
	uint64_t bytes[MAX_FILES];
	bool mounted;
};

static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

/* Writes the bench cache: nfiles sealed shards of about `size` bytes. */
static int make_cache(struct bench *b)
{
	char err[512];
	struct cfs_store *st = NULL;
	uint64_t limit = (uint64_t)b->nfiles * (b->size + (4u << 20)) + (64u << 20);
	struct cfs_store_opts so = {.dir = b->cache, .limit = limit};
	int rc = cfs_store_open(&st, &so, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "rollcache-bench fuse: %s\n", err);
		return rc;
	}
	uint8_t *payload = malloc(REC_PAYLOAD);
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	for (int i = 0; i < b->nfiles && rc == 0 && payload; i++) {
		struct cfs_shard_writer *w = NULL;
		rc = cfs_shard_writer_open(&w, st, 0, err, sizeof(err));
		if (rc)
			break;
		uint64_t rec = cfs_shard_writer_record_bytes(REC_PAYLOAD);
		while (rc == 0 && cfs_shard_writer_bytes(w) + rec <= b->size) {
			for (size_t j = 0; j < REC_PAYLOAD; j += 8) {
				uint64_t v = rng_next(&seed);
				memcpy(payload + j, &v, 8);
			}
			rc = cfs_shard_writer_reserve(w, rec, 10000);
			if (rc == 0)
				rc = cfs_shard_writer_append(w, payload, REC_PAYLOAD,
							     cmn_crc32c(0, payload, REC_PAYLOAD), 0,
							     0);
		}
		if (rc) {
			cfs_shard_writer_abort(w);
			snprintf(err, sizeof(err), "writing a shard: %s", strerror(-rc));
			break;
		}
		b->bytes[i] = cfs_shard_writer_bytes(w);
		rc = cfs_shard_writer_seal(w, &b->ids[i], err, sizeof(err));
	}
	if (rc)
		fprintf(stderr, "rollcache-bench fuse: %s\n", err);
	free(payload);
	cfs_store_close(st);
	return payload ? rc : -ENOMEM;
}

enum mode { MODE_PASSTHROUGH, MODE_PREAD, MODE_SPLICE };

static int do_mount(struct bench *b, enum mode mode)
{
	static const char *const opts[] = {
	    [MODE_PASSTHROUGH] = "no_splice_read,passthrough",
	    [MODE_PREAD] = "no_splice_read,no_passthrough",
	    [MODE_SPLICE] = "splice_read,no_passthrough",
	};
	char src[1200], lim[32];
	snprintf(src, sizeof(src), "file://%s/", b->empty);
	snprintf(lim, sizeof(lim), "%" PRIu64,
		 (uint64_t)b->nfiles * (b->size + (4u << 20)) + (64u << 20));
	const char *argv[] = {b->exe,	 "mount", src,	b->mnt,	    "--cache-dir", b->cache,
			      "--limit", lim,	  "-o", opts[mode], NULL};
	int rc = cli_run(argv, false, NULL);
	if (rc == 0)
		b->mounted = true;
	else
		fprintf(stderr, "rollcache-bench fuse: mounting %s failed\n", b->mnt);
	return rc;
}

static void do_umount(struct bench *b)
{
	if (!b->mounted)
		return;
	const char *argv[] = {b->exe, "umount", b->mnt, NULL};
	cli_run(argv, false, NULL);
	b->mounted = false;
}

static void path_of(const struct bench *b, bool mount, int i, char *out, size_t len)
{
	if (mount)
		snprintf(out, len, "%s/current/shard-%" PRId64 ".tfrecord", b->mnt, b->ids[i]);
	else
		snprintf(out, len, "%s/shards/%" PRId64 ".tfrecord", b->cache, b->ids[i]);
}

static void drop(const struct bench *b, bool mount)
{
	char p[PATH_MAX];
	for (int i = 0; i < b->nfiles; i++) {
		path_of(b, mount, i, p, sizeof(p));
		int fd = open(p, O_RDONLY);
		if (fd >= 0) {
			posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
			close(fd);
		}
	}
}

/* Sequential 1 MiB reads of every file; returns MB/s (0 on error). */
static double seq_read_passes(const struct bench *b, bool mount, int passes)
{
	char p[PATH_MAX];
	char *buf = malloc(1 << 20);
	uint64_t total = 0;
	double t0 = cmn_mono_s();
	for (int i = 0; i < b->nfiles * passes && buf; i++) {
		path_of(b, mount, i % b->nfiles, p, sizeof(p));
		int fd = open(p, O_RDONLY);
		if (fd < 0)
			goto fail;
		for (;;) {
			ssize_t r = read(fd, buf, 1 << 20);
			if (r < 0) {
				close(fd);
				goto fail;
			}
			if (r == 0)
				break;
			total += (uint64_t)r;
		}
		close(fd);
	}
	double dt = cmn_mono_s() - t0;
	free(buf);
	return buf && dt > 0 ? (double)total / 1e6 / dt : 0;
fail:
	fprintf(stderr, "rollcache-bench fuse: %s: %s\n", p, strerror(errno));
	free(buf);
	return 0;
}

static double seq_read(const struct bench *b, bool mount)
{
	return seq_read_passes(b, mount, 1);
}

/* `ops` random preads of `bs` bytes at 4 KiB-aligned offsets; MB/s. */
static double rand_read(const struct bench *b, bool mount, size_t bs, uint64_t ops)
{
	char p[PATH_MAX];
	int fds[MAX_FILES];
	char *buf = malloc(bs);
	uint64_t seed = 42, total = 0;
	int n = 0;
	for (; n < b->nfiles; n++) {
		path_of(b, mount, n, p, sizeof(p));
		fds[n] = open(p, O_RDONLY);
		if (fds[n] < 0)
			break;
	}
	double rate = 0;
	if (n == b->nfiles && buf) {
		for (int i = 0; i < n; i++)
			posix_fadvise(fds[i], 0, 0, POSIX_FADV_RANDOM);
		double t0 = cmn_mono_s();
		for (uint64_t k = 0; k < ops; k++) {
			int i = (int)(rng_next(&seed) % (uint64_t)n);
			uint64_t blocks = (b->bytes[i] - bs) / 4096;
			off_t off = (off_t)(rng_next(&seed) % blocks) * 4096;
			ssize_t r = pread(fds[i], buf, bs, off);
			if (r < 0)
				break;
			total += (uint64_t)r;
		}
		double dt = cmn_mono_s() - t0;
		rate = dt > 0 ? (double)total / 1e6 / dt : 0;
	}
	for (int i = 0; i < n; i++)
		close(fds[i]);
	free(buf);
	return rate;
}

#define REPS_MAX 15
static int reps = 3; /* runs per figure (--reps), odd: the median is one of them */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v)
{
	qsort(v, (size_t)reps, sizeof(*v), cmp_double);
	return v[reps / 2];
}

static void row(const char *what, double mnt, double direct, const char *target)
{
	printf("%-26s %10.1f %10.1f %7.2fx  %s\n", what, mnt, direct, direct > 0 ? mnt / direct : 0,
	       target);
}

/*
 * One warm pair of figure r: mount and direct, in an order that alternates
 * with r, so that neither side is always the one that runs first.
 */
static void seq_warm(struct bench *b, double *mv, double *dv, int r)
{
	/* a warm pass takes milliseconds: read about 1 GiB per figure */
	uint64_t all = 0;
	for (int i = 0; i < b->nfiles; i++)
		all += b->bytes[i];
	int passes = all && all < ((uint64_t)1 << 30) ? (int)(((uint64_t)1 << 30) / all) : 1;
	if (r % 2) {
		dv[r] = seq_read_passes(b, false, passes);
		mv[r] = seq_read_passes(b, true, passes);
	} else {
		mv[r] = seq_read_passes(b, true, passes);
		dv[r] = seq_read_passes(b, false, passes);
	}
}

static void rand_warm(struct bench *b, double *mv, double *dv, int r, size_t bs, uint64_t ops)
{
	if (r % 2) {
		dv[r] = rand_read(b, false, bs, ops);
		mv[r] = rand_read(b, true, bs, ops);
	} else {
		mv[r] = rand_read(b, true, bs, ops);
		dv[r] = rand_read(b, false, bs, ops);
	}
}

/* One cold sequential figure: both page caches dropped, direct then mount. */
static void seq_cold(struct bench *b, double *mv, double *dv, int r)
{
	drop(b, false);
	dv[r] = seq_read(b, false);
	drop(b, false);
	drop(b, true);
	mv[r] = seq_read(b, true);
}

/* Random cold and warm rows of one request size. */
static void rand_rows(struct bench *b, size_t bs, bool daemon_row)
{
	double mv[REPS_MAX], dv[REPS_MAX];
	char label[64];
	uint64_t ops = bs == 4096 ? b->ops : b->ops / 4 + 1;
	for (int r = 0; r < reps; r++) {
		drop(b, false);
		dv[r] = rand_read(b, false, bs, ops);
		drop(b, false);
		drop(b, true);
		mv[r] = rand_read(b, true, bs, ops);
	}
	snprintf(label, sizeof(label), "rand %zuK, cold", bs / 1024);
	row(label, median(mv), median(dv), bs == 4096 ? ">= 0.50x" : "");
	if (daemon_row) {
		seq_read(b, false);
		for (int r = 0; r < reps; r++) {
			drop(b, true); /* daemon path: backing warm */
			mv[r] = rand_read(b, true, bs, ops);
			dv[r] = rand_read(b, false, bs, ops);
		}
		snprintf(label, sizeof(label), "rand %zuK, daemon", bs / 1024);
		row(label, median(mv), median(dv), "");
	}
	seq_read(b, true); /* warm the mount's cache */
	seq_read(b, false);
	for (int r = 0; r < reps; r++)
		rand_warm(b, mv, dv, r, bs, ops);
	snprintf(label, sizeof(label), "rand %zuK, warm", bs / 1024);
	row(label, median(mv), median(dv), "");
}

/* -o no_passthrough: the daemon serves every read the page cache misses. */
static int run_daemon(struct bench *b, enum mode mode)
{
	double mv[REPS_MAX], dv[REPS_MAX];
	printf("-- mode %s: no passthrough, the daemon serves reads by %s\n",
	       mode == MODE_SPLICE ? "splice" : "pread",
	       mode == MODE_SPLICE ? "splice (fuse_reply_data, FUSE_BUF_IS_FD)"
				   : "pread + fuse_reply_buf");
	if (do_mount(b, mode) != 0)
		return -1;
	/* each figure: the median of `reps` runs, mount and direct alternating */
	for (int r = 0; r < reps; r++)
		seq_cold(b, mv, dv, r);
	row("seq 1M, cold", median(mv), median(dv), ">= 0.80x");
	for (int r = 0; r < reps; r++) { /* daemon path: backing warm, mount's cache dropped */
		dv[r] = seq_read(b, false);
		drop(b, true);
		mv[r] = seq_read(b, true);
	}
	row("seq 1M, daemon (FUSE cold)", median(mv), median(dv), "");
	seq_read(b, true);
	for (int r = 0; r < reps; r++) /* warm: both cached */
		seq_warm(b, mv, dv, r);
	row("seq 1M, warm", median(mv), median(dv), ">= 0.95x");
	rand_rows(b, 4096, true);
	rand_rows(b, 65536, true);
	return 0;
}

/* Reads "passthrough" and "passthrough_opens" from the mount's stats file. */
static void print_passthrough(const struct bench *b)
{
	char p[PATH_MAX], text[8192];
	snprintf(p, sizeof(p), "%s/.rollcache/stats", b->mnt);
	int fd = open(p, O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, text, sizeof(text) - 1) : -1;
	if (fd >= 0)
		close(fd);
	text[n > 0 ? n : 0] = '\0';
	const char *on = strstr(text, "\"passthrough\": true");
	const char *opens = strstr(text, "\"passthrough_opens\": ");
	if (!on)
		printf("   passthrough was not accepted (kernel < 6.9 or no CAP_SYS_ADMIN): "
		       "the daemon served every read\n");
	else
		printf("   opens passed through to the kernel: %llu\n",
		       opens ? strtoull(opens + strlen("\"passthrough_opens\": "), NULL, 10)
			     : 0ull);
}

/* The default mount: first pass through the daemon, later opens passed through. */
static int run_passthrough(struct bench *b)
{
	double mv[REPS_MAX], dv[REPS_MAX];
	printf("-- mode passthrough (the default): first pass by the daemon (pread), "
	       "later opens passed through\n");
	for (int r = 0; r < reps; r++) { /* a fresh mount each: every file's first pass */
		if (r > 0)
			do_umount(b);
		if (do_mount(b, MODE_PASSTHROUGH) != 0)
			return -1;
		seq_cold(b, mv, dv, r);
	}
	row("seq 1M, cold, first pass", median(mv), median(dv), ">= 0.80x");
	for (int r = 0; r < reps; r++)
		seq_cold(b, mv, dv, r);
	row("seq 1M, cold, served once", median(mv), median(dv), ">= 0.80x");
	seq_read(b, true);
	seq_read(b, false);
	for (int r = 0; r < reps; r++)
		seq_warm(b, mv, dv, r);
	row("seq 1M, warm", median(mv), median(dv), ">= 0.95x");
	rand_rows(b, 4096, false);
	rand_rows(b, 65536, false);
	print_passthrough(b);
	return 0;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: rollcache-bench fuse [--dir DIR] [--files N] [--size SIZE] [--ops N]\n"
		"                            [--modes passthrough,pread,splice] [--reps N]\n"
		"                            [--keep] [--rollcache PATH]\n"
		"  --dir DIR   scratch directory (default: a new /tmp/rollcache-bench-fuse.*)\n"
		"  --files N   shards to read (default 4)\n"
		"  --size SIZE bytes per shard (default 64M)\n"
		"  --ops N     random reads per pattern (default 4000)\n"
		"  --modes     mount modes to measure (default passthrough,pread)\n"
		"  --reps N    runs per figure, the median is shown (odd, 1..15; default 3)\n"
		"  --keep      keep the scratch directory\n"
		"  --rollcache PATH  the rollcache that mounts; default, the one built\n"
		"              with this program: " RC_BENCH_ROLLCACHE "\n");
}

int bench_fuse(int argc, char **argv)
{
	struct bench b;
	char err[256];
	const char *modes = "passthrough,pread", *dir = NULL, *rc_path = RC_BENCH_ROLLCACHE;
	bool keep = false;
	memset(&b, 0, sizeof(b));
	b.nfiles = 4;
	b.size = 64u << 20;
	b.ops = 4000;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "--keep")) {
			keep = true;
		} else if (v && !strcmp(a, "--dir")) {
			dir = v;
			i++;
		} else if (v && !strcmp(a, "--files")) {
			b.nfiles = atoi(v);
			i++;
		} else if (v && !strcmp(a, "--size")) {
			if (cmn_parse_size(v, &b.size, err, sizeof(err))) {
				fprintf(stderr, "rollcache-bench fuse: --size %s\n", err);
				return 2;
			}
			i++;
		} else if (v && !strcmp(a, "--ops")) {
			b.ops = strtoull(v, NULL, 10);
			i++;
		} else if (v && !strcmp(a, "--reps")) {
			reps = atoi(v);
			i++;
		} else if (v && !strcmp(a, "--modes")) {
			modes = v;
			i++;
		} else if (v && !strcmp(a, "--rollcache")) {
			rc_path = v;
			i++;
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (reps < 1 || reps > REPS_MAX || reps % 2 == 0) {
		fprintf(stderr,
			"rollcache-bench fuse: --reps %d: expected an odd count from 1 to %d\n",
			reps, REPS_MAX);
		return 2;
	}
	if (b.nfiles < 1 || b.nfiles > MAX_FILES || b.size < (4u << 20) || b.ops < 1) {
		fprintf(
		    stderr,
		    "rollcache-bench fuse: expected 1..%d files of at least 4M and --ops >= 1\n",
		    MAX_FILES);
		return 2;
	}
	if (strlen(rc_path) >= sizeof(b.exe) || access(rc_path, X_OK) != 0) {
		fprintf(stderr,
			"rollcache-bench fuse: cannot run %s: %s (build it, or give --rollcache "
			"PATH)\n",
			rc_path,
			strlen(rc_path) >= sizeof(b.exe) ? "path too long" : strerror(errno));
		return 2;
	}
	snprintf(b.exe, sizeof(b.exe), "%s", rc_path);
	if (dir) {
		if (strlen(dir) >= sizeof(b.dir)) {
			fprintf(stderr, "rollcache-bench fuse: --dir: path too long\n");
			return 2;
		}
		snprintf(b.dir, sizeof(b.dir), "%s", dir);
		mkdir(b.dir, 0755);
	} else {
		snprintf(b.dir, sizeof(b.dir), "/tmp/rollcache-bench-fuse.XXXXXX");
		if (!mkdtemp(b.dir)) {
			fprintf(stderr, "rollcache-bench fuse: mkdtemp: %s\n", strerror(errno));
			return 1;
		}
	}
	snprintf(b.cache, sizeof(b.cache), "%s/cache", b.dir);
	snprintf(b.empty, sizeof(b.empty), "%s/empty", b.dir);
	snprintf(b.mnt, sizeof(b.mnt), "%s/mnt", b.dir);
	mkdir(b.empty, 0755);
	mkdir(b.mnt, 0755);
	char none[1200];
	snprintf(none, sizeof(none), "%s/none.tfrecord", b.empty);
	close(open(none, O_CREAT | O_WRONLY, 0644));

	int ret = 1;
	if (make_cache(&b) != 0)
		goto out;
	char sz[32];
	printf("rollcache-bench fuse: %d files of %s, 1 MiB records, %" PRIu64 " random reads per "
	       "pattern, in %s\n",
	       b.nfiles, cmn_format_size(b.bytes[0], sz, sizeof(sz)), b.ops, b.dir);
	printf("%-26s %10s %10s %8s  %s\n", "pattern (MB/s)", "mount", "direct", "ratio", "target");
	for (const char *m = modes; *m;) {
		size_t len = strcspn(m, ",");
		enum mode mode;
		if (len == 11 && !strncmp(m, "passthrough", len))
			mode = MODE_PASSTHROUGH;
		else if (len == 5 && !strncmp(m, "pread", len))
			mode = MODE_PREAD;
		else if (len == 6 && !strncmp(m, "splice", len))
			mode = MODE_SPLICE;
		else {
			fprintf(stderr,
				"rollcache-bench fuse: --modes: unknown mode '%.*s' "
				"(expected passthrough, pread or splice)\n",
				(int)len, m);
			goto out;
		}
		int rc = mode == MODE_PASSTHROUGH ? run_passthrough(&b) : run_daemon(&b, mode);
		do_umount(&b);
		if (rc != 0)
			goto out;
		m += len;
		if (*m == ',')
			m++;
	}
	ret = 0;
out:
	do_umount(&b);
	if (!keep) {
		char cmd[1100];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", b.dir);
		if (strchr(b.dir, '\'') == NULL && system(cmd) != 0)
			fprintf(stderr, "rollcache-bench fuse: could not remove %s\n", b.dir);
	}
	return ret;
}

#else

int bench_fuse(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "rollcache-bench fuse: this build has no FUSE support\n");
	return 1;
}

#endif
