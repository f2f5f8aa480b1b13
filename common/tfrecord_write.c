/*
 * tfrecord_write.c - buffered TFRecord writer over a file descriptor.
 *
 * Owns the framing of appended records (header, payload, footer) and its
 * output buffer.  Small records are gathered and written with one write(2)
 * per buffer.  A payload of at least DIRECT_MIN bytes (or as big as the
 * buffer) is not copied: one writev(2) sends what the buffer holds, the
 * header, the payload from the caller's memory and the footer (measured:
 * the copy through the buffer was about a tenth of an ingest's CPU,
 * docs/bench-sampler.md).
 *
 * Write-behind (cmn_tfr_writer_behind): the writes go to a thread of the
 * writer's own, in order, through a queue of what to write: filled buffers,
 * and payloads the caller lends (cmn_tfr_writer_append_lent) and gets back
 * through its release callback once written.  The caller's thread then
 * neither copies large payloads nor pays for the page cache: a cold fill's
 * sampler thread spent 39% of its time in writev(2) (docs/benchmarks.md,
 * "Cold fill").
 *
 * Does not fsync, rename or close: durability is the caller's job
 * (cachefs/ does DESIGN invariant 2).
 *
 * Invariants: w->bytes counts every framed byte appended (written or not);
 * the file's bytes are appended in the order of the calls (one queue, one
 * thread); every lent payload is released exactly once, written or not.
 * One writer is used by one thread at a time; the write-behind thread
 * shares the queue (q, qhead, qlen, qbytes), `pool`, `err` and `quit`
 * with it under `mu`.
 */
#include "common/tfrecord.h"

#include "common/crc32c.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

/* Payloads of at least this many bytes go to the kernel from the caller's memory. */
#define DIRECT_MIN ((size_t)32 << 10)

/*
 * Write-behind queue: at most QCAP entries and BEHIND_BYTES bytes in flight,
 * a queued buffer counted at its capacity; as many written buffers are kept
 * for reuse as can be in flight (at most POOL_MAX).
 */
#define QCAP	     64
#define BEHIND_BYTES ((size_t)8 << 20)
#define POOL_MAX     8
#define BEHIND_IOV   48 /* iovecs per writev(2) of the thread (3 per record) */

struct qent {
	const uint8_t *p; /* a filled buffer (buf != NULL), or a lent payload */
	size_t n;
	uint8_t *buf; /* the buffer, back to the pool once written */
	void *lent;   /* the lent block, released once written */
	size_t lent_cap;
	uint8_t hdr[CMN_TFR_HEADER_SIZE], ftr[CMN_TFR_FOOTER_SIZE]; /* a lent payload's framing */
};

struct cmn_tfr_writer {
	int fd;
	uint8_t *buf; /* the buffer being filled (NULL after a hand-off until the next put) */
	size_t cap, len;
	uint64_t bytes;
	/* write-behind (cmn_tfr_writer_behind) */
	bool behind, quit;
	cmn_tfr_release_fn release;
	void *release_ctx;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct qent q[QCAP];
	unsigned qhead, qlen;
	size_t qbytes;
	uint8_t *pool[POOL_MAX]; /* written buffers, for reuse */
	int npool;
	int err; /* first failed write, latched */
};

int cmn_tfr_writer_open(struct cmn_tfr_writer **out, int fd, size_t buf_size, char *err,
			size_t errlen)
{
	struct cmn_tfr_writer *w = calloc(1, sizeof(*w));

	if (buf_size == 0)
		buf_size = (size_t)1 << 20;
	if (buf_size < 64)
		buf_size = 64;
	if (w)
		w->buf = malloc(buf_size);
	if (!w || !w->buf) {
		free(w);
		snprintf(err, errlen, "tfrecord writer: out of memory for a %zu-byte buffer",
			 buf_size);
		return -ENOMEM;
	}
	w->fd = fd;
	w->cap = buf_size;
	*out = w;
	return 0;
}

/* writev(2) all of iov[0..n), retrying short writes and EINTR; iov is consumed. */
static int writev_all(int fd, struct iovec *iov, int n)
{
	for (;;) {
		while (n > 0 && iov->iov_len == 0) { /* nothing to write there */
			iov++;
			n--;
		}
		if (n == 0)
			break;
		ssize_t k = writev(fd, iov, n);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (k == 0)
			return -EIO;
		while (n > 0 && (size_t)k >= iov->iov_len) {
			k -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (uint8_t *)iov->iov_base + k;
			iov->iov_len -= (size_t)k;
		}
	}
	return 0;
}

/* write(2) all of it, retrying short writes and EINTR.  Returns 0 or -errno. */
static int write_all(int fd, const uint8_t *p, size_t n)
{
	struct iovec v = {.iov_base = (void *)p, .iov_len = n};
	return writev_all(fd, &v, 1);
}

/* ---- write-behind ---- */

/* What e holds in memory: a buffer its capacity, a lent payload its length. */
static size_t weight(const struct cmn_tfr_writer *w, const struct qent *e)
{
	return e->buf ? w->cap : e->n;
}

/* Frees or keeps a written buffer; releases a lent block.  mu not held. */
static void settle(struct cmn_tfr_writer *w, struct qent *e)
{
	if (e->lent)
		w->release(w->release_ctx, e->lent, e->lent_cap);
	if (!e->buf)
		return;
	size_t keep = BEHIND_BYTES / w->cap;
	pthread_mutex_lock(&w->mu);
	if ((size_t)w->npool < (keep < POOL_MAX ? keep : POOL_MAX)) {
		w->pool[w->npool++] = e->buf;
		e->buf = NULL;
	}
	pthread_mutex_unlock(&w->mu);
	free(e->buf);
}

/* Writes entries [0, n) of `take` (copied out of the queue) with as few writev(2) as it can. */
static int write_entries(int fd, const struct qent *take, unsigned n)
{
	struct iovec iov[BEHIND_IOV];
	unsigned i = 0;
	while (i < n) {
		int k = 0;
		for (; i < n && k + 3 <= BEHIND_IOV; i++) {
			const struct qent *e = &take[i];
			if (e->buf) {
				iov[k++] = (struct iovec){(void *)e->p, e->n};
			} else {
				iov[k++] = (struct iovec){(void *)e->hdr, sizeof(e->hdr)};
				iov[k++] = (struct iovec){(void *)e->p, e->n};
				iov[k++] = (struct iovec){(void *)e->ftr, sizeof(e->ftr)};
			}
		}
		int rc = writev_all(fd, iov, k);
		if (rc)
			return rc;
	}
	return 0;
}

static void *behind_main(void *arg)
{
	struct cmn_tfr_writer *w = arg;
	struct qent take[BEHIND_IOV / 3];
	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (!w->qlen && !w->quit)
			pthread_cond_wait(&w->cv, &w->mu);
		if (!w->qlen)
			break; /* quit, nothing left */
		unsigned n = 0;
		size_t bytes = 0;
		while (n < BEHIND_IOV / 3 && n < w->qlen) {
			take[n] = w->q[(w->qhead + n) % QCAP];
			bytes += weight(w, &take[n]);
			n++;
		}
		bool skip = w->err || w->quit; /* a failed or abandoned file: only release */
		pthread_mutex_unlock(&w->mu);
		int rc = skip ? 0 : write_entries(w->fd, take, n);
		for (unsigned i = 0; i < n; i++)
			settle(w, &take[i]);
		pthread_mutex_lock(&w->mu);
		if (rc && !w->err)
			w->err = rc;
		w->qhead = (w->qhead + n) % QCAP;
		w->qlen -= n;
		w->qbytes -= bytes;
		pthread_cond_broadcast(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

/*
 * Queues e, waiting while the queue is full.  Returns 0, or the latched
 * error: then a buffer entry is settled and a lent block stays the caller's.
 */
static int enqueue(struct cmn_tfr_writer *w, const struct qent *e)
{
	size_t wgt = weight(w, e);
	pthread_mutex_lock(&w->mu);
	while (!w->err && w->qlen && (w->qlen == QCAP || w->qbytes + wgt > BEHIND_BYTES))
		pthread_cond_wait(&w->cv, &w->mu);
	int rc = w->err;
	if (!rc) {
		w->q[(w->qhead + w->qlen) % QCAP] = *e;
		w->qlen++;
		w->qbytes += wgt;
		pthread_cond_broadcast(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
	if (rc) {
		struct qent c = *e;
		c.lent = NULL;
		settle(w, &c);
	}
	return rc;
}

/* Hands the filled buffer to the queue; the next put takes a pooled one. */
static int hand_off(struct cmn_tfr_writer *w)
{
	struct qent e = {.p = w->buf, .n = w->len, .buf = w->buf};
	w->buf = NULL;
	w->len = 0;
	return enqueue(w, &e);
}

/* A buffer to fill: from the pool, else a new one.  0 or -ENOMEM. */
static int take_buf(struct cmn_tfr_writer *w)
{
	if (w->buf)
		return 0;
	if (w->behind) {
		pthread_mutex_lock(&w->mu);
		if (w->npool)
			w->buf = w->pool[--w->npool];
		pthread_mutex_unlock(&w->mu);
	}
	if (!w->buf)
		w->buf = malloc(w->cap);
	return w->buf ? 0 : -ENOMEM;
}

/* Writes out or hands off what the buffer holds. */
static int drain(struct cmn_tfr_writer *w)
{
	if (!w->len)
		return 0;
	if (w->behind)
		return hand_off(w);
	int rc = write_all(w->fd, w->buf, w->len);
	if (rc == 0)
		w->len = 0;
	return rc;
}

int cmn_tfr_writer_behind(struct cmn_tfr_writer *w, cmn_tfr_release_fn release, void *ctx)
{
	if (w->behind)
		return 0;
	if (pthread_mutex_init(&w->mu, NULL))
		return -ENOMEM;
	if (pthread_cond_init(&w->cv, NULL)) {
		pthread_mutex_destroy(&w->mu);
		return -ENOMEM;
	}
	w->release = release;
	w->release_ctx = ctx;
	int rc = pthread_create(&w->thread, NULL, behind_main, w);
	if (rc) {
		pthread_cond_destroy(&w->cv);
		pthread_mutex_destroy(&w->mu);
		return -rc;
	}
	w->behind = true;
	return 0;
}

int cmn_tfr_writer_flush(struct cmn_tfr_writer *w)
{
	int rc = drain(w);
	if (w->behind) {
		pthread_mutex_lock(&w->mu);
		while (w->qlen)
			pthread_cond_wait(&w->cv, &w->mu);
		if (!rc)
			rc = w->err;
		pthread_mutex_unlock(&w->mu);
	}
	return rc;
}

/* Copies n bytes into the buffer, flushing when it fills. */
static int put(struct cmn_tfr_writer *w, const uint8_t *p, size_t n)
{
	while (n > 0) {
		int trc = take_buf(w);
		if (trc)
			return trc;
		size_t room = w->cap - w->len;
		size_t k = n < room ? n : room;
		memcpy(w->buf + w->len, p, k);
		w->len += k;
		p += k;
		n -= k;
		if (w->len == w->cap) {
			int rc = drain(w);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* Appends one record through the buffer, or (large) with one writev(2) from payload. */
static int append_now(struct cmn_tfr_writer *w, const void *payload, size_t len, const uint8_t *hdr,
		      const uint8_t *ftr)
{
	int rc;
	if (!w->behind && (len >= DIRECT_MIN || len >= w->cap)) {
		/* buffered bytes, header, payload, footer: one system call, no copy */
		struct iovec iov[4];
		int n = 0;
		if (w->len)
			iov[n++] = (struct iovec){w->buf, w->len};
		iov[n++] = (struct iovec){(void *)hdr, CMN_TFR_HEADER_SIZE};
		iov[n++] = (struct iovec){(void *)payload, len};
		iov[n++] = (struct iovec){(void *)ftr, CMN_TFR_FOOTER_SIZE};
		rc = writev_all(w->fd, iov, n);
		if (rc)
			return rc;
		w->len = 0;
		return 0;
	}
	rc = put(w, hdr, CMN_TFR_HEADER_SIZE);
	if (rc == 0)
		rc = put(w, payload, len);
	if (rc == 0)
		rc = put(w, ftr, CMN_TFR_FOOTER_SIZE);
	return rc;
}

int cmn_tfr_writer_append(struct cmn_tfr_writer *w, const void *payload, size_t len, uint32_t crc,
			  bool crc_known)
{
	uint8_t hdr[CMN_TFR_HEADER_SIZE], ftr[CMN_TFR_FOOTER_SIZE];

	if (!crc_known)
		crc = cmn_crc32c(0, payload, len);
	cmn_tfr_put_header(hdr, len);
	cmn_tfr_put_footer(ftr, crc);
	int rc = append_now(w, payload, len, hdr, ftr);
	if (rc)
		return rc;
	w->bytes += len + CMN_TFR_OVERHEAD;
	return 0;
}

int cmn_tfr_writer_append_lent(struct cmn_tfr_writer *w, const void *payload, size_t len,
			       uint32_t crc, void *block, size_t block_cap)
{
	if (!w->behind || len < DIRECT_MIN)
		return cmn_tfr_writer_append(w, payload, len, crc, true);
	struct qent e = {.p = payload, .n = len, .lent = block, .lent_cap = block_cap};
	cmn_tfr_put_header(e.hdr, len);
	cmn_tfr_put_footer(e.ftr, crc);
	int rc = drain(w); /* what the buffer holds goes first */
	if (rc)
		return rc;
	rc = enqueue(w, &e);
	if (rc)
		return rc; /* not queued: the block is still the caller's */
	w->bytes += len + CMN_TFR_OVERHEAD;
	return 1;
}

uint64_t cmn_tfr_writer_bytes(const struct cmn_tfr_writer *w)
{
	return w->bytes;
}

void cmn_tfr_writer_free(struct cmn_tfr_writer *w)
{
	if (!w)
		return;
	if (w->behind) {
		pthread_mutex_lock(&w->mu);
		w->quit = true; /* what is queued is released, not written */
		pthread_cond_broadcast(&w->cv);
		pthread_mutex_unlock(&w->mu);
		pthread_join(w->thread, NULL);
		for (int i = 0; i < w->npool; i++)
			free(w->pool[i]);
		pthread_cond_destroy(&w->cv);
		pthread_mutex_destroy(&w->mu);
	}
	free(w->buf);
	free(w);
}
