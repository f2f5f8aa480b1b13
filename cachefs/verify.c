/*
 * verify.c - record checks of sealed files after admission (see verify.h).
 *
 * Owns the record scanner (one buffered pass over a TFRecord file, a record
 * at a time, never holding more than the caller's buffer), the first-pass
 * state of the read path (efile.v_ok, v_bad1, v_queued) and the queue of
 * corrupt file ids the read path hands to the daemon.  Does not touch the
 * catalog, delete files or count `errors.corrupt`: the daemon does that for
 * each id it takes (daemon/scrub.c), so the read path never waits on SQL.
 *
 * Invariants.
 *   V1  a daemon-served read returns bytes of [0, v_ok) only: fs_read.c calls
 *       cfs_verify_read() before reading and answers EIO when it fails, so
 *       no byte of a record whose CRC failed is ever returned by the daemon
 *       (DESIGN 5 after admission).
 *   V2  v_ok goes from 0 to the file's size at once, on the file's first
 *       daemon-served read, after every record of it passed its CRC and,
 *       for a TFRecord file whose row has one, the records' digest matched
 *       the catalog's (a record rewritten with a valid frame fails it); only
 *       V5 sets it back to 0; v_bad1, once set, is only lowered.
 *   V3  passthrough needs cfs_verify_done(): the kernel serves a file's
 *       bytes by itself only after the daemon checked all of them.
 *   V4  an id is queued at most once per efile (v_queued), so the daemon
 *       drops each corrupt file once.
 *   V5  a file whose ctime changed since it was first opened is checked
 *       again from its start (cfs_verify_open resets v_ok): a write into
 *       CACHE_DIR after the first pass is found by the next daemon-served
 *       read, and the file is not passed through until it passed again.
 *
 * Locking: a first-pass check of a file runs under one of STRIPES mutexes
 * (chosen by the file's id), so two readers of one file never check the
 * same records twice and readers of different files rarely wait on each
 * other; v->qmu protects the queue.  Both are leaves.  Posting to the
 * events object happens after qmu is released.
 */
#include "cachefs/verify.h"

#include "cachefs/epoch.h"
#include "cachefs/layout.h"
#include "common/crc32c.h"
#include "common/events.h"
#include "common/log.h"
#include "common/tfrecord.h"
#include "common/thread_buf.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STRIPES	  64
#define QUEUE_MAX 1024
#define RBUF_SIZE ((size_t)256 << 10) /* the read path's scratch buffer per thread */

/* ---- the record scanner ------------------------------------------------ */

/* A window of the file in the caller's buffer. */
struct win {
	int fd;
	uint64_t size;
	uint8_t *buf;
	size_t cap;
	uint64_t off; /* file offset of buf[0] */
	size_t len;   /* valid bytes */
	uint64_t bytes_read;
	uint64_t hint; /* 0, or read no further ahead than this when it can be helped */
};

/* Full pread; a short count means the file is shorter than expected. */
static int pread_full(int fd, void *buf, size_t n, uint64_t off, size_t *got)
{
	size_t done = 0;
	while (done < n) {
		ssize_t r = pread(fd, (char *)buf + done, n - done, (off_t)(off + done));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		done += (size_t)r;
	}
	*got = done;
	return 0;
}

/*
 * Makes [off, off + n) available at *p (n <= cap).  Returns 0, -EBADMSG when
 * the file ends first (it shrank under us), or -errno.
 */
static int win_get(struct win *w, uint64_t off, size_t n, const uint8_t **p)
{
	if (off >= w->off && off + n <= w->off + w->len) {
		*p = w->buf + (off - w->off);
		return 0;
	}
	size_t want = w->cap;
	if (w->size - off < want)
		want = (size_t)(w->size - off);
	if (w->hint && (w->hint <= off || w->hint - off < want)) /* past it: just what is needed */
		want = w->hint > off ? (size_t)(w->hint - off) : n;
	if (want < n)
		want = n;
	size_t got = 0;
	int rc = pread_full(w->fd, w->buf, want, off, &got);
	if (rc)
		return rc;
	w->bytes_read += got;
	w->off = off;
	w->len = got;
	if (got < n)
		return -EBADMSG;
	*p = w->buf;
	return 0;
}

/*
 * Checks the record at pos: framing (the frame walker, headers only), payload
 * CRC against the footer and, with want, length and CRC against the
 * catalog.  The payload's CRC is taken through the window in pieces, so a
 * record larger than the caller's buffer is checked too.  Returns 0 with
 * *next and *crc_out (its payload CRC), -EBADMSG with why, or -errno with
 * why.
 */
static int check_record(struct win *w, uint64_t pos, const struct cfs_sample *want, uint64_t *next,
			uint32_t *crc_out, char *why, size_t whylen)
{
	struct cmn_tfr_frame fr;
	const uint8_t *p;
	int rc;

	if (w->size - pos < CMN_TFR_OVERHEAD) {
		snprintf(why, whylen,
			 "record at %" PRIu64 ": %" PRIu64 " bytes left, a record needs %d", pos,
			 w->size - pos, CMN_TFR_OVERHEAD);
		return -EBADMSG;
	}
	rc = win_get(w, pos, CMN_TFR_HEADER_SIZE, &p);
	if (rc)
		goto io;
	struct cmn_tfr_walk hw = {.buf = p,
				  .len = CMN_TFR_HEADER_SIZE,
				  .base = pos,
				  .max_record = SIZE_MAX,
				  .headers_only = true};
	if (cmn_tfr_walk_next(&hw, &fr) == -EILSEQ) {
		snprintf(why, whylen, "record at %" PRIu64 ": length crc mismatch", pos);
		return -EBADMSG;
	}
	/* also a length above the walker's cap (-EMSGSIZE): it exceeds any file */
	if (fr.len > w->size - pos - CMN_TFR_OVERHEAD) {
		snprintf(why, whylen,
			 "record at %" PRIu64 ": length %" PRIu64 " runs past the end (%" PRIu64
			 " bytes)",
			 pos, fr.len, w->size);
		return -EBADMSG;
	}
	if (want && want->length != fr.len) {
		snprintf(why, whylen,
			 "record at %" PRIu64 ": length %" PRIu64 ", the catalog says %" PRIu64,
			 pos, fr.len, want->length);
		return -EBADMSG;
	}
	uint32_t crc = 0;
	uint64_t at = pos + CMN_TFR_HEADER_SIZE, left = fr.len;
	while (left) {
		size_t n = left < w->cap ? (size_t)left : w->cap;
		if (at >= w->off && at < w->off + w->len && w->off + w->len - at < n)
			n = (size_t)(w->off + w->len - at); /* what the window holds first */
		rc = win_get(w, at, n, &p);
		if (rc)
			goto io;
		crc = cmn_crc32c(crc, p, n);
		at += n;
		left -= n;
	}
	rc = win_get(w, at, CMN_TFR_FOOTER_SIZE, &p);
	if (rc)
		goto io;
	uint32_t stored = cmn_tfr_get_footer(p);
	if (crc != stored) {
		snprintf(why, whylen,
			 "record at %" PRIu64 ": payload crc 0x%08" PRIx32 ", stored 0x%08" PRIx32,
			 pos, crc, stored);
		return -EBADMSG;
	}
	if (want && want->crc != crc) {
		snprintf(why, whylen,
			 "record at %" PRIu64 ": payload crc 0x%08" PRIx32
			 ", the catalog says 0x%08" PRIx32,
			 pos, crc, want->crc);
		return -EBADMSG;
	}
	*next = fr.offset + fr.need;
	*crc_out = crc;
	return 0;
io:
	if (rc == -EBADMSG)
		snprintf(why, whylen, "record at %" PRIu64 ": the file ends before it does", pos);
	else
		snprintf(why, whylen, "read at %" PRIu64 ": %s", pos, strerror(-rc));
	return rc;
}

/* ---- whole-file checks against the catalog ------------------------------ */

void cfs_vcheck_init(struct cfs_vcheck *v, int fd, uint64_t size, const struct cfs_sample *s,
		     size_t n)
{
	memset(v, 0, sizeof(*v));
	v->fd = fd;
	v->size = size;
	v->s = s;
	v->n = n;
}

int cfs_vcheck_step(struct cfs_vcheck *v, uint64_t budget, void *buf, size_t cap)
{
	struct win w = {.fd = v->fd, .size = v->size, .buf = buf, .cap = cap};
	int rc = 0;

	if (cap < CMN_TFR_OVERHEAD)
		return -EINVAL;
	while (v->i < v->n && w.bytes_read < budget) {
		const struct cfs_sample *s = &v->s[v->i];
		if (s->offset != v->pos) {
			/* records must tile the file: no byte outside a checked record */
			v->bad_off = v->pos;
			snprintf(v->why, sizeof(v->why),
				 "bytes at %" PRIu64 " belong to no record of the catalog (next "
				 "record at %" PRIu64 ")",
				 v->pos, s->offset);
			rc = -EBADMSG;
			break;
		}
		uint64_t next;
		uint32_t crc;
		rc = check_record(&w, v->pos, s, &next, &crc, v->why, sizeof(v->why));
		if (rc) {
			v->bad_off = v->pos;
			break;
		}
		v->pos = next;
		v->i++;
	}
	v->bytes_read += w.bytes_read;
	if (rc)
		return rc;
	if (v->i < v->n)
		return 1;
	if (v->pos != v->size) {
		v->bad_off = v->pos;
		snprintf(v->why, sizeof(v->why),
			 "bytes at %" PRIu64
			 " belong to no record of the catalog (file size %" PRIu64 ")",
			 v->pos, v->size);
		return -EBADMSG;
	}
	return 0;
}

int cfs_verify_raw_fd(int fd, uint64_t size, uint32_t want, void *buf, size_t cap,
		      uint64_t *bytes_read, char *why, size_t whylen)
{
	uint32_t crc = 0;
	uint64_t off = 0;
	while (off < size) {
		size_t len = size - off < cap ? (size_t)(size - off) : cap;
		ssize_t r = pread(fd, buf, len, (off_t)off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			int e = r < 0 ? errno : EIO;
			snprintf(why, whylen, "cannot read at %" PRIu64 ": %s", off,
				 r < 0 ? strerror(e) : "the file is shorter than its row");
			*bytes_read += off;
			return r < 0 ? -e : -EBADMSG;
		}
		crc = cmn_crc32c(crc, buf, (size_t)r);
		off += (uint64_t)r;
	}
	*bytes_read += off;
	if (crc != want) {
		snprintf(why, whylen,
			 "CRC-32C %08" PRIx32 " of the object, the catalog says %08" PRIx32, crc,
			 want);
		return -EBADMSG;
	}
	return 0;
}

int cfs_verify_cache_file(struct cfs_catalog *cat, const char *cache_dir,
			  const struct cfs_shard_info *si, void *buf, size_t cap,
			  uint64_t *bytes_read, char *why, size_t whylen)
{
	struct cfs_sample *s = NULL;
	size_t n = 0;
	struct stat st;
	char name[32], path[4096];
	int fd, rc;

	*bytes_read = 0;
	cfs__file_name(si->kind, si->id, name, sizeof(name));
	if (snprintf(path, sizeof(path), "%s/%s/%s", cache_dir,
		     si->kind == CFS_KIND_TFRECORD ? "shards" : "objects",
		     name) >= (int)sizeof(path)) {
		snprintf(why, whylen, "path too long");
		return -ENAMETOOLONG;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 && errno == ENOENT) {
		snprintf(why, whylen, "missing (the next mount drops its row)");
		return -EBADMSG;
	}
	if (fd < 0) {
		rc = -errno;
		snprintf(why, whylen, "cannot open: %s", strerror(errno));
		return rc;
	}
	if (fstat(fd, &st) != 0) {
		rc = -errno;
		snprintf(why, whylen, "cannot stat: %s", strerror(errno));
		goto out;
	}
	if ((uint64_t)st.st_size != si->bytes) {
		snprintf(why, whylen, "size %" PRIu64 ", the catalog says %" PRIu64,
			 (uint64_t)st.st_size, si->bytes);
		rc = -EBADMSG;
		goto out;
	}
	rc = cfs_catalog_samples_of(cat, si->id, &s, &n);
	if (rc) {
		snprintf(why, whylen, "cannot read its records from the catalog: %s",
			 strerror(-rc));
		goto out;
	}
	if (si->kind == CFS_KIND_RAW) { /* one sample: the whole object and its CRC */
		if (n != 1 || s[0].offset != 0 || s[0].length != si->bytes) {
			snprintf(why, whylen, "%zu sample rows, expected 1 of the whole object", n);
			rc = -EBADMSG;
			goto out;
		}
		(void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
		rc = cfs_verify_raw_fd(fd, si->bytes, s[0].crc, buf, cap, bytes_read, why, whylen);
		goto out;
	}
	(void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	struct cfs_vcheck v;
	cfs_vcheck_init(&v, fd, si->bytes, s, n);
	while ((rc = cfs_vcheck_step(&v, UINT64_MAX, buf, cap)) == 1)
		;
	*bytes_read = v.bytes_read;
	if (rc)
		snprintf(why, whylen, "%s", v.why);
out:
	free(s);
	close(fd);
	return rc;
}

/* ---- the read path -------------------------------------------------------- */

struct cfs_verifier {
	pthread_mutex_t stripes[STRIPES];
	pthread_mutex_t qmu;
	int64_t queue[QUEUE_MAX]; /* protected by qmu */
	size_t nq;		  /* protected by qmu */
	struct cmn_events *events;
	uint32_t bit;
	_Atomic uint64_t bytes, files, corrupt, dropped, rechecks;
};

static struct cmn_thread_buf rbuf_tls = CMN_THREAD_BUF_INIT;

/* The calling thread's scratch buffer (freed at thread exit), or NULL. */
static uint8_t *rbuf(void)
{
	return cmn_thread_buf(&rbuf_tls, RBUF_SIZE);
}

int cfs_verifier_new(struct cfs_verifier **out, struct cmn_events *events, uint32_t bit)
{
	struct cfs_verifier *v = calloc(1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (int i = 0; i < STRIPES; i++)
		pthread_mutex_init(&v->stripes[i], NULL);
	pthread_mutex_init(&v->qmu, NULL);
	v->events = events;
	v->bit = bit;
	*out = v;
	return 0;
}

void cfs_verifier_free(struct cfs_verifier *v)
{
	if (!v)
		return;
	for (int i = 0; i < STRIPES; i++)
		pthread_mutex_destroy(&v->stripes[i]);
	pthread_mutex_destroy(&v->qmu);
	free(v);
}

static bool checked_kind(const struct cfs_efile *f)
{
	return f->kind == CFS_KIND_TFRECORD || f->kind == CFS_KIND_RAW;
}

bool cfs_verify_corrupt(const struct cfs_efile *f)
{
	return atomic_load_explicit(&f->v_bad1, memory_order_acquire) != 0;
}

bool cfs_verify_done(const struct cfs_efile *f)
{
	if (cfs_verify_corrupt(f))
		return false;
	return !checked_kind(f) || atomic_load_explicit(&f->v_ok, memory_order_acquire) >= f->bytes;
}

void cfs_verify_mark(struct cfs_efile *f, uint64_t off)
{
	uint64_t cur = atomic_load_explicit(&f->v_bad1, memory_order_relaxed);
	while ((cur == 0 || cur > off + 1) &&
	       !atomic_compare_exchange_weak_explicit(&f->v_bad1, &cur, off + 1,
						      memory_order_release, memory_order_relaxed))
		;
}

/* Queues f's id for the daemon once (V4). */
static void report(struct cfs_verifier *v, struct cfs_efile *f)
{
	if (atomic_exchange(&f->v_queued, true))
		return;
	atomic_fetch_add_explicit(&v->corrupt, 1, memory_order_relaxed);
	bool queued = false;
	pthread_mutex_lock(&v->qmu);
	if (v->nq < QUEUE_MAX) {
		v->queue[v->nq++] = f->id;
		queued = true;
	}
	pthread_mutex_unlock(&v->qmu);
	if (!queued)
		atomic_fetch_add_explicit(&v->dropped, 1, memory_order_relaxed);
	if (queued && v->events)
		cmn_events_post(v->events, v->bit);
}

/* Marks f corrupt from `off`, logs why, queues it (V4); returns -EIO. */
static int found_corrupt(struct cfs_verifier *v, struct cfs_efile *f, uint64_t off, const char *why)
{
	char rel[CFS_RELPATH_MAX];
	cfs_verify_mark(f, off);
	cmn_log(CMN_LOG_ERROR, "%s: corrupt: %s: reads get EIO, the file leaves the cache",
		cfs_efile_relpath(f, rel), why);
	report(v, f);
	return -EIO;
}

/*
 * The checks of a whole file by its kind: a raw object's CRC-32C against
 * the catalog's; a TFRecord file's records in order, each frame and payload
 * CRC, and their digest against the catalog's (cfs_digest_add; when the row
 * has one: a record rewritten with a valid frame passes its own CRC, not
 * the digest).  0, -EBADMSG with why and *bad_off, or -errno with why.
 */
static int check_whole(const struct cfs_efile *f, int fd, uint8_t *buf, uint64_t *bytes_read,
		       uint64_t *bad_off, char *why, size_t whylen)
{
	*bad_off = 0;
	if (f->kind == CFS_KIND_RAW)
		return cfs_verify_raw_fd(fd, f->bytes, f->crc, buf, RBUF_SIZE, bytes_read, why,
					 whylen);
	struct win w = {.fd = fd, .size = f->bytes, .buf = buf, .cap = RBUF_SIZE, .hint = f->bytes};
	uint64_t pos = 0;
	uint32_t digest = 0, crc;
	int rc = 0;
	while (pos < f->bytes) {
		uint64_t next;
		rc = check_record(&w, pos, NULL, &next, &crc, why, whylen);
		if (rc) {
			*bad_off = pos;
			break;
		}
		digest = cfs_digest_add(digest, crc);
		pos = next;
	}
	*bytes_read = w.bytes_read;
	if (rc == 0 && f->has_crc && digest != f->crc) {
		snprintf(why, whylen,
			 "its records' CRCs digest to 0x%08" PRIx32
			 ", the catalog's to 0x%08" PRIx32 " (a record was rewritten)",
			 digest, f->crc);
		rc = -EBADMSG;
	}
	return rc;
}

/*
 * A file's first daemon-served read: check_whole() under its stripe's
 * mutex, before any byte of it is served; v_ok goes from 0 to its size at
 * once (V2), or the file is marked corrupt and queued (V4).
 */
static int verify_whole(struct cfs_verifier *v, struct cfs_efile *f, int fd, uint64_t *bytes_read)
{
	char why[CFS_VERIFY_WHY_MAX], rel[CFS_RELPATH_MAX];
	uint8_t *buf = rbuf();
	if (!buf)
		return -ENOMEM;
	pthread_mutex_t *mu = &v->stripes[(uint64_t)f->id % STRIPES];
	pthread_mutex_lock(mu);
	int rc = 0;
	if (atomic_load_explicit(&f->v_bad1, memory_order_acquire)) {
		rc = -EIO; /* found meanwhile, by another reader or the scrubber */
	} else if (atomic_load_explicit(&f->v_ok, memory_order_acquire) < f->bytes) {
		uint64_t bad_off;
		rc = check_whole(f, fd, buf, bytes_read, &bad_off, why, sizeof(why));
		if (rc == 0)
			atomic_store_explicit(&f->v_ok, f->bytes, memory_order_release);
		else if (rc == -EBADMSG)
			rc = found_corrupt(v, f, bad_off, why);
		else
			cmn_log(CMN_LOG_ERROR, "%s: cannot check: %s", cfs_efile_relpath(f, rel),
				why);
	}
	pthread_mutex_unlock(mu);
	return rc;
}

void cfs_verify_open(struct cfs_verifier *v, struct cfs_efile *f, int dirfd)
{
	struct stat st;
	char rel[CFS_RELPATH_MAX];
	if (!v || !checked_kind(f) || fstatat(dirfd, cfs_efile_relpath(f, rel), &st, 0) != 0)
		return; /* gone: the read path's own open reports it */
	int64_t ctime = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
	pthread_mutex_t *mu = &v->stripes[(uint64_t)f->id % STRIPES];
	pthread_mutex_lock(mu);
	bool changed = f->v_ctime_ns != 0 && f->v_ctime_ns != ctime;
	f->v_ctime_ns = ctime;
	if (changed && atomic_load_explicit(&f->v_ok, memory_order_relaxed) > 0) {
		/* V5: checked bytes that may have changed are checked again */
		atomic_store_explicit(&f->v_ok, 0, memory_order_release);
		atomic_fetch_add_explicit(&v->rechecks, 1, memory_order_relaxed);
		cmn_log(CMN_LOG_WARN,
			"%s: changed on disk after it was checked (ctime): checked again before "
			"its next byte leaves the daemon",
			rel);
	}
	pthread_mutex_unlock(mu);
}

int cfs_verify_read(struct cfs_verifier *v, struct cfs_efile *f, int fd, uint64_t off, uint64_t len)
{
	uint64_t end = off + len;

	if (!v || !checked_kind(f) || len == 0)
		return 0; /* a read at the end returns no byte: nothing to check */
	uint64_t bad1 = atomic_load_explicit(&f->v_bad1, memory_order_acquire);
	if (bad1 && end > bad1 - 1)
		return -EIO;
	if (end > f->bytes)
		end = f->bytes;
	if (atomic_load_explicit(&f->v_ok, memory_order_acquire) >= end)
		return 0;
	uint64_t got = 0;
	int rc = verify_whole(v, f, fd, &got);
	atomic_fetch_add_explicit(&v->bytes, got, memory_order_relaxed);
	if (rc == 0 && got)
		atomic_fetch_add_explicit(&v->files, 1, memory_order_relaxed);
	/* V1: a read allowed through was checked to its end */
	assert(rc != 0 || atomic_load_explicit(&f->v_ok, memory_order_acquire) >= end);
	return rc;
}

size_t cfs_verifier_take(struct cfs_verifier *v, int64_t *ids, size_t max)
{
	pthread_mutex_lock(&v->qmu);
	size_t n = v->nq < max ? v->nq : max;
	memcpy(ids, v->queue, n * sizeof(*ids));
	memmove(v->queue, v->queue + n, (v->nq - n) * sizeof(*ids));
	v->nq -= n;
	pthread_mutex_unlock(&v->qmu);
	return n;
}

void cfs_verifier_stat(const struct cfs_verifier *v, struct cfs_verifier_stat *st)
{
	struct cfs_verifier *m = (struct cfs_verifier *)v;
	st->bytes = atomic_load_explicit(&m->bytes, memory_order_relaxed);
	st->files = atomic_load_explicit(&m->files, memory_order_relaxed);
	st->corrupt = atomic_load_explicit(&m->corrupt, memory_order_relaxed);
	st->dropped = atomic_load_explicit(&m->dropped, memory_order_relaxed);
	st->rechecks = atomic_load_explicit(&m->rechecks, memory_order_relaxed);
}
