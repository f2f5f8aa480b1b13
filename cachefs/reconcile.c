/*
 * reconcile.c - start-up reconciliation of a cache directory (DESIGN
 * invariant 6).
 *
 * Owns the repair of the directory and the catalog after any crash, before
 * anything else uses them.  Runs once, inside cfs_store_open(), with the
 * directory lock held, so nothing else touches the files meanwhile.
 *
 * In bulk, never file by file against SQL:
 *   1. tmp/ is emptied (files being written when we died; invariant 2 says
 *      none of them was ever visible);
 *   2. one readdir of shards/ and one of objects/ (plus an fstatat for the
 *      size) give the files; one catalog query gives every SEALED or
 *      EVICTING row;
 *   3. both lists are sorted by (kind, id) and merged:
 *        row + file, sizes agree, SEALED    -> kept, counted in the budget
 *        row + file, sizes agree, EVICTING  -> file deleted, GONE (row
 *                                              deleted, its id kept
 *                                              taken by the id mark); with
 *                                              keep_retiring, a victim of the
 *                                              latest boundary stays (draining)
 *        row + file, sizes differ           -> both dropped (a torn file;
 *                                              logged, and the mount counts
 *                                              it in errors.corrupt)
 *        row + file, sealed after the last  -> verified whole first: one
 *        sync point (catalog `unsynced`)       that fails is dropped as a
 *                                              torn file (a crash of the
 *                                              system lost its bytes)
 *        row, no file                       -> SEALED: row dropped with its
 *                                              samples; EVICTING: GONE
 *        file, no row                       -> file deleted (crash between
 *                                              rename and commit)
 *        a name not of our form             -> deleted (nobody else writes
 *                                              there; invariant 7 keeps
 *                                              remote keys out)
 *   4. the catalog changes are two transactions (drop, gone); the budget is
 *      rebuilt from the SEALED bytes that survive (invariant 4).
 * Every file id seen is reported to the catalog's id allocator so no id is
 * ever reused (invariant 1).
 */
#include "cachefs/reconcile.h"
#include "cachefs/verify.h"

#include "common/clock.h"

#include "common/fault.h"
#include "common/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct disk_file {
	int kind;
	int64_t id;
	uint64_t size;
};

/* A growable array of int64 ids. */
struct idvec {
	int64_t *v;
	size_t n, cap;
};

/* What one reconciliation works on (all borrowed from the store). */
struct rec_ctx {
	const struct cfs_layout *lay;
	struct cfs_catalog *cat;
	struct cfs_budget *budget;
	struct cfs_reconcile_report *rec;
	int64_t *unsynced; /* files sealed after the last sync point (sorted) */
	size_t nunsynced;
	void *buf; /* their verification's read buffer (VERIFY_BUF bytes) */
};

#define VERIFY_BUF ((size_t)1 << 20)

static int idvec_push(struct idvec *a, int64_t id)
{
	if (a->n == a->cap) {
		size_t ncap = a->cap ? a->cap * 2 : 64;
		int64_t *nv = realloc(a->v, ncap * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		a->v = nv;
		a->cap = ncap;
	}
	a->v[a->n++] = id;
	return 0;
}

static int cmp_disk(const void *a, const void *b)
{
	const struct disk_file *x = a, *y = b;
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

static int cmp_row(const void *a, const void *b)
{
	const struct cfs_shard_info *x = a, *y = b;
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

/* Parses "<digits>" + suffix exactly (no sign, no leading zero); 0 or -1. */
static int parse_name(const char *name, const char *suffix, int64_t *id)
{
	const char *p = name;
	int64_t v = 0;

	if (*p < '1' || *p > '9')
		return -1;
	while (*p >= '0' && *p <= '9') {
		if (v > (INT64_MAX - 9) / 10)
			return -1;
		v = v * 10 + (*p++ - '0');
	}
	if (strcmp(p, suffix) != 0)
		return -1;
	*id = v;
	return 0;
}

/* Removes every entry of tmp/ (files; directories we never make are removed if empty). */
static int empty_tmp(struct rec_ctx *s, char *err, size_t errlen)
{
	int fd = dup(s->lay->tmp_fd);
	DIR *d;
	struct dirent *de;

	if (fd < 0 || !(d = fdopendir(fd))) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		snprintf(err, errlen, "%s/tmp: cannot list: %s", s->lay->dir, strerror(e));
		return -e;
	}
	rewinddir(d);
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (unlinkat(s->lay->tmp_fd, de->d_name, 0) < 0 &&
		    (errno != EISDIR || unlinkat(s->lay->tmp_fd, de->d_name, AT_REMOVEDIR) < 0)) {
			int e = errno;
			closedir(d);
			snprintf(err, errlen, "%s/tmp/%s: cannot remove: %s: remove it by hand",
				 s->lay->dir, de->d_name, strerror(e));
			return -e;
		}
		s->rec->tmp_removed++;
	}
	closedir(d);
	return 0;
}

/* Appends the files of one kind's directory to *files; deletes strays. */
static int scan_dir(struct rec_ctx *s, enum cfs_kind kind, struct disk_file **files, size_t *n,
		    size_t *cap, char *err, size_t errlen)
{
	int dfd = cfs__kind_fd(s->lay, kind);
	const char *sub = kind == CFS_KIND_TFRECORD ? "shards" : "objects";
	const char *suffix = kind == CFS_KIND_TFRECORD ? ".tfrecord" : "";
	int fd = dup(dfd);
	DIR *d;
	struct dirent *de;
	int rc = 0;

	if (fd < 0 || !(d = fdopendir(fd))) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		snprintf(err, errlen, "%s/%s: cannot list: %s", s->lay->dir, sub, strerror(e));
		return -e;
	}
	rewinddir(d);
	while ((de = readdir(d))) {
		struct stat st;
		int64_t id;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (parse_name(de->d_name, suffix, &id) < 0 ||
		    fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode)) {
			cmn_log(CMN_LOG_WARN, "%s/%s/%s: not a cache file: removed", s->lay->dir,
				sub, de->d_name);
			if (unlinkat(dfd, de->d_name, 0) < 0 && errno != ENOENT)
				unlinkat(dfd, de->d_name, AT_REMOVEDIR);
			s->rec->stray_entries++;
			continue;
		}
		if (*n == *cap) {
			size_t ncap = *cap ? *cap * 2 : 1024;
			struct disk_file *nf = realloc(*files, ncap * sizeof(**files));
			if (!nf) {
				rc = -ENOMEM;
				snprintf(err, errlen, "reconciliation: out of memory");
				break;
			}
			*files = nf;
			*cap = ncap;
		}
		(*files)[*n].kind = kind;
		(*files)[*n].id = id;
		(*files)[*n].size = (uint64_t)st.st_size;
		(*n)++;
		cfs_catalog_note_id(s->cat, id);
	}
	closedir(d);
	return rc;
}

static void remove_file(struct rec_ctx *s, int kind, int64_t id)
{
	char name[32];

	cmn_fault("reconcile");
	cfs__file_name((enum cfs_kind)kind, id, name, sizeof(name));
	if (unlinkat(cfs__kind_fd(s->lay, (enum cfs_kind)kind), name, 0) < 0 && errno != ENOENT)
		cmn_log(CMN_LOG_WARN, "%s: cannot remove %s: %s", s->lay->dir, name,
			strerror(errno));
}

/* Both lists a reconciliation merges, and the row ids it changes (all owned). */
struct rec_lists {
	struct disk_file *files; /* step 2: the files of shards/ and objects/ */
	size_t nfiles;
	struct cfs_shard_info *rows; /* step 2: SEALED and EVICTING rows */
	size_t nrows;
	struct idvec drop, gone; /* step 3's verdicts, recorded in step 4 */
	int64_t latest;		 /* epoch of the latest boundary's victims kept, or -1 */
};

static void lists_free(struct rec_lists *l)
{
	free(l->files);
	cfs_shard_info_free(l->rows, l->nrows);
	free(l->drop.v);
	free(l->gone.v);
}

/*
 * Step 2: the files of both directories (strays deleted) and the catalog's
 * SEALED and EVICTING rows, each sorted by (kind, id); l->latest is the
 * epoch whose victims stay (keep_retiring), else -1.  Returns 0 or -errno
 * (err set).
 */
static int read_lists(struct rec_ctx *s, bool keep_retiring, struct rec_lists *l, char *err,
		      size_t errlen)
{
	size_t cap = 0;
	int rc = scan_dir(s, CFS_KIND_TFRECORD, &l->files, &l->nfiles, &cap, err, errlen);
	if (rc == 0)
		rc = scan_dir(s, CFS_KIND_RAW, &l->files, &l->nfiles, &cap, err, errlen);
	if (rc < 0)
		return rc;
	rc = cfs_catalog_shards_list(s->cat, 1u << CFS_SHARD_SEALED | 1u << CFS_SHARD_EVICTING,
				     &l->rows, &l->nrows);
	if (rc < 0) {
		snprintf(err, errlen, "%s/catalog.db: cannot read the file list (%s)", s->lay->dir,
			 strerror(-rc));
		return rc;
	}
	/* the latest boundary's victims (retire = read: they retire as read) */
	l->latest = -1;
	for (size_t k = 0; keep_retiring && k < l->nrows; k++)
		if (l->rows[k].state == CFS_SHARD_EVICTING && l->rows[k].evicted_epoch > l->latest)
			l->latest = l->rows[k].evicted_epoch;
	s->rec->retiring_epoch = -1;
	if (l->nfiles > 1) /* qsort(NULL, 0) is undefined */
		qsort(l->files, l->nfiles, sizeof(*l->files), cmp_disk);
	if (l->nrows > 1)
		qsort(l->rows, l->nrows, sizeof(*l->rows), cmp_row);
	return 0;
}

/*
 * Step 3's verdict on row r: dropped or gone (its id into v); the row is
 * marked GONE in the list so that the survivors can be told (kept_rows).
 * 0 or -ENOMEM.
 */
static int strike(struct idvec *v, struct cfs_shard_info *r)
{
	r->state = CFS_SHARD_GONE;
	return idvec_push(v, r->id);
}

/* Step 3, a row without its file: SEALED dropped, EVICTING gone.  0 or -ENOMEM. */
static int merge_row_only(struct rec_ctx *s, struct rec_lists *l, struct cfs_shard_info *r)
{
	if (r->state == CFS_SHARD_EVICTING) {
		s->rec->evictions_finished++;
		return strike(&l->gone, r);
	}
	s->rec->rows_dropped++;
	return strike(&l->drop, r);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/*
 * Step 3, a file of the right size sealed after the last sync point: its
 * bytes may not have reached the disk before a crash of the system (the
 * process's own crash leaves them in the page cache), so it is verified
 * whole as `rollcache check` does (records and CRCs, or a raw object's
 * CRC) before anything serves it.  True when it fails (logged, counted).
 */
static bool unsynced_bad(struct rec_ctx *s, const struct cfs_shard_info *r)
{
	if (!s->nunsynced ||
	    !bsearch(&r->id, s->unsynced, s->nunsynced, sizeof(*s->unsynced), cmp_i64))
		return false;
	char why[256];
	uint64_t bytes;
	s->rec->unsynced_checked++;
	if (!s->buf && !(s->buf = malloc(VERIFY_BUF)))
		return false; /* unchecked: the first read checks it (verify.c) */
	int rc = cfs_verify_cache_file(s->cat, s->lay->dir, r, s->buf, VERIFY_BUF, &bytes, why,
				       sizeof(why));
	if (rc == 0)
		return false;
	cmn_log(CMN_LOG_WARN,
		"%s: file %" PRId64 ", sealed after the last sync point, fails its check (%s): "
		"dropped, counted in errors.corrupt",
		s->lay->dir, r->id, why);
	s->rec->unsynced_bad++;
	return true;
}

/*
 * Step 3, a row and its file: kept (SEALED, or a victim of the latest
 * boundary kept draining), or deleted (a torn file, an eviction to
 * finish).  Returns 0 or -ENOMEM.
 */
static int merge_both(struct rec_ctx *s, struct rec_lists *l, struct cfs_shard_info *r,
		      const struct disk_file *f)
{
	bool kept = r->state == CFS_SHARD_SEALED || r->evicted_epoch == l->latest;
	if (r->bytes == f->size && kept && unsynced_bad(s, r)) {
		remove_file(s, f->kind, f->id);
		return strike(&l->drop, r);
	}
	if (r->bytes != f->size) {
		cmn_log(CMN_LOG_WARN,
			"%s: file %" PRId64 " has %" PRIu64 " bytes, the catalog says %" PRIu64
			" (truncated or torn): dropped, counted in errors.corrupt",
			s->lay->dir, r->id, f->size, r->bytes);
		remove_file(s, f->kind, f->id);
		s->rec->size_mismatches++;
		return strike(&l->drop, r);
	}
	if (r->state == CFS_SHARD_EVICTING && r->evicted_epoch == l->latest) {
		cfs_budget_add_sealed(s->budget, r->bytes);
		cfs_budget_sealed_to_draining(s->budget, r->bytes);
		s->rec->retiring_kept++;
		s->rec->retiring_epoch = l->latest;
	} else if (r->state == CFS_SHARD_EVICTING) {
		remove_file(s, f->kind, f->id);
		s->rec->evictions_finished++;
		return strike(&l->gone, r);
	} else {
		cfs_budget_add_sealed(s->budget, r->bytes);
		s->rec->resident_files++;
		s->rec->resident_bytes += r->bytes;
	}
	return 0;
}

/* Step 3: merges the sorted lists (the table in the file comment).  0 or -ENOMEM (err set). */
static int merge(struct rec_ctx *s, struct rec_lists *l, char *err, size_t errlen)
{
	size_t i = 0, j = 0;
	while (i < l->nrows || j < l->nfiles) {
		struct cfs_shard_info *r = i < l->nrows ? &l->rows[i] : NULL;
		const struct disk_file *f = j < l->nfiles ? &l->files[j] : NULL;
		int c, rc = 0;
		if (!r)
			c = 1;
		else if (!f)
			c = -1;
		else if ((int)r->kind != f->kind)
			c = (int)r->kind < f->kind ? -1 : 1;
		else
			c = r->id < f->id ? -1 : r->id > f->id;

		if (c < 0) { /* row without file */
			rc = merge_row_only(s, l, r);
			i++;
		} else if (c > 0) { /* file without row */
			remove_file(s, f->kind, f->id);
			s->rec->files_removed++;
			j++;
		} else {
			rc = merge_both(s, l, r, f);
			i++;
			j++;
		}
		if (rc < 0) {
			snprintf(err, errlen, "reconciliation: out of memory");
			return rc;
		}
	}
	return 0;
}

/* Step 4: the catalog's two transactions.  0 or -errno (err set). */
static int record_changes(struct rec_ctx *s, const struct rec_lists *l, char *err, size_t errlen)
{
	/* deletions need no fsync: redoing them after another crash is harmless */
	int rc = cfs_catalog_shards_drop(s->cat, l->drop.v, l->drop.n);
	if (rc == 0)
		rc = cfs_catalog_shards_gone(s->cat, l->gone.v, l->gone.n);
	if (rc < 0)
		snprintf(err, errlen,
			 "%s/catalog.db: cannot record reconciliation (%s): check "
			 "the disk",
			 s->lay->dir, strerror(-rc));
	return rc;
}

/* Logs what a reconciliation repaired, when it repaired anything. */
static void log_report(const struct rec_ctx *s)
{
	const struct cfs_reconcile_report *r = s->rec;
	if (r->tmp_removed || r->rows_dropped || r->files_removed || r->size_mismatches ||
	    r->evictions_finished || r->stray_entries || r->unsynced_checked ||
	    r->unsynced_same_boot)
		cmn_log(CMN_LOG_INFO,
			"%s: reconciled: %" PRIu64 " tmp files removed, %" PRIu64
			" rows without file dropped, %" PRIu64
			" files without row removed, %" PRIu64 " size mismatches, %" PRIu64
			" evictions finished, %" PRIu64 " strays, %" PRIu64
			" files sealed after the last sync point checked (%" PRIu64
			" bad), %" PRIu64 " not checked (written since this system started)",
			s->lay->dir, r->tmp_removed, r->rows_dropped, r->files_removed,
			r->size_mismatches, r->evictions_finished, r->stray_entries,
			r->unsynced_checked, r->unsynced_bad, r->unsynced_same_boot);
}

static int cmp_row_id(const void *a, const void *b)
{
	const struct cfs_shard_info *x = a, *y = b;
	return x->id < y->id ? -1 : x->id > y->id;
}

/*
 * The rows step 3 kept (SEALED, and the latest boundary's victims kept to
 * retire), moved out of l into *kept sorted by id; the others freed.
 */
static void kept_rows(struct rec_lists *l, struct cfs_shard_info **kept, size_t *nkept)
{
	size_t k = cfs_shard_info_drop_gone(l->rows, l->nrows);
	if (k > 1)
		qsort(l->rows, k, sizeof(*l->rows), cmp_row_id);
	*kept = l->rows;
	*nkept = k;
	l->rows = NULL;
	l->nrows = 0;
}

int cfs__reconcile(const struct cfs_layout *lay, struct cfs_catalog *cat, struct cfs_budget *budget,
		   bool keep_retiring, bool same_boot, struct cfs_reconcile_report *rec,
		   struct cfs_shard_info **kept, size_t *nkept, char *err, size_t errlen)
{
	struct rec_ctx ctx = {.lay = lay, .cat = cat, .budget = budget, .rec = rec};
	struct rec_lists l = {0};
	uint64_t t0 = cmn_mono_ns();

	memset(rec, 0, sizeof(*rec));
	int rc = empty_tmp(&ctx, err, errlen); /* step 1 */
	if (rc < 0)
		return rc;
	rc = cfs_catalog_unsynced_files(cat, &ctx.unsynced, &ctx.nunsynced);
	if (rc < 0) {
		snprintf(err, errlen,
			 "%s/catalog.db: cannot read the files sealed since the last "
			 "sync point (%s)",
			 lay->dir, strerror(-rc));
		return rc;
	}
	if (same_boot) { /* only a crash of the system loses what the page cache holds */
		rec->unsynced_same_boot = ctx.nunsynced;
		ctx.nunsynced = 0;
	}
	rc = read_lists(&ctx, keep_retiring, &l, err, errlen);
	if (rc == 0)
		rc = merge(&ctx, &l, err, errlen);
	if (rc == 0)
		rc = record_changes(&ctx, &l, err, errlen);
	if (rc == 0) {
		rec->elapsed_us = (cmn_mono_ns() - t0) / 1000u;
		log_report(&ctx);
		if (kept)
			kept_rows(&l, kept, nkept);
	}
	lists_free(&l);
	free(ctx.unsynced);
	free(ctx.buf);
	return rc;
}
