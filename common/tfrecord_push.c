/*
 * tfrecord_push.c - the push decoder: TFRecord records out of arbitrary chunks.
 *
 * Owns the front end for network bodies: the caller feeds whatever chunks the
 * transfer delivers; every complete record is handed to a callback.  Records
 * that lie whole inside a chunk are handed out in place (zero copy); only a
 * record cut by a chunk boundary is gathered in p->pend, and the callback
 * may take that buffer over (cmn_tfr_push_take) rather than copy the record
 * out again.  The framing itself
 * is tfr__step() of tfrecord.c, so this decoder and the pull readers accept
 * and reject exactly the same streams.  GZIP and ZLIB input is inflated
 * first (tfrecord_gzip.c) into p->zout, then framed the same way.  AUTO
 * holds the first CMN_TFR_DETECT_BYTES bytes in p->magic until
 * cmn_tfr_detect() can decide.
 *
 * Invariants:
 *   - p->pend holds the first pend_len bytes of the record starting at
 *     stream offset p->off, and pend_len < the bytes that record needs;
 *   - pend grows only to 16 + a length that passed the header check, so one
 *     partial record, bounded by max_record, is all a decoder buffers
 *     (CONVENTIONS 6: every network-fed buffer has a cap).
 * One decoder is used by one thread at a time; no locking.
 */
#include "common/tfrecord_i.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ZOUT_SIZE ((size_t)256 << 10)

struct cmn_tfr_push {
	struct tfr__core core;
	cmn_tfr_record_cb cb;
	void *ctx;

	enum cmn_tfr_compression want; /* as opened */
	enum cmn_tfr_compression mode; /* AUTO until CMN_TFR_DETECT_BYTES have been seen */
	uint8_t magic[CMN_TFR_DETECT_BYTES];
	size_t magic_len;

	struct tfr__gz gz;
	uint8_t *zout;

	uint8_t *pend; /* the partial record; see invariants */
	size_t pend_len, pend_cap;
	uint64_t off;	 /* stream offset of the record being gathered */
	bool in_pend_cb; /* the callback runs on a record in p->pend (cmn_tfr_push_take) */
	int dead;	 /* sticky error, 0 if none */
};

int cmn_tfr_push_new(struct cmn_tfr_push **out, const struct cmn_tfr_opts *opts,
		     cmn_tfr_record_cb cb, void *ctx, char *err, size_t errlen)
{
	struct cmn_tfr_push *p = calloc(1, sizeof(*p));
	int rc;

	if (!p) {
		snprintf(err, errlen, "tfrecord push decoder: out of memory");
		return -ENOMEM;
	}
	rc = tfr__core_init(&p->core, opts);
	if (rc)
		goto fail_core;
	p->cb = cb;
	p->ctx = ctx;
	p->want = opts ? opts->compression : CMN_TFR_AUTO;
	p->mode = p->want;
	/* The inflater is set up even for AUTO: the first bytes decide. */
	if (p->want != CMN_TFR_NONE) {
		rc = tfr__gz_init(&p->gz, p->want == CMN_TFR_ZLIB);
		if (rc)
			goto fail_gz;
		p->zout = malloc(ZOUT_SIZE);
		if (!p->zout) {
			rc = -ENOMEM;
			goto fail_zout;
		}
	}
	*out = p;
	return 0;

fail_zout:
	tfr__gz_end(&p->gz);
fail_gz:
	tfr__core_free(&p->core);
fail_core:
	free(p);
	snprintf(err, errlen, "tfrecord push decoder: out of memory");
	return rc;
}

static int pend_reserve(struct cmn_tfr_push *p, size_t need)
{
	uint8_t *nb;
	size_t ncap;

	if (need <= p->pend_cap)
		return 0;
	ncap = p->pend_cap ? p->pend_cap : 4096;
	while (ncap < need)
		ncap = ncap > SIZE_MAX / 2 ? need : ncap * 2;
	nb = realloc(p->pend, ncap);
	if (!nb) {
		snprintf(p->core.msg, sizeof(p->core.msg),
			 "%s: out of memory for a record of %zu bytes", p->core.name, need);
		return -ENOMEM;
	}
	p->pend = nb;
	p->pend_cap = ncap;
	return 0;
}

/*
 * Acts on one tfr__step() outcome for a whole record of `size` bytes:
 * calls back, or counts a skipped bad record.  Returns 0 or the error.
 */
static int deliver(struct cmn_tfr_push *p, int step, const struct cmn_tfr_record *rec, size_t size)
{
	if (step == 1) {
		int rc = p->cb ? p->cb(rec, p->ctx) : 0;
		if (rc)
			return rc; /* p->off stays at this record */
	}
	/* step == -EBADMSG: skipped and counted by tfr__step */
	p->off += size;
	return 0;
}

/* Frames uncompressed stream bytes. */
static int feed_plain(struct cmn_tfr_push *p, const uint8_t *data, size_t len)
{
	struct cmn_tfr_record rec;
	size_t need;
	int rc;

	while (len > 0) {
		if (p->pend_len > 0) {
			size_t take;
			rc = tfr__step(&p->core, p->pend, p->pend_len, p->off, &rec, &need);
			if (rc < 0)
				return rc; /* header rejected */
			rc = pend_reserve(p, need);
			if (rc)
				return rc;
			take = need - p->pend_len < len ? need - p->pend_len : len;
			memcpy(p->pend + p->pend_len, data, take);
			p->pend_len += take;
			data += take;
			len -= take;
			if (p->pend_len < need)
				continue; /* len is 0 now */
			rc = tfr__step(&p->core, p->pend, p->pend_len, p->off, &rec, &need);
			if (rc == 0)
				continue; /* header complete; now the body */
			if (rc != 1 && rc != -EBADMSG)
				return rc;
			p->pend_len = 0;
			p->in_pend_cb = true;
			rc = deliver(p, rc, &rec, need);
			p->in_pend_cb = false;
			if (rc)
				return rc;
			continue;
		}
		rc = tfr__step(&p->core, data, len, p->off, &rec, &need);
		if (rc == 0) {
			/* cut by the end of this chunk: keep the start (len < need) */
			rc = pend_reserve(p, len);
			if (rc)
				return rc;
			memcpy(p->pend, data, len);
			p->pend_len = len;
			return 0;
		}
		if (rc != 1 && rc != -EBADMSG)
			return rc;
		rc = deliver(p, rc, &rec, need);
		if (rc)
			return rc;
		data += need;
		len -= need;
	}
	return 0;
}

/* Inflates compressed bytes and frames what comes out. */
static int feed_gzip(struct cmn_tfr_push *p, const uint8_t *data, size_t len)
{
	for (;;) {
		size_t used, produced;
		uint64_t uoff = p->off + p->pend_len;
		int rc = tfr__gz_run(&p->gz, &p->core, uoff, data, len, &used, p->zout, ZOUT_SIZE,
				     &produced);
		if (rc)
			return rc;
		data += used;
		len -= used;
		if (produced) {
			rc = feed_plain(p, p->zout, produced);
			if (rc)
				return rc;
		}
		if (!used && !produced)
			return 0;
	}
}

static int feed_stream(struct cmn_tfr_push *p, const uint8_t *data, size_t len)
{
	return p->mode == CMN_TFR_GZIP || p->mode == CMN_TFR_ZLIB ? feed_gzip(p, data, len)
								  : feed_plain(p, data, len);
}

/* AUTO: decides on the bytes held in p->magic and frames them. */
static int decide(struct cmn_tfr_push *p)
{
	p->mode = cmn_tfr_detect(p->magic, p->magic_len);
	if (p->mode == CMN_TFR_ZLIB || p->mode == CMN_TFR_GZIP) {
		if (tfr__gz_set(&p->gz, p->mode == CMN_TFR_ZLIB)) {
			snprintf(p->core.msg, sizeof(p->core.msg), "%s: out of memory in zlib",
				 p->core.name);
			return -ENOMEM;
		}
	}
	return feed_stream(p, p->magic, p->magic_len);
}

int cmn_tfr_push_feed(struct cmn_tfr_push *p, const void *data, size_t len)
{
	const uint8_t *d = data;
	int rc;

	if (p->dead)
		return p->dead;
	if (p->mode == CMN_TFR_AUTO) {
		while (p->magic_len < CMN_TFR_DETECT_BYTES && len > 0) {
			p->magic[p->magic_len++] = *d++;
			len--;
		}
		if (p->magic_len < CMN_TFR_DETECT_BYTES)
			return 0;
		rc = decide(p);
		if (rc)
			goto fail;
	}
	rc = feed_stream(p, d, len);
	if (rc)
		goto fail;
	return 0;
fail:
	p->dead = rc;
	return rc;
}

int cmn_tfr_push_take(struct cmn_tfr_push *p, void *spare, size_t spare_cap, void **buf,
		      size_t *cap)
{
	if (!p->in_pend_cb || !p->pend)
		return -ENOENT;
	*buf = p->pend;
	*cap = p->pend_cap;
	p->pend = spare;
	p->pend_cap = spare ? spare_cap : 0;
	p->in_pend_cb = false; /* one take per record */
	return 0;
}

int cmn_tfr_push_finish(struct cmn_tfr_push *p)
{
	int rc = 0;

	if (p->dead)
		return p->dead;
	if (p->mode == CMN_TFR_AUTO && p->magic_len > 0) {
		/* a stream shorter than the detection: decide on what came */
		rc = decide(p);
		if (rc) {
			p->dead = rc;
			return rc;
		}
	}
	if ((p->mode == CMN_TFR_GZIP || p->mode == CMN_TFR_ZLIB) && p->gz.in_member) {
		snprintf(p->core.msg, sizeof(p->core.msg),
			 "%s: %s stream ends inside a %s at compressed offset %" PRIu64
			 ": truncated transfer",
			 p->core.name, p->gz.zlib ? "zlib" : "gzip",
			 p->gz.zlib ? "zlib stream" : "member", p->gz.in_total);
		rc = -EPROTO;
	} else if (p->pend_len > 0) {
		struct cmn_tfr_record rec;
		size_t need;
		(void)tfr__step(&p->core, p->pend, p->pend_len, p->off, &rec, &need);
		tfr__truncated(&p->core, p->off, p->pend_len, need);
		rc = -EPROTO;
	}
	if (rc)
		p->dead = rc;
	return rc;
}

enum cmn_tfr_compression cmn_tfr_push_compression(const struct cmn_tfr_push *p)
{
	return p->mode;
}

void cmn_tfr_push_resume(struct cmn_tfr_push *p)
{
	enum cmn_tfr_compression m = p->mode;

	cmn_tfr_push_reset(p);
	p->core.mid_stream = true;
	if (m != CMN_TFR_AUTO) {
		p->mode = m;
		if (m == CMN_TFR_GZIP || m == CMN_TFR_ZLIB)
			(void)tfr__gz_set(&p->gz, m == CMN_TFR_ZLIB); /* reset keeps its mode */
	}
}

void cmn_tfr_push_reset(struct cmn_tfr_push *p)
{
	p->mode = p->want;
	p->core.mid_stream = false;
	p->magic_len = 0;
	p->pend_len = 0;
	p->off = 0;
	p->in_pend_cb = false;
	p->dead = 0;
	p->core.records = 0;
	p->core.bad = 0;
	p->core.msg[0] = '\0';
	tfr__gz_reset(&p->gz);
}

const char *cmn_tfr_push_error(const struct cmn_tfr_push *p)
{
	return p->core.msg;
}

uint64_t cmn_tfr_push_records(const struct cmn_tfr_push *p)
{
	return p->core.records;
}

uint64_t cmn_tfr_push_bad_records(const struct cmn_tfr_push *p)
{
	return p->core.bad;
}

uint64_t cmn_tfr_push_offset(const struct cmn_tfr_push *p)
{
	return p->off;
}

void cmn_tfr_push_free(struct cmn_tfr_push *p)
{
	if (!p)
		return;
	tfr__gz_end(&p->gz);
	free(p->zout);
	free(p->pend);
	tfr__core_free(&p->core);
	free(p);
}
