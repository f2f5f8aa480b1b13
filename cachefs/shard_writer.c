/*
 * shard_writer.c - writes one local file and seals it (DESIGN invariant 2).
 *
 * Owns a file in tmp/ from open to seal or abort, its reservation in the
 * budget, and the list of samples it holds.  Does not decide what to write
 * (sampler/ does) nor verify CRCs (the sampler did, invariant 5).
 *
 * Invariants:
 *   DESIGN 2  seal = flush, fsync(file), renameat(tmp -> shards|objects),
 *             fsync(that dir), then one catalog transaction for the row
 *             and all samples; the file is visible to no one before.
 *   DESIGN 4  written <= reserved at every moment: append/write refuse
 *             with -ENOBUFS rather than exceed the reservation.
 *   DESIGN 7  the tmp and final names come from the numeric id only; the
 *             remote key of a raw object is used for its display name only.
 *
 * Locking: a writer is used by one thread at a time; it calls into the
 * budget and the catalog, which lock themselves, one after the other.
 */
#include "cachefs/shard_writer.h"

#include "cachefs/names.h"
#include "cachefs/store_i.h"
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
	int fd;			   /* tmp/<name>, O_WRONLY */
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
	/* sampling plan units this file completes (committed with its row) */
	int64_t plan_id;
	uint64_t plan_pass;
	uint64_t *marks;
	size_t nmarks, marks_cap;
};

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
	w->fd = openat(s->lay.tmp_fd, w->name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
		       0444);
	if (w->fd < 0) {
		int e = errno;
		snprintf(err, errlen,
			 "%s/tmp/%s: cannot create: %s: check the disk and the "
			 "permissions of the cache directory",
			 s->lay.dir, w->name, strerror(e));
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

int cfs_shard_writer_append(struct cfs_shard_writer *w, const void *payload, size_t len,
			    uint32_t crc, int64_t object_id, uint64_t object_offset)
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
	rc = cmn_tfr_writer_append(w->tw, payload, len, crc, true);
	if (rc < 0) {
		w->broken = true;
		return rc;
	}
	w->samples[w->nsamples++] = (struct cfs_sample){
	    .offset = w->written,
	    .length = len,
	    .crc = crc,
	    .object_id = object_id,
	    .object_offset = object_offset,
	};
	w->written += need;
	return 0;
}

int cfs_raw_writer_write(struct cfs_shard_writer *w, const void *data, size_t len)
{
	const char *p = data;
	size_t left = len;

	if (w->kind != CFS_KIND_RAW)
		return -EINVAL;
	if (w->broken)
		return -EIO;
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

int cfs_shard_writer_add_marks(struct cfs_shard_writer *w, int64_t plan_id, uint64_t pass,
			       const uint64_t *units, size_t n)
{
	if (w->nmarks && (w->plan_id != plan_id || w->plan_pass != pass))
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
	free(w->key);
	free(w);
}

void cfs_shard_writer_abort(struct cfs_shard_writer *w)
{
	if (!w)
		return;
	if (unlinkat(w->s->lay.tmp_fd, w->name, 0) < 0 && errno != ENOENT)
		cmn_log(CMN_LOG_WARN, "%s/tmp/%s: cannot remove: %s (removed at next start)",
			w->s->lay.dir, w->name, strerror(errno));
	cfs_budget_release(w->s->budget, w->reserved);
	writer_free(w);
}

/* Inserts the raw object's row under its display name (suffix on clash). */
static int insert_raw(struct cfs_shard_writer *w, struct cfs_shard_new *sh,
		      const struct cfs_sample *sample)
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
	rc = cfs_catalog_shard_insert(w->s->cat, sh, sample, 1);
	if (rc == -EEXIST && !lossy) {
		rc = cfs_display_name(w->key, w->id, true, name, sizeof(name));
		if (rc == 0)
			rc = cfs_catalog_shard_insert(w->s->cat, sh, sample, 1);
	}
	return rc;
}

int cfs_shard_writer_seal(struct cfs_shard_writer *w, int64_t *id, char *err, size_t errlen)
{
	struct cfs_store *s = w->s;
	int dfd = cfs__kind_fd(&s->lay, w->kind);
	const char *sub = w->kind == CFS_KIND_TFRECORD ? "shards" : "objects";
	struct cfs_shard_new sh;
	struct cfs_sample raw_sample;
	int rc;

	if (w->broken) {
		snprintf(err, errlen, "%s/tmp/%s: an earlier write failed: the file was discarded",
			 s->lay.dir, w->name);
		cfs_shard_writer_abort(w);
		return -EIO;
	}
	if (w->kind == CFS_KIND_TFRECORD && w->nsamples == 0) {
		snprintf(err, errlen, "%s/tmp/%s: no record was appended: nothing to seal",
			 s->lay.dir, w->name);
		cfs_shard_writer_abort(w);
		return -ENODATA;
	}
	/* 1. flush and fsync the file in tmp/ */
	if (w->tw && (rc = cmn_tfr_writer_flush(w->tw)) < 0) {
		snprintf(err, errlen, "%s/tmp/%s: write failed: %s", s->lay.dir, w->name,
			 strerror(-rc));
		goto fail;
	}
	cmn_fault("before_fsync");
	if (fsync(w->fd) < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s/tmp/%s: fsync failed: %s", s->lay.dir, w->name,
			 strerror(-rc));
		goto fail;
	}
	/* 2. rename into shards/ or objects/ and fsync that directory */
	if (renameat(s->lay.tmp_fd, w->name, dfd, w->name) < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: rename tmp/%s -> %s/%s failed: %s", s->lay.dir, w->name,
			 sub, w->name, strerror(-rc));
		goto fail;
	}
	if (fsync(dfd) < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s/%s: fsync of the directory failed: %s", s->lay.dir, sub,
			 strerror(-rc));
		goto fail_renamed;
	}
	/* 3. the catalog row, every sample row and the plan marks, one transaction */
	cmn_fault("before_commit");
	struct cfs_plan_marks marks = {w->plan_id, w->plan_pass, w->marks, w->nmarks};
	sh = (struct cfs_shard_new){
	    .marks = w->nmarks ? &marks : NULL,
	    .id = w->id,
	    .kind = w->kind,
	    .bytes = w->written,
	    .created_epoch = w->epoch,
	    .object_id = w->object_id,
	};
	if (w->kind == CFS_KIND_RAW) {
		raw_sample = (struct cfs_sample){
		    .offset = 0,
		    .length = w->written,
		    .crc = w->crc,
		    .object_id = w->object_id,
		    .object_offset = 0,
		};
		rc = insert_raw(w, &sh, &raw_sample);
	} else {
		rc = cfs_catalog_shard_insert(s->cat, &sh, w->samples, w->nsamples);
	}
	if (rc < 0) {
		snprintf(err, errlen, "%s/catalog.db: cannot record %s/%s: %s", s->lay.dir, sub,
			 w->name, strerror(-rc));
		goto fail_renamed;
	}
	cfs_budget_commit(s->budget, w->reserved, w->written);
	if (id)
		*id = w->id;
	writer_free(w);
	return 0;

fail_renamed:
	/* never visible: the row is missing, so remove the file now */
	if (unlinkat(dfd, w->name, 0) < 0 && errno != ENOENT)
		cmn_log(CMN_LOG_WARN, "%s/%s/%s: cannot remove: %s (removed at next start)",
			s->lay.dir, sub, w->name, strerror(errno));
fail:
	cfs_shard_writer_abort(w);
	return rc;
}
