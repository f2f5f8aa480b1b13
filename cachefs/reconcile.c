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
 *        row + file, sizes agree, EVICTING  -> file deleted, row GONE; with
 *                                              keep_retiring, a victim of the
 *                                              latest boundary stays (draining)
 *        row + file, sizes differ           -> both dropped (a torn file;
 *                                              logged, and the mount counts
 *                                              it in errors.corrupt)
 *        row, no file                       -> SEALED: row dropped with its
 *                                              samples; EVICTING: row GONE
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
};

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

int cfs__reconcile(const struct cfs_layout *lay, struct cfs_catalog *cat, struct cfs_budget *budget,
		   bool keep_retiring, struct cfs_reconcile_report *rec, char *err, size_t errlen)
{
	struct rec_ctx ctx = {.lay = lay, .cat = cat, .budget = budget, .rec = rec};
	struct rec_ctx *s = &ctx;
	struct disk_file *files = NULL;
	size_t nfiles = 0, cap = 0, nrows = 0, i = 0, j = 0;
	struct cfs_shard_info *rows = NULL;
	struct idvec drop = {0}, gone = {0};
	uint64_t t0 = cmn_mono_ns();
	int rc;

	memset(s->rec, 0, sizeof(*s->rec));
	rc = empty_tmp(s, err, errlen);
	if (rc < 0)
		return rc;
	rc = scan_dir(s, CFS_KIND_TFRECORD, &files, &nfiles, &cap, err, errlen);
	if (rc == 0)
		rc = scan_dir(s, CFS_KIND_RAW, &files, &nfiles, &cap, err, errlen);
	if (rc < 0)
		goto out;
	rc = cfs_catalog_shards_list(s->cat, 1u << CFS_SHARD_SEALED | 1u << CFS_SHARD_EVICTING,
				     &rows, &nrows);
	if (rc < 0) {
		snprintf(err, errlen, "%s/catalog.db: cannot read the file list (%s)", s->lay->dir,
			 strerror(-rc));
		goto out;
	}
	/* the latest boundary's victims (retire = read: they retire as read) */
	int64_t latest = -1;
	for (size_t k = 0; keep_retiring && k < nrows; k++)
		if (rows[k].state == CFS_SHARD_EVICTING && rows[k].evicted_epoch > latest)
			latest = rows[k].evicted_epoch;
	s->rec->retiring_epoch = -1;
	if (nfiles > 1) /* qsort(NULL, 0) is undefined */
		qsort(files, nfiles, sizeof(*files), cmp_disk);
	if (nrows > 1)
		qsort(rows, nrows, sizeof(*rows), cmp_row);

	while (i < nrows || j < nfiles) {
		int c;
		if (i == nrows)
			c = 1;
		else if (j == nfiles)
			c = -1;
		else if ((int)rows[i].kind != files[j].kind)
			c = (int)rows[i].kind < files[j].kind ? -1 : 1;
		else
			c = rows[i].id < files[j].id ? -1 : rows[i].id > files[j].id;

		if (c < 0) { /* row without file */
			if (rows[i].state == CFS_SHARD_EVICTING) {
				rc = idvec_push(&gone, rows[i].id);
				s->rec->evictions_finished++;
			} else {
				rc = idvec_push(&drop, rows[i].id);
				s->rec->rows_dropped++;
			}
			i++;
		} else if (c > 0) { /* file without row */
			remove_file(s, files[j].kind, files[j].id);
			s->rec->files_removed++;
			j++;
		} else {
			if (rows[i].bytes != files[j].size) {
				cmn_log(CMN_LOG_WARN,
					"%s: file %" PRId64 " has %" PRIu64
					" bytes, the catalog says %" PRIu64
					" (truncated or torn): dropped, counted in errors.corrupt",
					s->lay->dir, rows[i].id, files[j].size, rows[i].bytes);
				remove_file(s, files[j].kind, files[j].id);
				rc = idvec_push(&drop, rows[i].id);
				s->rec->size_mismatches++;
			} else if (rows[i].state == CFS_SHARD_EVICTING &&
				   rows[i].evicted_epoch == latest) {
				cfs_budget_add_sealed(s->budget, rows[i].bytes);
				cfs_budget_sealed_to_draining(s->budget, rows[i].bytes);
				s->rec->retiring_kept++;
				s->rec->retiring_epoch = latest;
			} else if (rows[i].state == CFS_SHARD_EVICTING) {
				remove_file(s, files[j].kind, files[j].id);
				rc = idvec_push(&gone, rows[i].id);
				s->rec->evictions_finished++;
			} else {
				cfs_budget_add_sealed(s->budget, rows[i].bytes);
				s->rec->resident_files++;
				s->rec->resident_bytes += rows[i].bytes;
			}
			i++;
			j++;
		}
		if (rc < 0) {
			snprintf(err, errlen, "reconciliation: out of memory");
			goto out;
		}
	}
	/* deletions need no fsync: redoing them after another crash is harmless */
	rc = cfs_catalog_shards_drop(s->cat, drop.v, drop.n);
	if (rc == 0)
		rc = cfs_catalog_shards_gone(s->cat, gone.v, gone.n);
	if (rc < 0) {
		snprintf(err, errlen,
			 "%s/catalog.db: cannot record reconciliation (%s): check "
			 "the disk",
			 s->lay->dir, strerror(-rc));
		goto out;
	}
	s->rec->elapsed_us = (cmn_mono_ns() - t0) / 1000u;
	if (s->rec->tmp_removed || s->rec->rows_dropped || s->rec->files_removed ||
	    s->rec->size_mismatches || s->rec->evictions_finished || s->rec->stray_entries)
		cmn_log(
		    CMN_LOG_INFO,
		    "%s: reconciled: %" PRIu64 " tmp files removed, %" PRIu64
		    " rows without file dropped, %" PRIu64 " files without row removed, %" PRIu64
		    " size mismatches, %" PRIu64 " evictions finished, %" PRIu64 " strays",
		    s->lay->dir, s->rec->tmp_removed, s->rec->rows_dropped, s->rec->files_removed,
		    s->rec->size_mismatches, s->rec->evictions_finished, s->rec->stray_entries);
out:
	free(files);
	cfs_shard_info_free(rows, nrows);
	free(drop.v);
	free(gone.v);
	return rc;
}
