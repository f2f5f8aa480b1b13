/*
 * tfrecord_i.h - internals shared by the TFRecord front ends.
 *
 * tfrecord.c owns the frame walker, the framing step (tfr__step) and the
 * pull readers; tfrecord_push.c the push decoder; tfrecord_gzip.c the
 * inflate loop both use; tfrecord_write.c the writer.  Not installed, not
 * for other modules.
 */
#ifndef RC_COMMON_TFRECORD_I_H
#define RC_COMMON_TFRECORD_I_H

#include "common/tfrecord.h"

#include <zlib.h>

#define TFR_MSG_MAX	      384
#define TFR_DEFAULT_READ_SIZE ((size_t)1 << 20)

/* What every front end carries: options, counters and the last message. */
struct tfr__core {
	char *name;	   /* owned copy of opts->name */
	size_t max_record; /* payload cap */
	bool skip_crc;
	bool mid_stream;  /* offset 0 is not the file's start (a resumed push decoder) */
	uint64_t records; /* records whose CRCs passed (or were not checked) */
	uint64_t bad;	  /* payload CRC failures skipped */
	char msg[TFR_MSG_MAX];
};

int tfr__core_init(struct tfr__core *c, const struct cmn_tfr_opts *o);
void tfr__core_free(struct tfr__core *c);

/*
 * One step of the frame walker (cmn_tfr_walk_next) over `avail` contiguous
 * bytes at p, which start a record at stream offset `off`, with the
 * readers' messages and counters:
 *   1         a whole record; *rec filled (data points into p); *need = its size
 *   0         incomplete: *need = bytes needed before the step can decide
 *             (12 for the header, then 16 + length)
 *   -EBADMSG  whole record with a payload CRC mismatch; *need = its size, so
 *             the caller may skip it; counted in c->bad
 *   -EILSEQ / -EMSGSIZE  header rejected; framing is lost
 * Messages go to c->msg.  Never reads beyond p + avail.
 */
int tfr__step(struct tfr__core *c, const uint8_t *p, size_t avail, uint64_t off,
	      struct cmn_tfr_record *rec, size_t *need);

/* Sets c->msg to the -EPROTO message for a stream ending with `have` of `need` bytes. */
void tfr__truncated(struct tfr__core *c, uint64_t off, size_t have, size_t need);

/* ---- gzip (tfrecord_gzip.c) ---- */

/* One inflater over a sequence of gzip members, or of zlib streams. */
struct tfr__gz {
	z_stream z;
	bool ready;	   /* inflateInit2 done */
	bool zlib;	   /* zlib wrapper (RFC 1950) instead of gzip (RFC 1952) */
	bool in_member;	   /* input ended inside a member so far */
	uint64_t in_total; /* compressed bytes consumed */
};

/* Sets up an inflater for gzip (zlib false) or zlib input.  0 or -ENOMEM. */
int tfr__gz_init(struct tfr__gz *g, bool zlib);
/* Switches a ready inflater, before any input, to gzip or zlib.  0 or -ENOMEM. */
int tfr__gz_set(struct tfr__gz *g, bool zlib);
void tfr__gz_reset(struct tfr__gz *g);
void tfr__gz_end(struct tfr__gz *g);

/*
 * Inflates from in[0, inlen) into out[0, outcap); *used and *produced say how
 * much of each.  Members follow each other (multi-member files).  Returns 0,
 * or -EIO (corrupt data) / -ENOMEM with a message in c->msg naming the
 * compressed offset and `uoff`, the uncompressed offset reached.
 */
int tfr__gz_run(struct tfr__gz *g, struct tfr__core *c, uint64_t uoff, const uint8_t *in,
		size_t inlen, size_t *used, uint8_t *out, size_t outcap, size_t *produced);

static inline uint64_t tfr__le64(const uint8_t *p)
{
	return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24 |
	       (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48 |
	       (uint64_t)p[7] << 56;
}

static inline uint32_t tfr__le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

#endif
