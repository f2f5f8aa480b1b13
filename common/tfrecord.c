/*
 * tfrecord.c - TFRecord frame walker, framing step and the pull readers
 * (buffer, fd).
 *
 * Owns the one frame walker, cmn_tfr_walk_next(): given bytes in memory, it
 * reports the frame at a position whole, says how many bytes it needs first
 * (12 for the header, then 16 + length), or rejects it; every reader of
 * TFRecord framing in the project steps with it.  tfr__step() is one step
 * of it with the readers' messages and counters.  The pull readers below
 * and the push decoder (tfrecord_push.c) only differ in where the bytes
 * come from:
 *
 *   buffer, uncompressed:  the window is the caller's buffer; zero copy.
 *   fd, uncompressed:      the window is r->buf, refilled with read(2) of
 *                          read_size (1 MiB) bytes when a record is cut by
 *                          its end: one syscall per MiB, none per record.
 *   buffer or fd, GZIP or ZLIB:  r->buf is refilled by inflate
 *                          (tfrecord_gzip.c).
 *
 * AUTO is decided once, by cmn_tfr_detect() on the first 12 bytes.
 *
 * The window [pos, win_len) of r->buf always starts at a record boundary
 * (stream offset win_off + pos).  Its capacity grows only to 16 + a length
 * that passed the header check, so max_record bounds memory.
 *
 * Does not write (tfrecord_write.c) and does not know what a payload holds.
 * A reader is used by one thread at a time; no locking.
 */
#include "common/tfrecord_i.h"

#include "common/crc32c.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- framing helpers ------------------------------------------------- */

static void put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

void cmn_tfr_put_header(uint8_t hdr[CMN_TFR_HEADER_SIZE], uint64_t len)
{
	for (int i = 0; i < 8; i++)
		hdr[i] = (uint8_t)(len >> (8 * i));
	put_le32(hdr + 8, cmn_crc32c_mask(cmn_crc32c(0, hdr, 8)));
}

void cmn_tfr_put_footer(uint8_t ftr[CMN_TFR_FOOTER_SIZE], uint32_t crc)
{
	put_le32(ftr, cmn_crc32c_mask(crc));
}

int cmn_tfr_get_header(const uint8_t hdr[CMN_TFR_HEADER_SIZE], size_t max_record, uint64_t *len)
{
	*len = tfr__le64(hdr);
	if (cmn_crc32c(0, hdr, 8) != cmn_crc32c_unmask(tfr__le32(hdr + 8)))
		return -EILSEQ;
	return *len > (uint64_t)max_record ? -EMSGSIZE : 0;
}

uint32_t cmn_tfr_get_footer(const uint8_t ftr[CMN_TFR_FOOTER_SIZE])
{
	return cmn_crc32c_unmask(tfr__le32(ftr));
}

/* ---- the frame walker ------------------------------------------------ */

int cmn_tfr_walk_next(struct cmn_tfr_walk *w, struct cmn_tfr_frame *fr)
{
	size_t avail = w->pos < w->len ? w->len - w->pos : 0;
	size_t cap = w->max_record ? w->max_record : CMN_TFR_DEFAULT_MAX_RECORD;
	int rc;

	*fr = (struct cmn_tfr_frame){.offset = w->base + w->pos, .need = CMN_TFR_HEADER_SIZE};
	if (avail < CMN_TFR_HEADER_SIZE)
		return 0;
	if (cap > SIZE_MAX - CMN_TFR_OVERHEAD) /* 16 + len must not wrap */
		cap = SIZE_MAX - CMN_TFR_OVERHEAD;
	rc = cmn_tfr_get_header(w->buf + w->pos, cap, &fr->len);
	if (rc)
		return rc;
	fr->need = (size_t)fr->len + CMN_TFR_OVERHEAD;
	if (!w->headers_only) {
		if (avail < fr->need)
			return 0;
		fr->data = w->buf + w->pos + CMN_TFR_HEADER_SIZE;
		fr->crc = cmn_tfr_get_footer(fr->data + fr->len);
	}
	w->pos += fr->need;
	if (fr->data && w->check_crc && cmn_crc32c(0, fr->data, (size_t)fr->len) != fr->crc)
		return -EBADMSG;
	return 1;
}

/* ---- the framing step ------------------------------------------------ */

int tfr__core_init(struct tfr__core *c, const struct cmn_tfr_opts *o)
{
	memset(c, 0, sizeof(*c));
	c->name = strdup(o && o->name ? o->name : "<stream>");
	if (!c->name)
		return -ENOMEM;
	c->max_record = o && o->max_record ? o->max_record : CMN_TFR_DEFAULT_MAX_RECORD;
	/* 16 + max_record must not wrap */
	if (c->max_record > SIZE_MAX - 2 * CMN_TFR_OVERHEAD)
		c->max_record = SIZE_MAX - 2 * CMN_TFR_OVERHEAD;
	c->skip_crc = o && o->skip_crc;
	return 0;
}

void tfr__core_free(struct tfr__core *c)
{
	free(c->name);
	c->name = NULL;
}

int tfr__step(struct tfr__core *c, const uint8_t *p, size_t avail, uint64_t off,
	      struct cmn_tfr_record *rec, size_t *need)
{
	struct cmn_tfr_walk w = {.buf = p,
				 .len = avail,
				 .base = off,
				 .max_record = c->max_record,
				 .check_crc = !c->skip_crc};
	struct cmn_tfr_frame fr;
	int rc = cmn_tfr_walk_next(&w, &fr);
	enum cmn_tfr_compression looks =
	    rc == -EILSEQ && off == 0 && !c->mid_stream ? cmn_tfr_detect(p, avail) : CMN_TFR_NONE;

	*need = fr.need;
	if (fr.data) /* a whole record: rc 1 or -EBADMSG */
		*rec = (struct cmn_tfr_record){
		    .data = fr.data, .len = (size_t)fr.len, .offset = off, .crc = fr.crc};
	c->records += rc == 1;
	c->bad += rc == -EBADMSG;
	if (looks == CMN_TFR_GZIP || looks == CMN_TFR_ZLIB)
		/* read as plain (compression = none) but compressed: say so */
		snprintf(c->msg, sizeof(c->msg),
			 "%s: offset 0: no TFRecord header, and the file looks %s-compressed: set "
			 "compression = %s (or auto)",
			 c->name, looks == CMN_TFR_GZIP ? "GZIP" : "ZLIB",
			 cmn_tfr_compression_name(looks));
	else if (rc == -EILSEQ && off == 0 && !c->mid_stream)
		snprintf(c->msg, sizeof(c->msg),
			 "%s: offset 0: no TFRecord header (length crc mismatch) and no gzip or "
			 "zlib header: not a TFRecord file, or corrupt from its first byte",
			 c->name);
	else if (rc == -EILSEQ)
		snprintf(c->msg, sizeof(c->msg),
			 "%s: offset %" PRIu64 ": length crc mismatch (length field %" PRIu64
			 "): framing lost, the file is corrupt or not TFRecord",
			 c->name, off, fr.len);
	else if (rc == -EMSGSIZE)
		snprintf(c->msg, sizeof(c->msg),
			 "%s: offset %" PRIu64 ": record length %" PRIu64
			 " exceeds the cap of %zu bytes (raise max_record if records are that big)",
			 c->name, off, fr.len, c->max_record);
	else if (rc == -EBADMSG)
		snprintf(c->msg, sizeof(c->msg),
			 "%s: offset %" PRIu64 ": payload crc mismatch (record of %zu bytes)",
			 c->name, off, rec->len);
	return rc;
}

void tfr__truncated(struct tfr__core *c, uint64_t off, size_t have, size_t need)
{
	if (need <= CMN_TFR_HEADER_SIZE)
		snprintf(c->msg, sizeof(c->msg),
			 "%s: offset %" PRIu64 ": stream ends inside a record header (%zu of 12 "
			 "bytes): truncated file",
			 c->name, off, have);
	else
		snprintf(c->msg, sizeof(c->msg),
			 "%s: offset %" PRIu64 ": stream ends inside a record of %zu bytes "
			 "(%zu of %zu framed bytes present): truncated file",
			 c->name, off, need - CMN_TFR_OVERHEAD, have, need);
}

/* ---- pull reader ----------------------------------------------------- */

struct cmn_tfr_reader {
	struct tfr__core core;
	int fd; /* -1 for buffer input */
	bool gzip;
	bool eof; /* no more stream bytes will come beyond the window */
	int dead; /* sticky fatal error, 0 if none */

	/* the window of stream bytes: win[pos, win_len), win[0] at win_off */
	const uint8_t *win;
	size_t win_len, pos;
	uint64_t win_off;

	uint8_t *buf; /* owned window storage (fd or gzip input), capacity cap */
	size_t cap;
	size_t read_size;

	/* raw input for gzip: the caller's buffer, or zin refilled from fd */
	const uint8_t *src;
	size_t src_len, src_pos;
	uint8_t *zin;
	bool fd_eof;
	struct tfr__gz gz;
};

static int reader_alloc(struct cmn_tfr_reader **out, const struct cmn_tfr_opts *o, char *err,
			size_t errlen)
{
	struct cmn_tfr_reader *r = calloc(1, sizeof(*r));
	int rc;

	if (!r) {
		snprintf(err, errlen, "tfrecord reader: out of memory");
		return -ENOMEM;
	}
	rc = tfr__core_init(&r->core, o);
	if (rc) {
		free(r);
		snprintf(err, errlen, "tfrecord reader: out of memory");
		return rc;
	}
	r->fd = -1;
	r->read_size = o && o->read_size ? o->read_size : TFR_DEFAULT_READ_SIZE;
	if (r->read_size < 64)
		r->read_size = 64;
	*out = r;
	return 0;
}

static int reader_start_gzip(struct cmn_tfr_reader *r, bool zlib, char *err, size_t errlen)
{
	int rc = tfr__gz_init(&r->gz, zlib);

	if (rc == 0) {
		r->buf = malloc(r->read_size);
		if (!r->buf)
			rc = -ENOMEM;
		r->cap = r->read_size;
	}
	if (rc) {
		snprintf(err, errlen, "%s: out of memory starting %s", r->core.name,
			 zlib ? "zlib" : "gzip");
		return rc;
	}
	r->gzip = true;
	r->win = r->buf;
	return 0;
}

/* The compression to read: as asked, or detected on the first bytes. */
static enum cmn_tfr_compression resolve(const struct cmn_tfr_opts *o, const uint8_t *head,
					size_t len)
{
	enum cmn_tfr_compression c = o ? o->compression : CMN_TFR_AUTO;
	return c == CMN_TFR_AUTO ? cmn_tfr_detect(head, len) : c;
}

int cmn_tfr_reader_open_buf(struct cmn_tfr_reader **out, const void *buf, size_t len,
			    const struct cmn_tfr_opts *opts, char *err, size_t errlen)
{
	struct cmn_tfr_reader *r;
	enum cmn_tfr_compression comp =
	    resolve(opts, buf, len < CMN_TFR_DETECT_BYTES ? len : CMN_TFR_DETECT_BYTES);
	int rc = reader_alloc(&r, opts, err, errlen);

	if (rc)
		return rc;
	if (comp == CMN_TFR_GZIP || comp == CMN_TFR_ZLIB) {
		rc = reader_start_gzip(r, comp == CMN_TFR_ZLIB, err, errlen);
		if (rc) {
			cmn_tfr_reader_free(r);
			return rc;
		}
		r->src = buf;
		r->src_len = len;
	} else {
		r->win = buf;
		r->win_len = len;
		r->eof = true;
	}
	*out = r;
	return 0;
}

/* read(2) that retries EINTR; returns bytes, 0 at end of file, or -errno. */
static ssize_t read_some(int fd, void *p, size_t n)
{
	for (;;) {
		ssize_t got = read(fd, p, n);
		if (got >= 0)
			return got;
		if (errno != EINTR)
			return -errno;
	}
}

static int read_error(struct cmn_tfr_reader *r, ssize_t rc)
{
	snprintf(r->core.msg, sizeof(r->core.msg),
		 "%s: read failed after stream offset %" PRIu64 ": %s", r->core.name,
		 r->win_off + r->win_len, strerror((int)-rc));
	return -EIO;
}

int cmn_tfr_reader_open_fd(struct cmn_tfr_reader **out, int fd, const struct cmn_tfr_opts *opts,
			   char *err, size_t errlen)
{
	struct cmn_tfr_reader *r;
	enum cmn_tfr_compression comp;
	int rc = reader_alloc(&r, opts, err, errlen);
	ssize_t got = 0;
	uint8_t *first;

	if (rc)
		return rc;
	r->fd = fd;
	first = malloc(r->read_size);
	if (!first) {
		snprintf(err, errlen, "%s: out of memory", r->core.name);
		cmn_tfr_reader_free(r);
		return -ENOMEM;
	}
	/* The first bytes decide AUTO; they become the first window or zin. */
	while ((size_t)got < CMN_TFR_DETECT_BYTES) {
		ssize_t n = read_some(fd, first + got, r->read_size - (size_t)got);
		if (n < 0) {
			snprintf(err, errlen, "%s: read failed: %s", r->core.name,
				 strerror((int)-n));
			free(first);
			cmn_tfr_reader_free(r);
			return -EIO;
		}
		if (n == 0) {
			r->fd_eof = true;
			break;
		}
		got += n;
	}
	comp = resolve(opts, first,
		       (size_t)got < CMN_TFR_DETECT_BYTES ? (size_t)got : CMN_TFR_DETECT_BYTES);
	if (comp == CMN_TFR_GZIP || comp == CMN_TFR_ZLIB) {
		rc = reader_start_gzip(r, comp == CMN_TFR_ZLIB, err, errlen);
		if (rc) {
			free(first);
			cmn_tfr_reader_free(r);
			return rc;
		}
		r->zin = first;
		r->src = first;
		r->src_len = (size_t)got;
	} else {
		r->buf = first;
		r->cap = r->read_size;
		r->win = first;
		r->win_len = (size_t)got;
		r->eof = r->fd_eof;
	}
	*out = r;
	return 0;
}

/* Moves the window to the front of buf and makes room for `need` bytes. */
static int window_make_room(struct cmn_tfr_reader *r, size_t need)
{
	if (r->pos > 0) {
		memmove(r->buf, r->buf + r->pos, r->win_len - r->pos);
		r->win_off += r->pos;
		r->win_len -= r->pos;
		r->pos = 0;
	}
	if (need > r->cap) {
		size_t ncap = r->cap * 2 > need ? r->cap * 2 : need;
		uint8_t *nb;
		if (ncap > r->core.max_record + CMN_TFR_OVERHEAD &&
		    need <= r->core.max_record + CMN_TFR_OVERHEAD)
			ncap = r->core.max_record + CMN_TFR_OVERHEAD;
		nb = realloc(r->buf, ncap);
		if (!nb) {
			snprintf(r->core.msg, sizeof(r->core.msg),
				 "%s: out of memory for a record of %zu bytes", r->core.name, need);
			return -ENOMEM;
		}
		r->buf = nb;
		r->cap = ncap;
	}
	r->win = r->buf;
	return 0;
}

/* One round of gzip input: refills zin from fd when empty, inflates into buf. */
static int gzip_fill_once(struct cmn_tfr_reader *r, bool *progress)
{
	size_t used, produced;
	int rc;

	if (r->src_pos == r->src_len && r->fd >= 0 && !r->fd_eof) {
		ssize_t n = read_some(r->fd, r->zin, r->read_size);
		if (n < 0)
			return read_error(r, n);
		if (n == 0)
			r->fd_eof = true;
		r->src = r->zin;
		r->src_len = (size_t)n;
		r->src_pos = 0;
	}
	rc = tfr__gz_run(&r->gz, &r->core, r->win_off + r->win_len, r->src + r->src_pos,
			 r->src_len - r->src_pos, &used, r->buf + r->win_len, r->cap - r->win_len,
			 &produced);
	if (rc)
		return rc;
	r->src_pos += used;
	r->win_len += produced;
	*progress = used || produced;
	if (!*progress && r->src_pos == r->src_len && (r->fd < 0 || r->fd_eof)) {
		r->eof = true;
		if (r->gz.in_member) {
			snprintf(r->core.msg, sizeof(r->core.msg),
				 "%s: %s stream ends inside a %s at compressed offset %" PRIu64
				 ": truncated file",
				 r->core.name, r->gz.zlib ? "zlib" : "gzip",
				 r->gz.zlib ? "zlib stream" : "member", r->gz.in_total);
			return -EPROTO;
		}
	}
	return 0;
}

/*
 * Makes win[pos, pos + need) available, or sets r->eof when the stream ends
 * first.  Returns 0 or a fatal error with its message in core.msg.
 */
static int window_fill(struct cmn_tfr_reader *r, size_t need)
{
	int rc;

	if (r->win_len - r->pos >= need || r->eof)
		return 0;
	rc = window_make_room(r, need);
	if (rc)
		return rc;
	while (r->win_len < need && !r->eof) {
		if (r->gzip) {
			bool progress;
			rc = gzip_fill_once(r, &progress);
			if (rc)
				return rc;
		} else {
			/* as much as fits: one read per read_size bytes, not per record */
			ssize_t n = read_some(r->fd, r->buf + r->win_len, r->cap - r->win_len);
			if (n < 0)
				return read_error(r, n);
			if (n == 0)
				r->eof = true;
			r->win_len += (size_t)n;
		}
	}
	return 0;
}

int cmn_tfr_next(struct cmn_tfr_reader *r, struct cmn_tfr_record *rec)
{
	size_t need = CMN_TFR_HEADER_SIZE;
	int rc;

	if (r->dead)
		return r->dead;
	r->core.msg[0] = '\0';
	for (;;) {
		size_t avail;

		rc = window_fill(r, need);
		if (rc)
			goto fatal;
		avail = r->win_len - r->pos;
		if (avail == 0 && r->eof)
			return 0;
		rc = tfr__step(&r->core, r->win + r->pos, avail, r->win_off + r->pos, rec, &need);
		if (rc == 1 || rc == -EBADMSG) {
			r->pos += need;
			return rc;
		}
		if (rc < 0)
			goto fatal;
		if (avail < need && r->eof) {
			tfr__truncated(&r->core, r->win_off + r->pos, avail, need);
			rc = -EPROTO;
			goto fatal;
		}
	}
fatal:
	r->dead = rc;
	return rc;
}

const char *cmn_tfr_reader_error(const struct cmn_tfr_reader *r)
{
	return r->core.msg;
}

uint64_t cmn_tfr_reader_records(const struct cmn_tfr_reader *r)
{
	return r->core.records;
}

uint64_t cmn_tfr_reader_bad_records(const struct cmn_tfr_reader *r)
{
	return r->core.bad;
}

void cmn_tfr_reader_free(struct cmn_tfr_reader *r)
{
	if (!r)
		return;
	if (r->gzip)
		tfr__gz_end(&r->gz);
	free(r->zin);
	free(r->buf);
	tfr__core_free(&r->core);
	free(r);
}
