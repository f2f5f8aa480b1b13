/*
 * tfrecord_gzip.c - zlib inflate under the TFRecord readers ("GZIP" files).
 *
 * Owns the inflate loop: gzip headers (FNAME, MTIME, EXTRA, COMMENT are
 * parsed by zlib with windowBits 16 + MAX_WBITS), the CRC/ISIZE trailer, and
 * members that follow each other (a concatenation of gzip files is a valid
 * gzip file).  Does not know about records: it turns compressed bytes into
 * stream bytes for tfrecord.c and tfrecord_push.c.
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

int tfr__gz_init(struct tfr__gz *g)
{
	memset(g, 0, sizeof(*g));
	if (inflateInit2(&g->z, 16 + MAX_WBITS) != Z_OK)
		return -ENOMEM;
	g->ready = true;
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
			 "%s: corrupt gzip data at compressed offset %" PRIu64
			 " (stream offset %" PRIu64 "): %s",
			 c->name, g->in_total, uoff + *produced,
			 g->z.msg ? g->z.msg : "inflate failed");
		return -EIO;
	}
	return 0;
}
