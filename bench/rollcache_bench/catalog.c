/*
 * catalog.c - `rollcache-bench catalog`: rates of the SQLite catalog
 * and of start-up reconciliation (cachefs/), printed as a figure table.
 *
 * Measures, in a scratch directory (removed afterwards unless --keep):
 *   - sample rows inserted through cfs_catalog_shard_insert (one
 *     transaction per shard, as sealing does);
 *   - the resident-files query an epoch snapshot and the evictor run;
 *   - one batched statistics update over every shard;
 *   - eviction of every shard: EVICTING in one transaction, then GONE with
 *     its sample rows deleted in one more;
 *   - a source listing of 100 x --shards keys merged (new, then unchanged);
 *   - reconciliation at cfs_store_open of a cache with --files files.
 * It has no peer: SQLite is the baseline of itself; the targets
 * are 200,000 sample rows/s and 100,000 files reconciled in 5 s.
 * Never asserts: it prints what it measured.
 */
#include "bench/rollcache_bench/bench.h"

#ifdef RC_HAVE_CACHEFS

#include "cachefs/catalog.h"
#include "cachefs/store.h"
#include "common/clock.h"
#include "common/units.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct bc_opts {
	const char *dir;
	uint64_t shards;
	uint64_t records;
	uint64_t files;
	int keep;
};

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb;
	(void)flag;
	(void)f;
	remove(p);
	return 0;
}

static void row(const char *what, uint64_t count, double secs, const char *unit)
{
	printf("%-34s %12" PRIu64 " %10.3f %12.0f %s\n", what, count, secs,
	       secs > 0 ? (double)count / secs : 0.0, unit);
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: rollcache-bench catalog [--dir DIR] [--shards N] [--records R]\n"
		"                               [--files M] [--keep]\n\n"
		"  --dir DIR     scratch directory (default: a new one under $TMPDIR or /tmp)\n"
		"  --shards N    shards inserted (default 1000)\n"
		"  --records R   sample rows per shard (default 1000)\n"
		"  --files M     files in the cache that reconciliation scans (default 100000)\n"
		"  --keep        keep the scratch directory\n");
}

static int parse(int argc, char **argv, struct bc_opts *o)
{
	for (int i = 1; i < argc; i++) {
		uint64_t *dst = NULL;
		char err[256];

		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			usage(stdout);
			return 1;
		}
		if (strcmp(argv[i], "--keep") == 0) {
			o->keep = 1;
			continue;
		}
		if (i + 1 >= argc) {
			fprintf(stderr, "rollcache-bench catalog: %s needs a value: see --help\n",
				argv[i]);
			return -1;
		}
		if (strcmp(argv[i], "--dir") == 0) {
			o->dir = argv[++i];
			continue;
		} else if (strcmp(argv[i], "--shards") == 0) {
			dst = &o->shards;
		} else if (strcmp(argv[i], "--records") == 0) {
			dst = &o->records;
		} else if (strcmp(argv[i], "--files") == 0) {
			dst = &o->files;
		} else {
			fprintf(stderr,
				"rollcache-bench catalog: unknown option '%s': see --help\n",
				argv[i]);
			return -1;
		}
		if (cmn_parse_size(argv[++i], dst, err, sizeof(err)) < 0) {
			fprintf(stderr, "rollcache-bench catalog: %s %s\n", argv[i - 1], err);
			return -1;
		}
	}
	return 0;
}

/* Merges a listing of n keys (new), then the same listing again (a relist). */
static int bench_listing(struct cfs_catalog *c, uint64_t n)
{
	struct cfs_listing_entry *ents = calloc(n ? n : 1, sizeof(*ents));
	char *keys = malloc(n ? n * 48 : 1);
	int64_t src, *ids = calloc(n ? n : 1, sizeof(*ids));
	struct cfs_sync_result res;
	double t;
	int rc = 1;

	if (!ents || !keys || !ids || cfs_catalog_source(c, "s3://bench/prefix/", &src) < 0)
		goto out;
	for (uint64_t i = 0; i < n; i++) {
		snprintf(keys + i * 48, 48, "train/part-%08" PRIu64 ".tfrecord", i * 7919 % n);
		ents[i] = (struct cfs_listing_entry){keys + i * 48, 1 << 20, "\"etag\""};
	}
	for (int pass = 0; pass < 2; pass++) {
		t = cmn_mono_s();
		if (cfs_catalog_objects_sync(c, src, ents, n, (uint32_t)pass, ids, &res) < 0)
			goto out;
		t = cmn_mono_s() - t;
		row(pass ? "listing re-synced (unchanged keys)" : "listing synced (new keys)", n, t,
		    "keys/s");
	}
	rc = 0;
out:
	free(ents);
	free(keys);
	free(ids);
	return rc;
}

/* Inserts, queries, updates and evicts in a fresh catalog under dir. */
static int bench_rows(const struct bc_opts *o, const char *dir)
{
	struct cfs_catalog *c = NULL;
	struct cfs_sample *smp = calloc(o->records ? o->records : 1, sizeof(*smp));
	int64_t *ids = calloc(o->shards ? o->shards : 1, sizeof(*ids));
	struct cfs_shard_stat_delta *d = calloc(o->shards ? o->shards : 1, sizeof(*d));
	struct cfs_shard_info *arr = NULL;
	char path[4400], err[512];
	size_t n = 0;
	double t;
	int rc = 1;

	snprintf(path, sizeof(path), "%s/catalog.db", dir);
	if (!smp || !ids || !d) {
		fprintf(stderr, "rollcache-bench catalog: out of memory\n");
		goto out;
	}
	if (cfs_catalog_open(&c, path, 0, err, sizeof(err)) < 0) {
		fprintf(stderr, "rollcache-bench catalog: %s\n", err);
		goto out;
	}
	t = cmn_mono_s();
	for (uint64_t s = 0; s < o->shards; s++) {
		struct cfs_shard_new sh = {
		    .id = cfs_catalog_alloc_id(c),
		    .kind = CFS_KIND_TFRECORD,
		    .bytes = o->records * 1040,
		    .created_epoch = (uint32_t)(s / 100),
		};
		for (uint64_t r = 0; r < o->records; r++)
			smp[r] = (struct cfs_sample){r * 1040, 1024, (uint32_t)(r * 2654435761u),
						     (int64_t)(s % 1000) + 1, r * 1040};
		if (cfs_catalog_shard_insert(c, &sh, smp, o->records) < 0) {
			fprintf(stderr, "rollcache-bench catalog: insert failed\n");
			goto out;
		}
		ids[s] = sh.id;
	}
	t = cmn_mono_s() - t;
	row("sample rows inserted (1 txn/shard)", o->shards * o->records, t, "rows/s");

	t = cmn_mono_s();
	if (cfs_catalog_shards_list(c, 1u << CFS_SHARD_SEALED, &arr, &n) < 0)
		goto out;
	t = cmn_mono_s() - t;
	row("resident shards listed (1 query)", n, t, "shards/s");

	for (uint64_t s = 0; s < o->shards; s++)
		d[s] = (struct cfs_shard_stat_delta){ids[s], 3, 1, 4096, 1000 + s};
	t = cmn_mono_s();
	if (cfs_catalog_shards_add_stats(c, d, o->shards, 0) < 0)
		goto out;
	t = cmn_mono_s() - t;
	row("shard stats updated (1 txn)", o->shards, t, "shards/s");

	t = cmn_mono_s();
	if (cfs_catalog_shards_evict(c, ids, o->shards, 1) < 0)
		goto out;
	t = cmn_mono_s() - t;
	row("shards marked evicting (1 txn)", o->shards, t, "shards/s");
	t = cmn_mono_s();
	if (cfs_catalog_shards_gone(c, ids, o->shards) < 0)
		goto out;
	t = cmn_mono_s() - t;
	row("sample rows deleted at gone (1 txn)", o->shards * o->records, t, "rows/s");
	rc = bench_listing(c, o->shards * 100);
out:
	cfs_shard_info_free(arr, n);
	cfs_catalog_close(c);
	free(smp);
	free(ids);
	free(d);
	return rc;
}

/* Builds a cache of o->files files + rows, then times cfs_store_open. */
static int bench_reconcile(const struct bc_opts *o, const char *dir)
{
	struct cfs_store_opts so = {.dir = dir, .limit = UINT64_MAX / 2};
	struct cfs_store *s = NULL;
	struct cfs_catalog *c;
	const struct cfs_reconcile_report *rep;
	char err[512], path[4400];
	double t;
	int sfd;

	if (cfs_store_open(&s, &so, err, sizeof(err)) < 0) {
		fprintf(stderr, "rollcache-bench catalog: %s\n", err);
		return 1;
	}
	c = cfs_store_catalog(s);
	snprintf(path, sizeof(path), "%s/shards", dir);
	sfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (sfd < 0 || cfs_catalog_begin(c) < 0) {
		fprintf(stderr, "rollcache-bench catalog: cannot prepare %s\n", path);
		cfs_store_close(s);
		return 1;
	}
	for (uint64_t i = 0; i < o->files; i++) {
		struct cfs_shard_new sh = {
		    .id = cfs_catalog_alloc_id(c), .kind = CFS_KIND_TFRECORD, .bytes = 16};
		char name[40];
		int fd;
		snprintf(name, sizeof(name), "%" PRId64 ".tfrecord", sh.id);
		fd = openat(sfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0444);
		if (fd < 0 || write(fd, "0123456789abcdef", 16) != 16 ||
		    cfs_catalog_shard_insert(c, &sh, NULL, 0) < 0) {
			fprintf(stderr, "rollcache-bench catalog: cannot create file %s: %s\n",
				name, strerror(errno));
			if (fd >= 0)
				close(fd);
			cfs_catalog_rollback(c);
			close(sfd);
			cfs_store_close(s);
			return 1;
		}
		close(fd);
	}
	cfs_catalog_commit(c);
	close(sfd);
	cfs_store_close(s);

	t = cmn_mono_s();
	if (cfs_store_open(&s, &so, err, sizeof(err)) < 0) {
		fprintf(stderr, "rollcache-bench catalog: %s\n", err);
		return 1;
	}
	t = cmn_mono_s() - t;
	rep = cfs_store_reconcile_report(s);
	row("files reconciled (store open)", rep->resident_files, t, "files/s");
	row("  of which the scan + merge", rep->resident_files, (double)rep->elapsed_us / 1e6,
	    "files/s");
	cfs_store_close(s);
	return 0;
}

int bench_catalog(int argc, char **argv)
{
	struct bc_opts o = {.shards = 1000, .records = 1000, .files = 100000};
	char scratch[4096], sub[4200];
	int rc;

	rc = parse(argc, argv, &o);
	if (rc != 0)
		return rc > 0 ? 0 : 2;
	if (o.dir) {
		snprintf(scratch, sizeof(scratch), "%s", o.dir);
		if (mkdir(scratch, 0755) < 0 && errno != EEXIST) {
			fprintf(stderr, "rollcache-bench catalog: %s: %s\n", scratch,
				strerror(errno));
			return 1;
		}
	} else {
		const char *t = getenv("TMPDIR");
		snprintf(scratch, sizeof(scratch), "%s/rc-bench-catalog-XXXXXX",
			 t && *t ? t : "/tmp");
		if (!mkdtemp(scratch)) {
			fprintf(stderr,
				"rollcache-bench catalog: cannot make a scratch directory "
				"under %s: %s: set TMPDIR or give --dir\n",
				t && *t ? t : "/tmp", strerror(errno));
			return 1;
		}
	}
	printf("rollcache-bench catalog: SQLite %s, scratch %s\n", cfs_catalog_sqlite_version(),
	       scratch);
	printf("%-34s %12s %10s %12s\n", "what", "count", "seconds", "rate");
	snprintf(sub, sizeof(sub), "%s/rows", scratch);
	mkdir(sub, 0755);
	rc = bench_rows(&o, sub);
	if (rc == 0) {
		snprintf(sub, sizeof(sub), "%s/cache", scratch);
		rc = bench_reconcile(&o, sub);
	}
	if (!o.keep)
		nftw(scratch, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return rc;
}

#else /* !RC_HAVE_CACHEFS */

#include <stdio.h>

int bench_catalog(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "rollcache-bench catalog: this build has no catalog (configure with "
			"-Dcatalog=enabled and libsqlite3-dev)\n");
	return 1;
}

#endif
