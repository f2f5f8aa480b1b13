/*
 * shard_writer.c - writes one local file and seals it (DESIGN invariant 2).
 *
 * Owns a file in tmp/ from open to seal or abort, its reservation in the
 * budget, and the list of samples it holds.  Does not decide what to write
 * (sampler/ does) nor verify CRCs (the sampler did, invariant 5).
 *
 * Invariants:
 *   DESIGN 2  seal = flush, renameat(tmp -> shards|objects), then one
 *             catalog transaction for the row and all samples; the file is
 *             visible to no one before.  A raw object is created under its
 *             final name in objects/ instead (no tmp/ entry to add and
 *             remove, no rename): it is as invisible there without its row,
 *             and a file of objects/ without a row is deleted at the next
 *             start (invariant 6).  Its bytes are made durable by the
 *             store's next sync point, not by an fsync of its own (the
 *             departure and why: docs/design.md).
 * Where the store has fs-verity (verity.h), the file is sealed with it after the flush. DESIGN 4
 * written <= reserved at every moment: append/write refuse with -ENOBUFS rather than exceed the
 * reservation. DESIGN 7  the tmp and final names come from the numeric id only; the remote key of a
 * raw object is used for its display name only.
 *
 * Locking: a writer is used by one thread at a time; it calls into the
 * budget and the catalog, which lock themselves, one after the other.
 */
#include "cachefs/shard_writer.h"

#include "cachefs/names.h"
#include "cachefs/store_i.h"
#include "cachefs/verity.h"
#include "common/crc32c.h"
#include "common/fault.h"
#include "common/log.h"
#include "common/tfrecord.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Cap on samples one shard may hold (a bound on memory per writer). */
#define SW_MAX_SAMPLES ((size_t)1 << 24)

struct cfs_shard_writer {
	struct cfs_store *s;
	enum cfs_kind kind;
	uint32_t epoch;
	int64_t id;
	int fd;			   /* dir/<name> (writer_dir), O_WRONLY */
	bool placed;		   /* closed, its bytes final (cfs_raw_writer_place) */
	char name[32];		   /* file name in tmp/ and in its final directory */
	struct cmn_tfr_writer *tw; /* TFRecord framing (kind TFRECORD) */
	uint64_t reserved;	   /* bytes held in the budget */
	uint64_t written;	   /* bytes appended (buffered or not) */
	bool broken;		   /* a write failed: only abort is left */
	struct cfs_sample *samples;
	size_t nsamples, cap;
	/* raw objects */
	int64_t object_id;
	char *key;
	uint32_t crc; /* running crc32c of the raw bytes */
	bool fetched; /* count the object's fetch in the seal's transaction */
	/* sampling plan units this file completes (committed with its row) */
	int64_t plan_id;
	uint64_t plan_pass;
	uint64_t *marks;
	size_t nmarks, marks_cap;
	uint64_t *low_units, *lows; /* [nlows]: partial objects' lows (set_lows) */
	size_t nlows;
	int64_t replaces; /* a file whose current records this one holds (0: none) */
	uint32_t digest;  /* TFRecord: cfs_digest_add over the records appended */
};

/* The directory a writer's file is in while written: a raw object's own. */
static int writer_dir_fd(const struct cfs_shard_writer *w)
{
	return w->kind == CFS_KIND_RAW ? cfs__kind_fd(&w->s->lay, w->kind) : w->s->lay.tmp_fd;
}

/* "tmp" or "objects": writer_dir_fd's name, for messages. */
static const char *writer_dir(const struct cfs_shard_writer *w)
{
	return w->kind == CFS_KIND_RAW ? "objects" : "tmp";
}

static int writer_new(struct cfs_shard_writer **out, struct cfs_store *s, enum cfs_kind kind,
		      uint32_t epoch, char *err, size_t errlen)
{
	struct cfs_shard_writer *w = calloc(1, sizeof(*w));

	if (!w) {
		snprintf(err, errlen, "shard writer: out of memory");
		return -ENOMEM;
	}
	w->s = s;
	w->kind = kind;
	w->epoch = epoch;
	w->id = cfs_catalog_alloc_id(s->cat);
	cfs__file_name(kind, w->id, w->name, sizeof(w->name));
	w->fd = openat(writer_dir_fd(w), w->name,
		       O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0444);
	if (w->fd < 0) {
		int e = errno;
		snprintf(err, errlen,
			 "%s/%s/%s: cannot create: %s: check the disk and the "
			 "permissions of the cache directory",
			 s->lay.dir, writer_dir(w), w->name, strerror(e));
		free(w);
		return -e;
	}
	*out = w;
	return 0;
}

int cfs_shard_writer_open(struct cfs_shard_writer **out, struct cfs_store *s, uint32_t epoch,
			  char *err, size_t errlen)
{
	struct cfs_shard_writer *w = NULL;
	int rc = writer_new(&w, s, CFS_KIND_TFRECORD, epoch, err, errlen);

	if (rc < 0)
		return rc;
	rc = cmn_tfr_writer_open(&w->tw, w->fd, 0, err, errlen);
	if (rc < 0) {
		cfs_shard_writer_abort(w);
		return rc;
	}
	*out = w;
	return 0;
}

int cfs_raw_writer_open(struct cfs_shard_writer **out, struct cfs_store *s, uint32_t epoch,
			int64_t object_id, const char *key, char *err, size_t errlen)
{
	struct cfs_shard_writer *w = NULL;
	int rc;

	if (!key) {
		snprintf(err, errlen, "raw writer: no object key");
		return -EINVAL;
	}
	rc = writer_new(&w, s, CFS_KIND_RAW, epoch, err, errlen);
	if (rc < 0)
		return rc;
	w->object_id = object_id;
	w->key = strdup(key);
	if (!w->key) {
		snprintf(err, errlen, "raw writer: out of memory");
		cfs_shard_writer_abort(w);
		return -ENOMEM;
	}
	*out = w;
	return 0;
}

uint64_t cfs_shard_writer_record_bytes(size_t len)
{
	return (uint64_t)len + CMN_TFR_OVERHEAD;
}

int cfs_shard_writer_reserve(struct cfs_shard_writer *w, uint64_t bytes, uint64_t timeout_ms)
{
	int rc = cfs_budget_reserve(w->s->budget, bytes, timeout_ms);

	if (rc == 0)
		w->reserved += bytes;
	return rc;
}

void cfs_shard_writer_adopt(struct cfs_shard_writer *w, uint64_t bytes)
{
	w->reserved += bytes;
}

int cfs_shard_writer_try_reserve(struct cfs_shard_writer *w, uint64_t bytes)
{
	return cfs_shard_writer_reserve(w, bytes, 0);
}

uint64_t cfs_shard_writer_room(const struct cfs_shard_writer *w)
{
	return w->reserved - w->written;
}

int cfs_shard_writer_behind(struct cfs_shard_writer *w, cmn_tfr_release_fn release, void *ctx)
{
	return w->tw ? cmn_tfr_writer_behind(w->tw, release, ctx) : -EINVAL;
}

int cfs_shard_writer_append_lent(struct cfs_shard_writer *w, const void *payload, size_t len,
				 uint32_t crc, int64_t object_id, uint64_t object_offset,
				 void *block, size_t cap)
{
	uint64_t need = cfs_shard_writer_record_bytes(len);
	int rc;

	if (w->kind != CFS_KIND_TFRECORD)
		return -EINVAL;
	if (w->broken)
		return -EIO;
	if (need > w->reserved - w->written)
		return -ENOBUFS; /* invariant 4: never write unreserved bytes */
	if (w->nsamples == w->cap) {
		size_t ncap = w->cap ? w->cap * 2 : 1024;
		struct cfs_sample *ns;
		if (ncap > SW_MAX_SAMPLES)
			return -E2BIG;
		ns = realloc(w->samples, ncap * sizeof(*ns));
		if (!ns)
			return -ENOMEM;
		w->samples = ns;
		w->cap = ncap;
	}
	rc = block ? cmn_tfr_writer_append_lent(w->tw, payload, len, crc, block, cap)
		   : cmn_tfr_writer_append(w->tw, payload, len, crc, true);
	if (rc < 0) {
		w->broken = true;
		return rc;
	}
	w->digest = cfs_digest_add(w->digest, crc);
	w->samples[w->nsamples++] = (struct cfs_sample){
	    .offset = w->written,
	    .length = len,
	    .crc = crc,
	    .object_id = object_id,
	    .object_offset = object_offset,
	};
	w->written += need;
	return rc;
}

void cfs_shard_writer_set_ordinal(struct cfs_shard_writer *w, uint32_t ordinal)
{
	if (w->nsamples) {
		w->samples[w->nsamples - 1].ordinal = ordinal;
		w->samples[w->nsamples - 1].has_ordinal = true;
	}
}

int cfs_shard_writer_append(struct cfs_shard_writer *w, const void *payload, size_t len,
			    uint32_t crc, int64_t object_id, uint64_t object_offset)
{
	return cfs_shard_writer_append_lent(w, payload, len, crc, object_id, object_offset, NULL,
					    0);
}

int cfs_raw_writer_write(struct cfs_shard_writer *w, const void *data, size_t len)
{
	const char *p = data;
	size_t left = len;

	if (w->kind != CFS_KIND_RAW)
		return -EINVAL;
	if (w->broken)
		return -EIO;
	if (w->placed)
		return -EINVAL;
	if (len > w->reserved - w->written)
		return -ENOBUFS;
	while (left > 0) {
		ssize_t n = write(w->fd, p, left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			w->broken = true;
			return n < 0 ? -errno : -EIO;
		}
		p += n;
		left -= (size_t)n;
	}
	w->crc = cmn_crc32c(w->crc, data, len);
	w->written += len;
	return 0;
}

int cfs_shard_writer_set_lows(struct cfs_shard_writer *w, int64_t plan_id, const uint64_t *units,
			      const uint64_t *lows, size_t n)
{
	if (w->nmarks && w->plan_id != plan_id)
		return -EINVAL;
	uint64_t *u = malloc((n ? n : 1) * sizeof(*u)), *l = malloc((n ? n : 1) * sizeof(*l));
	if (!u || !l) {
		free(u);
		free(l);
		return -ENOMEM;
	}
	memcpy(u, units, n * sizeof(*u));
	memcpy(l, lows, n * sizeof(*l));
	free(w->low_units);
	free(w->lows);
	w->low_units = u;
	w->lows = l;
	w->nlows = n;
	w->plan_id = plan_id;
	return 0;
}

int cfs_shard_writer_add_marks(struct cfs_shard_writer *w, int64_t plan_id, uint64_t pass,
			       const uint64_t *units, size_t n)
{
	if ((w->nmarks || w->nlows) && w->plan_id != plan_id)
		return -EINVAL;
	if (w->nmarks && w->plan_pass != pass)
		return -EINVAL;
	if (w->nmarks + n > w->marks_cap) {
		size_t cap = w->marks_cap ? w->marks_cap : 64;
		while (cap < w->nmarks + n)
			cap *= 2;
		uint64_t *nm = realloc(w->marks, cap * sizeof(*nm));
		if (!nm)
			return -ENOMEM;
		w->marks = nm;
		w->marks_cap = cap;
	}
	memcpy(w->marks + w->nmarks, units, n * sizeof(*units));
	w->nmarks += n;
	w->plan_id = plan_id;
	w->plan_pass = pass;
	return 0;
}

void cfs_shard_writer_mark_fetched(struct cfs_shard_writer *w)
{
	w->fetched = true;
}

void cfs_shard_writer_replaces(struct cfs_shard_writer *w, int64_t id)
{
	w->replaces = id;
}

int64_t cfs_shard_writer_id(const struct cfs_shard_writer *w)
{
	return w->id;
}

uint64_t cfs_shard_writer_bytes(const struct cfs_shard_writer *w)
{
	return w->written;
}

uint64_t cfs_shard_writer_records(const struct cfs_shard_writer *w)
{
	return w->kind == CFS_KIND_RAW ? 1 : w->nsamples;
}

static void writer_free(struct cfs_shard_writer *w)
{
	if (w->tw)
		cmn_tfr_writer_free(w->tw);
	if (w->fd >= 0)
		close(w->fd);
	free(w->samples);
	free(w->marks);
	free(w->low_units);
	free(w->lows);
	free(w->key);
	free(w);
}

static void unlink_renamed(struct cfs_shard_writer *w);

void cfs_shard_writer_abort(struct cfs_shard_writer *w)
{
	if (!w)
		return;
	if (w->kind == CFS_KIND_RAW)
		unlink_renamed(w); /* never visible: it has no row */
	else if (unlinkat(w->s->lay.tmp_fd, w->name, 0) < 0 && errno != ENOENT)
		cmn_log(CMN_LOG_WARN, "%s/tmp/%s: cannot remove: %s (removed at next start)",
			w->s->lay.dir, w->name, strerror(errno));
	cfs_budget_release(w->s->budget, w->reserved);
	writer_free(w);
}

/* A file's rows: with a savepoint of their own, or flat (catalog.h). */
static int insert_rows(struct cfs_shard_writer *w, const struct cfs_shard_new *sh,
		       const struct cfs_sample *samples, size_t n, bool flat)
{
	return flat ? cfs_catalog_shard_insert_flat(w->s->cat, sh, samples, n)
		    : cfs_catalog_shard_insert(w->s->cat, sh, samples, n);
}

/*
 * Inserts the raw object's row under its display name (suffix on clash:
 * the name is the file row's, the first one inserted, so a clash leaves
 * nothing of the file even when flat).
 */
static int insert_raw(struct cfs_shard_writer *w, struct cfs_shard_new *sh,
		      const struct cfs_sample *sample, bool flat)
{
	char name[CFS_DISPLAY_MAX];
	bool lossy = false;
	int rc = cfs_sanitize_key(w->key, name, sizeof(name), &lossy);

	/* a lossy name takes the id suffix at once, keeping names injective */
	if (rc == 0 && lossy)
		rc = cfs_display_name(w->key, w->id, true, name, sizeof(name));
	if (rc < 0)
		return rc;
	sh->name = name;
	rc = insert_rows(w, sh, sample, 1, flat);
	if (rc == -EEXIST && !lossy) {
		rc = cfs_display_name(w->key, w->id, true, name, sizeof(name));
		if (rc == 0)
			rc = insert_rows(w, sh, sample, 1, flat);
	}
	return rc;
}

/*
 * GROUP COMMIT.  A group of writers is sealed with invariant 2's steps
 * (docs/design.md, "Departures": durable at the next sync point) each done
 * once for the whole group, in the same order for every file of it:
 *
 *   1. every file flushed; where the store has fs-verity, each file
 *      sealed with it (verity.h);
 *   2. every TFRecord file renamed from tmp/ into shards/ (a raw object
 *      is in objects/ from its creation);
 *   3. ONE catalog transaction: every file's row (which lists it in
 *      `unsynced`), its samples, its plan marks and its object's fetch
 *      count; with a savepoint per file only when one fails without
 *      (group_insert).
 *
 * Its bytes reach the disk by the store's next sync point (store.h,
 * cfs_store_sync: an fsync of every file sealed since the last, or one
 * syncfs() when they are many), not
 * before it is visible: a crash of the process loses nothing of them (the
 * page cache keeps them), and after a crash of the system start-up
 * verifies every file sealed after the last sync point before anything
 * serves it (reconcile.c).  No file of the group is visible before its
 * step 3, and no step of one file runs before the earlier step of every
 * file (a kill -9 anywhere leaves tmp/ files, which reconciliation
 * empties, or files of shards/ and objects/ without rows, which it
 * deletes: invariant 6).
 * A file that fails alone (a write error, a display name refused by the
 * catalog) is dropped from the group with its own error; the transaction
 * failing fails every file.
 */

/* Removes a file renamed into its directory whose row is not committed. */
static void unlink_renamed(struct cfs_shard_writer *w)
{
	struct cfs_store *s = w->s;
	int dfd = cfs__kind_fd(&s->lay, w->kind);

	if (unlinkat(dfd, w->name, 0) < 0 && errno != ENOENT)
		cmn_log(CMN_LOG_WARN, "%s/%s/%s: cannot remove: %s (removed at next start)",
			s->lay.dir, w->kind == CFS_KIND_TFRECORD ? "shards" : "objects", w->name,
			strerror(errno));
}

/* The catalog part of sealing one file.  Inside the group's transaction. */
static int insert_one(struct cfs_shard_writer *w, bool flat)
{
	struct cfs_plan_marks marks = {w->plan_id,   w->plan_pass, w->marks, w->nmarks,
				       w->low_units, w->lows,	   w->nlows};
	struct cfs_shard_new sh = {
	    .marks = w->nmarks || w->nlows ? &marks : NULL,
	    .id = w->id,
	    .kind = w->kind,
	    .bytes = w->written,
	    .created_epoch = w->epoch,
	    .object_id = w->object_id,
	    .has_digest = w->kind == CFS_KIND_TFRECORD,
	    .digest = w->digest,
	};
	int rc;

	if (w->kind == CFS_KIND_RAW) {
		struct cfs_sample raw_sample = {
		    .offset = 0,
		    .length = w->written,
		    .crc = w->crc,
		    .object_id = w->object_id,
		    .object_offset = 0,
		};
		rc = insert_raw(w, &sh, &raw_sample, flat);
	} else {
		rc = insert_rows(w, &sh, w->samples, w->nsamples, flat);
	}
	if (rc == 0 && w->replaces)
		rc = cfs_catalog_shard_withdraw(w->s->cat, w->replaces, CFS_WITHDRAW_STALE);
	if (rc == 0 && w->fetched) {
		/*
		 * A counter only: its failure must not fail a file whose row is
		 * already in the transaction (the file is then kept, as when
		 * the count was a transaction of its own); -ENOENT: the object
		 * went stale meanwhile.
		 */
		int frc = cfs_catalog_object_fetched(w->s->cat, w->object_id, w->epoch);
		if (frc < 0 && frc != -ENOENT)
			cmn_log(CMN_LOG_WARN, "%s/catalog.db: object %" PRId64 ": fetch count: %s",
				w->s->lay.dir, w->object_id, strerror(-frc));
	}
	return rc;
}

/* "shards" or "objects": the directory a writer's file is sealed into. */
static const char *kind_dir(const struct cfs_shard_writer *w)
{
	return w->kind == CFS_KIND_TFRECORD ? "shards" : "objects";
}

/*
 * Step 1's fs-verity part for one file (the store has fs-verity): its
 * writer descriptor closed (no writer may remain) and the file sealed;
 * the read-only descriptor that sealed it replaces it.  0 or -errno (err
 * set).
 */
static int verity_one(struct cfs_store *s, struct cfs_shard_writer *w, char *err, size_t errlen)
{
	cmn_tfr_writer_free(w->tw); /* flushed by group_check */
	w->tw = NULL;
	close(w->fd);
	w->fd = cfs_verity_enable(writer_dir_fd(w), w->name);
	if (w->fd >= 0)
		return 0;
	int rc = w->fd;
	snprintf(err, errlen, "%s/%s/%s: sealing it with fs-verity failed: %s", s->lay.dir,
		 writer_dir(w), w->name, strerror(-rc));
	return rc;
}

/*
 * Step 2 for one file: a TFRecord file renamed from tmp/ (a raw object is
 * in objects/ already).  0 or -errno (err set).
 */
static int rename_one(struct cfs_store *s, struct cfs_shard_writer *w, char *err, size_t errlen)
{
	if (w->kind == CFS_KIND_RAW)
		return 0;
	if (renameat(s->lay.tmp_fd, w->name, cfs__kind_fd(&s->lay, w->kind), w->name) == 0)
		return 0;
	int rc = -errno;
	snprintf(err, errlen, "%s: rename tmp/%s -> %s/%s failed: %s", s->lay.dir, w->name,
		 kind_dir(w), w->name, strerror(-rc));
	return rc;
}

int cfs_raw_writer_place(struct cfs_shard_writer *w, char *err, size_t errlen)
{
	struct cfs_store *s = w->s;
	int rc;
	if (w->kind != CFS_KIND_RAW || w->placed) {
		snprintf(err, errlen, "%s/objects/%s: not a raw object left to place", s->lay.dir,
			 w->name);
		return -EINVAL;
	}
	if (w->broken) {
		snprintf(err, errlen,
			 "%s/objects/%s: an earlier write failed: the file was discarded",
			 s->lay.dir, w->name);
		return -EIO;
	}
	if (s->verity && (rc = verity_one(s, w, err, errlen)) < 0)
		return rc;
	cmn_fault("before_rename");
	w->placed = true;
	close(w->fd); /* nothing more is written: a queued writer holds no descriptor */
	w->fd = -1;
	return 0;
}

/*
 * Before step 1: drops from the group (aborted, ws[i] NULL, rcs[i] its
 * error, err its message) each writer that cannot be sealed: a failed
 * write, a TFRecord file without a record, a flush that fails.  Sets
 * rcs[i] 0 for the others and returns how many they are.  A placed file
 * (cfs_raw_writer_place) passed these checks when it was placed.
 */
static size_t group_check(struct cfs_shard_writer **ws, size_t n, int *rcs, char *err,
			  size_t errlen)
{
	const struct cfs_store *s = ws[0]->s;
	size_t live = 0;
	for (size_t i = 0; i < n; i++) {
		struct cfs_shard_writer *w = ws[i];
		rcs[i] = 0;
		if (w->placed) {
			live++;
			continue;
		}
		if (w->broken) {
			rcs[i] = -EIO;
			snprintf(err, errlen,
				 "%s/%s/%s: an earlier write failed: the file was discarded",
				 s->lay.dir, writer_dir(w), w->name);
		} else if (w->kind == CFS_KIND_TFRECORD && w->nsamples == 0) {
			rcs[i] = -ENODATA;
			snprintf(err, errlen, "%s/tmp/%s: no record was appended: nothing to seal",
				 s->lay.dir, w->name);
		} else if (w->tw && (rcs[i] = cmn_tfr_writer_flush(w->tw)) < 0) {
			snprintf(err, errlen, "%s/tmp/%s: write failed: %s", s->lay.dir, w->name,
				 strerror(-rcs[i]));
		}
		if (rcs[i]) {
			cfs_shard_writer_abort(w);
			ws[i] = NULL;
		} else {
			live++;
		}
	}
	return live;
}

/*
 * Step 1, second part, where the store has fs-verity: each live file not
 * placed yet sealed with it (verity_one).  A file that cannot be sealed is
 * dropped with its error.  Returns how many files are left.
 */
static size_t group_verity(struct cfs_store *s, struct cfs_shard_writer **ws, size_t n, int *rcs,
			   size_t live, char *err, size_t errlen)
{
	for (size_t i = 0; i < n && s->verity; i++) {
		struct cfs_shard_writer *w = ws[i];
		if (!w || w->placed || (rcs[i] = verity_one(s, w, err, errlen)) == 0)
			continue;
		cfs_shard_writer_abort(w);
		ws[i] = NULL;
		live--;
	}
	return live;
}

/*
 * Step 2: every TFRecord file renamed from tmp/ into shards/ (rename_one).
 * A file whose rename fails is dropped (aborted, rcs[i] its error).
 * Returns how many files are in their directory now.
 */
static size_t group_rename(struct cfs_store *s, struct cfs_shard_writer **ws, size_t n, int *rcs,
			   char *err, size_t errlen)
{
	size_t nrenamed = 0;
	for (size_t i = 0; i < n; i++) {
		struct cfs_shard_writer *w = ws[i];
		if (!w)
			continue;
		if (!w->placed && (rcs[i] = rename_one(s, w, err, errlen)) < 0) {
			cfs_shard_writer_abort(w);
			ws[i] = NULL;
			continue;
		}
		nrenamed++;
	}
	return nrenamed;
}

/*
 * The admission counters of the files inserted flat (rcs[i] 0): one delta
 * an epoch of the group (cfs_catalog_admit_flat).  0 or -errno.
 */
static int group_admit(struct cfs_store *s, struct cfs_shard_writer **ws, size_t n, const int *rcs)
{
	for (size_t i = 0; i < n; i++) {
		if (!ws[i] || rcs[i])
			continue;
		uint32_t epoch = ws[i]->epoch;
		bool counted = false;
		for (size_t k = 0; k < i && !counted; k++)
			counted = ws[k] && rcs[k] == 0 && ws[k]->epoch == epoch;
		if (counted)
			continue;
		uint64_t files = 0, bytes = 0, records = 0;
		for (size_t k = i; k < n; k++) {
			if (!ws[k] || rcs[k] || ws[k]->epoch != epoch)
				continue;
			files++;
			bytes += ws[k]->written;
			records += cfs_shard_writer_records(ws[k]);
		}
		int rc = cfs_catalog_admit_flat(s->cat, epoch, files, bytes, records);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/*
 * Step 3: one transaction with every file's rows, first flat (no
 * savepoint per file, and the admission counters once an epoch: catalog.h,
 * cfs_catalog_shard_insert_flat).  Where a file fails flat, that
 * transaction is rolled back and the group's rows go in again with a
 * savepoint per file, so that a file the catalog refuses gets its own
 * rcs[i] and the others commit.  Returns 0, or -errno when the
 * transaction could not start or commit (err set).
 */
static int group_insert(struct cfs_store *s, struct cfs_shard_writer **ws, size_t n, int *rcs,
			size_t nrenamed, char *err, size_t errlen)
{
	int rc = 0;
	for (int flat = 1; flat >= 0; flat--) {
		rc = cfs_catalog_begin(s->cat);
		if (rc < 0) {
			snprintf(err, errlen, "%s/catalog.db: cannot start a transaction: %s",
				 s->lay.dir, strerror(-rc));
			return rc;
		}
		bool failed = false;
		for (size_t i = 0; i < n && !failed; i++) {
			if (!ws[i])
				continue;
			rcs[i] = insert_one(ws[i], flat);
			if (rcs[i] < 0 && flat) {
				failed = true;
			} else if (rcs[i] < 0) {
				snprintf(err, errlen, "%s/catalog.db: cannot record %s/%s: %s",
					 s->lay.dir, kind_dir(ws[i]), ws[i]->name,
					 strerror(-rcs[i]));
			}
		}
		if (!failed && flat && group_admit(s, ws, n, rcs) < 0)
			failed = true; /* again with a savepoint per file, which counts each */
		if (!failed)
			break;
		cfs_catalog_rollback(s->cat);
		for (size_t i = 0; i < n; i++)
			if (ws[i])
				rcs[i] = 0;
	}
	rc = cfs_catalog_commit(s->cat);
	if (rc < 0)
		snprintf(err, errlen, "%s/catalog.db: cannot commit %zu files: %s", s->lay.dir,
			 nrenamed, strerror(-rc));
	return rc;
}

/*
 * After the commit: each file with its row is sealed (its bytes move from
 * reserved to sealed in the budget); one the catalog refused is removed,
 * never visible.  Every writer is freed.
 */
static void group_done(struct cfs_store *s, struct cfs_shard_writer **ws, size_t n, const int *rcs)
{
	for (size_t i = 0; i < n; i++) {
		struct cfs_shard_writer *w = ws[i];
		if (!w)
			continue;
		if (rcs[i] == 0) {
			cfs_budget_commit(s->budget, w->reserved, w->written);
			writer_free(w);
		} else {
			unlink_renamed(w); /* never visible: its row is missing */
			cfs_shard_writer_abort(w);
		}
		ws[i] = NULL;
	}
}

/*
 * A step failed for the whole group: every writer left gets rc and is
 * aborted; with `renamed`, its file is first removed from its directory.
 */
static void group_fail(struct cfs_shard_writer **ws, size_t n, int *rcs, int rc, bool renamed)
{
	if (renamed)
		for (size_t i = 0; i < n; i++)
			if (ws[i])
				unlink_renamed(ws[i]);
	for (size_t i = 0; i < n; i++) {
		if (!ws[i])
			continue;
		rcs[i] = rc;
		cfs_shard_writer_abort(ws[i]);
		ws[i] = NULL;
	}
}

int cfs_shard_writer_seal_group(struct cfs_shard_writer **ws, size_t n, int *rcs, char *err,
				size_t errlen)
{
	if (n == 0)
		return 0;
	struct cfs_store *s = ws[0]->s;
	err[0] = '\0';
	/* 1. every file flushed, and sealed with fs-verity where the store has it */
	size_t live = group_check(ws, n, rcs, err, errlen);
	if (group_verity(s, ws, n, rcs, live, err, errlen) == 0)
		return 0;
	/* 2. every file renamed into shards/ or objects/ */
	cmn_fault("before_rename");
	size_t nrenamed = group_rename(s, ws, n, rcs, err, errlen);
	if (nrenamed == 0)
		return 0;
	/* 3. one transaction: every file's row, samples, marks (group_insert) */
	cmn_fault("before_commit");
	int rc = group_insert(s, ws, n, rcs, nrenamed, err, errlen);
	if (rc < 0) {
		group_fail(ws, n, rcs, rc, true);
		return rc;
	}
	group_done(s, ws, n, rcs);
	return 0;
}

int cfs_shard_writer_seal(struct cfs_shard_writer *w, int64_t *id, char *err, size_t errlen)
{
	int64_t wid = w->id;
	int one_rc, rc = cfs_shard_writer_seal_group(&w, 1, &one_rc, err, errlen);

	if (rc == 0)
		rc = one_rc;
	if (rc == 0 && id)
		*id = wid;
	return rc;
}
