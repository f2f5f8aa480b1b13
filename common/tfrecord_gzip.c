/*
 * tfrecord_gzip.c - zlib inflate under the TFRecord readers ("GZIP" and
 * "ZLIB" files), and the one compression detection (cmn_tfr_detect).
 *
 * Owns the inflate loop: gzip headers (FNAME, MTIME, EXTRA, COMMENT are
 * parsed by zlib with windowBits 16 + MAX_WBITS), the CRC/ISIZE trailer, and
 * members that follow each other (a concatenation of gzip files is a valid
 * gzip file).  ZLIB input (windowBits MAX_WBITS: the RFC 1950 header and
 * Adler-32 trailer) goes through the same loop; zlib streams that follow
 * each other are read one after the other too.  Does not know about records: it turns compressed
 * bytes into stream bytes for tfrecord.c and tfrecord_push.c.
 *
 * Invariant: g->in_member is true exactly when input seen so far ends inside
 * a member, so the caller can tell a clean end from a truncated file.
 * No shared state, no locking (one inflater per reader).
 */
#include "common/tfrecord_i.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

const char *cmn_tfr_compression_name(enum cmn_tfr_compression c)
{
	switch (c) {
	case CMN_TFR_AUTO:
		return "auto";
	case CMN_TFR_NONE:
		return "none";
	case CMN_TFR_GZIP:
		return "gzip";
	case CMN_TFR_ZLIB:
		return "zlib";
	}
	return "?";
}

enum cmn_tfr_compression cmn_tfr_detect(const void *head, size_t len)
{
	const uint8_t *p = head;
	uint64_t l;

	if (len >= CMN_TFR_HEADER_SIZE && cmn_tfr_get_header(p, SIZE_MAX, &l) == 0)
		return CMN_TFR_NONE;
	if (len >= 3 && p[0] == 0x1f && p[1] == 0x8b && p[2] == 8)
		return CMN_TFR_GZIP;
	if (len >= 2 && (p[0] & 0x0f) == 8 && (p[0] >> 4) <= 7 && (p[0] * 256u + p[1]) % 31 == 0 &&
	    !(p[1] & 0x20))
		return CMN_TFR_ZLIB;
	return CMN_TFR_NONE;
}

enum cmn_tfr_compression cmn_tfr_detect_fd(int fd)
{
	uint8_t head[CMN_TFR_DETECT_BYTES];
	size_t got = 0;

	while (got < sizeof(head)) {
		ssize_t n = pread(fd, head + got, sizeof(head) - got, (off_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	return cmn_tfr_detect(head, got);
}

static int wbits(bool zlib)
{
	return zlib ? MAX_WBITS : 16 + MAX_WBITS;
}

int tfr__gz_init(struct tfr__gz *g, bool zlib)
{
	memset(g, 0, sizeof(*g));
	if (inflateInit2(&g->z, wbits(zlib)) != Z_OK)
		return -ENOMEM;
	g->ready = true;
	g->zlib = zlib;
	return 0;
}

int tfr__gz_set(struct tfr__gz *g, bool zlib)
{
	if (g->zlib == zlib)
		return 0;
	if (inflateReset2(&g->z, wbits(zlib)) != Z_OK)
		return -ENOMEM;
	g->zlib = zlib;
	return 0;
}

void tfr__gz_reset(struct tfr__gz *g)
{
	if (g->ready)
		inflateReset(&g->z);
	g->in_member = false;
	g->in_total = 0;
}

void tfr__gz_end(struct tfr__gz *g)
{
	if (g->ready)
		inflateEnd(&g->z);
	g->ready = false;
}

int tfr__gz_run(struct tfr__gz *g, struct tfr__core *c, uint64_t uoff, const uint8_t *in,
		size_t inlen, size_t *used, uint8_t *out, size_t outcap, size_t *produced)
{
	*used = 0;
	*produced = 0;
	/*
	 * inflate() may hold output back when out is full, so it is called
	 * again while inside a member even with no input left.
	 */
	while (*produced < outcap && (*used < inlen || g->in_member)) {
		size_t in_before = *used, out_before = *produced;
		uInt in_chunk = (uInt)((inlen - *used) > UINT32_MAX ? UINT32_MAX : inlen - *used);
		uInt out_chunk =
		    (uInt)((outcap - *produced) > UINT32_MAX ? UINT32_MAX : outcap - *produced);
		int rc;

		g->z.next_in = (Bytef *)(uintptr_t)(in + *used);
		g->z.avail_in = in_chunk;
		g->z.next_out = out + *produced;
		g->z.avail_out = out_chunk;
		if (in_chunk)
			g->in_member = true;
		rc = inflate(&g->z, Z_NO_FLUSH);
		*used += in_chunk - g->z.avail_in;
		*produced += out_chunk - g->z.avail_out;
		g->in_total += in_chunk - g->z.avail_in;
		if (rc == Z_STREAM_END) {
			/* end of one member; another may follow */
			inflateReset(&g->z);
			g->in_member = false;
			continue;
		}
		if (rc == Z_OK || rc == Z_BUF_ERROR) {
			if (*used == in_before && *produced == out_before)
				break; /* needs more input */
			continue;
		}
		/*
		 * Hand out what came before a bad spot first: zlib's state stays
		 * bad, so the next call reports the error.
		 */
		if (*used || *produced)
			return 0;
		if (rc == Z_MEM_ERROR) {
			snprintf(c->msg, sizeof(c->msg), "%s: out of memory in zlib inflate",
				 c->name);
			return -ENOMEM;
		}
		snprintf(c->msg, sizeof(c->msg),
			 "%s: corrupt %s data at compressed offset %" PRIu64
			 " (stream offset %" PRIu64 "): %s",
			 c->name, g->zlib ? "zlib" : "gzip", g->in_total, uoff + *produced,
			 g->z.msg ? g->z.msg : "inflate failed");
		return -EIO;
	}
	return 0;
}
