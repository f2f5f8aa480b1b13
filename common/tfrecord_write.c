/*
 * tfrecord_write.c - buffered TFRecord writer over a file descriptor.
 *
 * Owns the framing of appended records (header, payload, footer) and one
 * output buffer.  Small records are gathered and written with one write(2)
 * per buffer.  A payload of at least DIRECT_MIN bytes (or as big as the
 * buffer) is not copied: one writev(2) sends what the buffer holds, the
 * header, the payload from the caller's memory and the footer (measured:
 * the copy through the buffer was about a tenth of an ingest's CPU,
 * docs/bench-sampler.md).  Does not fsync, rename or close: durability is
 * the caller's job (cachefs/ does DESIGN invariant 2).
 *
 * Invariant: w->bytes counts every framed byte appended (flushed or not).
 * One writer is used by one thread at a time; no locking.
 */
#include "common/tfrecord.h"

#include "common/crc32c.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

/* Payloads of at least this many bytes go to the kernel from the caller's memory. */
#define DIRECT_MIN ((size_t)32 << 10)

struct cmn_tfr_writer {
	int fd;
	uint8_t *buf;
	size_t cap, len;
	uint64_t bytes;
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

int cmn_tfr_writer_flush(struct cmn_tfr_writer *w)
{
	int rc = write_all(w->fd, w->buf, w->len);
	if (rc == 0)
		w->len = 0;
	return rc;
}

/* Copies n bytes into the buffer, flushing when it fills. */
static int put(struct cmn_tfr_writer *w, const uint8_t *p, size_t n)
{
	while (n > 0) {
		size_t room = w->cap - w->len;
		size_t k = n < room ? n : room;
		memcpy(w->buf + w->len, p, k);
		w->len += k;
		p += k;
		n -= k;
		if (w->len == w->cap) {
			int rc = cmn_tfr_writer_flush(w);
			if (rc)
				return rc;
		}
	}
	return 0;
}

int cmn_tfr_writer_append(struct cmn_tfr_writer *w, const void *payload, size_t len, uint32_t crc,
			  bool crc_known)
{
	uint8_t hdr[CMN_TFR_HEADER_SIZE], ftr[CMN_TFR_FOOTER_SIZE];
	int rc;

	if (!crc_known)
		crc = cmn_crc32c(0, payload, len);
	cmn_tfr_put_header(hdr, len);
	cmn_tfr_put_footer(ftr, crc);
	if (len >= DIRECT_MIN || len >= w->cap) {
		/* buffered bytes, header, payload, footer: one system call, no copy */
		struct iovec iov[4];
		int n = 0;
		if (w->len)
			iov[n++] = (struct iovec){w->buf, w->len};
		iov[n++] = (struct iovec){hdr, sizeof(hdr)};
		iov[n++] = (struct iovec){(void *)payload, len};
		iov[n++] = (struct iovec){ftr, sizeof(ftr)};
		rc = writev_all(w->fd, iov, n);
		if (rc)
			return rc;
		w->len = 0;
	} else {
		rc = put(w, hdr, sizeof(hdr));
		if (rc == 0)
			rc = put(w, payload, len);
		if (rc == 0)
			rc = put(w, ftr, sizeof(ftr));
		if (rc)
			return rc;
	}
	w->bytes += len + CMN_TFR_OVERHEAD;
	return 0;
}

uint64_t cmn_tfr_writer_bytes(const struct cmn_tfr_writer *w)
{
	return w->bytes;
}

void cmn_tfr_writer_free(struct cmn_tfr_writer *w)
{
	if (!w)
		return;
	free(w->buf);
	free(w);
}
