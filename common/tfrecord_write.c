/*
 * tfrecord_write.c - buffered TFRecord writer over a file descriptor.
 *
 * Owns the framing of appended records (header, payload, footer) and one
 * output buffer.  Records smaller than the buffer are gathered and written
 * with one write(2) per buffer; a payload at least as big as the buffer is
 * written straight from the caller's memory after a flush.  Does not fsync,
 * rename or close: durability is the caller's job (cachefs/ does DESIGN
 * invariant 2).
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
#include <unistd.h>

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
		snprintf(err, errlen, "tfrecord writer: out of memory for a %zu-byte buffer", buf_size);
		return -ENOMEM;
	}
	w->fd = fd;
	w->cap = buf_size;
	*out = w;
	return 0;
}

/* write(2) all of it, retrying short writes and EINTR.  Returns 0 or -errno. */
static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n > 0) {
		ssize_t k = write(fd, p, n);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (k == 0)
			return -EIO;
		p += k;
		n -= (size_t)k;
	}
	return 0;
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
	rc = put(w, hdr, sizeof(hdr));
	if (rc)
		return rc;
	if (len >= w->cap) {
		rc = cmn_tfr_writer_flush(w);
		if (rc == 0)
			rc = write_all(w->fd, payload, len);
	} else {
		rc = put(w, payload, len);
	}
	if (rc)
		return rc;
	rc = put(w, ftr, sizeof(ftr));
	if (rc)
		return rc;
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
