/*
 * test_tfrecord.c - Check suite for the TFRecord framing of common/.
 *
 * Streams are written with cmn_tfr_writer, then read by all three front ends
 * (buffer reader, fd reader, push decoder); the tests check that they agree
 * with what was written and with each other, and that every error class of
 * tfrecord.h comes out with the right code and file offset.  GZIP streams
 * are made here with zlib's deflate (gzip header with FNAME and MTIME,
 * one or two members).  The real files of ../shared/testdata are read by
 * test_tfrecord_testdata.c.
 */
#include "tests/common/tfr_util.h"

#include "common/crc32c.h"

#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <zlib.h>

/* ---- building streams ---- */

struct stream {
	uint8_t *data;
	size_t len;
	size_t n;
	uint64_t off[RES_MAX]; /* header offset of each record */
	size_t rlen[RES_MAX];
	uint64_t hash[RES_MAX];
};

static uint8_t pattern(size_t rec, size_t j)
{
	return (uint8_t)(rec * 131 + j * 7 + (j >> 8));
}

/* Writes records of the given sizes with the writer (buffer of buf_size). */
static void build(struct stream *s, const size_t *sizes, size_t n, size_t buf_size)
{
	struct cmn_tfr_writer *w;
	char err[128];
	int fd = memfd_create("tfr-build", MFD_CLOEXEC);
	uint64_t off = 0;

	ck_assert_int_ge(fd, 0);
	ck_assert_uint_le(n, RES_MAX);
	ck_assert_int_eq(cmn_tfr_writer_open(&w, fd, buf_size, err, sizeof(err)), 0);
	s->n = n;
	for (size_t i = 0; i < n; i++) {
		uint8_t *p = malloc(sizes[i] + 1);
		ck_assert_ptr_nonnull(p);
		for (size_t j = 0; j < sizes[i]; j++)
			p[j] = pattern(i, j);
		/* half the records pass their crc, as the sampler does */
		if (i % 2)
			ck_assert_int_eq(cmn_tfr_writer_append(w, p, sizes[i], 0, false), 0);
		else
			ck_assert_int_eq(
			    cmn_tfr_writer_append(w, p, sizes[i], cmn_crc32c(0, p, sizes[i]), true),
			    0);
		s->off[i] = off;
		s->rlen[i] = sizes[i];
		s->hash[i] = fnv1a(p, sizes[i]);
		off += sizes[i] + CMN_TFR_OVERHEAD;
		free(p);
	}
	ck_assert_uint_eq(cmn_tfr_writer_bytes(w), off);
	ck_assert_int_eq(cmn_tfr_writer_flush(w), 0);
	cmn_tfr_writer_free(w);
	s->len = (size_t)off;
	s->data = malloc(s->len + 1);
	ck_assert_ptr_nonnull(s->data);
	ck_assert_int_eq(pread(fd, s->data, s->len, 0), (ssize_t)s->len);
	close(fd);
}

static void assert_matches(const struct tfr_result *r, const struct stream *s, const char *what)
{
	ck_assert_msg(r->n == s->n, "%s: %zu records read, %zu written (%s)", what, r->n, s->n,
		      r->msg);
	for (size_t i = 0; i < s->n; i++) {
		ck_assert_msg(r->off[i] == s->off[i], "%s: record %zu at %llu, written at %llu",
			      what, i, (unsigned long long)r->off[i],
			      (unsigned long long)s->off[i]);
		ck_assert_msg(r->len[i] == s->rlen[i], "%s: record %zu length", what, i);
		ck_assert_msg(r->hash[i] == s->hash[i], "%s: record %zu payload differs", what, i);
	}
	ck_assert_msg(r->end_rc == 0, "%s: ended with %d: %s", what, r->end_rc, r->msg);
	ck_assert_uint_eq(r->records, s->n);
	ck_assert_uint_eq(r->bad, 0);
}

/* gzip of data, in `members` members split at arbitrary points; FNAME and MTIME set. */
static uint8_t *gzip_of(const uint8_t *data, size_t len, int members, size_t *out_len)
{
	size_t cap = len + len / 10 + 1024 * (size_t)members, used = 0;
	uint8_t *out = malloc(cap);
	size_t at = 0;

	ck_assert_ptr_nonnull(out);
	for (int m = 0; m < members; m++) {
		size_t part = m == members - 1 ? len - at : (len / (size_t)members) + 7;
		z_stream z;
		gz_header h;
		memset(&z, 0, sizeof(z));
		memset(&h, 0, sizeof(h));
		h.name = (Bytef *)"data_tfrecord-00000-of-00001";
		h.time = 1600000000;
		h.os = 3;
		ck_assert_int_eq(
		    deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
		ck_assert_int_eq(deflateSetHeader(&z, &h), Z_OK);
		z.next_in = (Bytef *)(uintptr_t)(data + at);
		z.avail_in = (uInt)part;
		z.next_out = out + used;
		z.avail_out = (uInt)(cap - used);
		ck_assert_int_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
		used = cap - z.avail_out;
		deflateEnd(&z);
		at += part;
	}
	ck_assert_uint_eq(at, len);
	ck_assert_uint_eq(out[3] & 0x08, 0x08); /* FNAME present */
	*out_len = used;
	return out;
}

static const size_t mixed_sizes[] = {0, 1, 11, 4096, 300000, 5, 65536, 65535, 7, 0, 1000, 200000};
#define N_MIXED (sizeof(mixed_sizes) / sizeof(mixed_sizes[0]))

/* ---- round trips ---- */

START_TEST(test_round_trip)
{
	static size_t sizes[300];
	struct stream s;
	struct tfr_result *r = malloc(sizeof(*r));
	struct cmn_tfr_opts o = {.name = "rt"};
	const size_t read_sizes[] = {0, 64, 100, 4096, 70000};

	ck_assert_ptr_nonnull(r);
	for (size_t i = 0; i < 300; i++)
		sizes[i] = i < N_MIXED ? mixed_sizes[i] : (i * 7919) % 5000;
	build(&s, sizes, 300, 4096);

	collect_buf(s.data, s.len, &o, r);
	assert_matches(r, &s, "buffer reader");
	for (size_t k = 0; k < sizeof(read_sizes) / sizeof(read_sizes[0]); k++) {
		o.read_size = read_sizes[k];
		collect_fd(s.data, s.len, &o, r);
		assert_matches(r, &s, "fd reader");
	}
	o.read_size = 0;
	collect_push(s.data, s.len, &o, 0, r);
	assert_matches(r, &s, "push decoder, random chunks");
	collect_push(s.data, s.len, &o, 1, r);
	assert_matches(r, &s, "push decoder, 1-byte chunks");
	collect_push(s.data, s.len, &o, s.len, r);
	assert_matches(r, &s, "push decoder, one chunk");
	/* forced NONE on a buffer reader must not look for gzip */
	o.compression = CMN_TFR_NONE;
	collect_buf(s.data, s.len, &o, r);
	assert_matches(r, &s, "buffer reader, NONE");
	free(s.data);
	free(r);
}
END_TEST

/* Payload pointers of the buffer reader point into the caller's buffer. */
START_TEST(test_zero_copy)
{
	struct stream s;
	struct cmn_tfr_reader *rd;
	struct cmn_tfr_record rec;
	char err[128];

	build(&s, mixed_sizes, N_MIXED, 0);
	ck_assert_int_eq(cmn_tfr_reader_open_buf(&rd, s.data, s.len, NULL, err, sizeof(err)), 0);
	for (size_t i = 0; i < s.n; i++) {
		ck_assert_int_eq(cmn_tfr_next(rd, &rec), 1);
		ck_assert_ptr_eq(rec.data, s.data + s.off[i] + CMN_TFR_HEADER_SIZE);
		ck_assert_uint_eq(rec.crc, cmn_crc32c(0, rec.data, rec.len));
	}
	ck_assert_int_eq(cmn_tfr_next(rd, &rec), 0);
	ck_assert_int_eq(cmn_tfr_next(rd, &rec), 0);
	cmn_tfr_reader_free(rd);
	free(s.data);
}
END_TEST

START_TEST(test_empty_stream)
{
	struct tfr_result r;
	struct cmn_tfr_opts o = {0};

	collect_buf("", 0, &o, &r);
	ck_assert_int_eq(r.end_rc, 0);
	ck_assert_uint_eq(r.n, 0);
	collect_fd("", 0, &o, &r);
	ck_assert_int_eq(r.end_rc, 0);
	ck_assert_uint_eq(r.n, 0);
	collect_push("", 0, &o, 1, &r);
	ck_assert_int_eq(r.end_rc, 0);
	ck_assert_uint_eq(r.n, 0);
}
END_TEST

/* ---- error classes ---- */

/* A stream cut at every byte: whole records before the cut, then -EPROTO or a clean end. */
START_TEST(test_truncated_everywhere)
{
	static const size_t sizes[] = {0, 5, 20, 3};
	struct stream s;
	struct tfr_result r;
	struct cmn_tfr_opts o = {.name = "cut.tfrecord", .read_size = 64};

	build(&s, sizes, 4, 0);
	for (size_t cut = 0; cut < s.len; cut++) {
		size_t whole = 0, boundary = 0;
		char want[64];
		while (whole < s.n && s.off[whole] + s.rlen[whole] + CMN_TFR_OVERHEAD <= cut)
			whole++;
		boundary = whole < s.n && s.off[whole] == cut;
		snprintf(want, sizeof(want),
			 "cut.tfrecord: offset %llu:", (unsigned long long)s.off[whole]);
		for (int fe = 0; fe < 4; fe++) {
			if (fe == 0)
				collect_buf(s.data, cut, &o, &r);
			else if (fe == 1)
				collect_fd(s.data, cut, &o, &r);
			else
				collect_push(s.data, cut, &o, fe == 2 ? 1 : 0, &r);
			ck_assert_msg(r.n == whole, "cut %zu, front end %d: %zu records, want %zu",
				      cut, fe, r.n, whole);
			if (boundary) {
				ck_assert_msg(r.end_rc == 0,
					      "cut %zu at a record boundary, fe %d: %d (%s)", cut,
					      fe, r.end_rc, r.msg);
			} else {
				ck_assert_msg(r.end_rc == -EPROTO,
					      "cut %zu, fe %d: %d, want -EPROTO", cut, fe,
					      r.end_rc);
				ck_assert_msg(strstr(r.msg, want) && strstr(r.msg, "truncated"),
					      "cut %zu, fe %d: '%s' lacks '%s'", cut, fe, r.msg,
					      want);
			}
		}
	}
	free(s.data);
}
END_TEST

START_TEST(test_oversized)
{
	static const size_t sizes[] = {10, 101, 5};
	struct stream s;
	struct tfr_result r;
	struct cmn_tfr_opts o = {.name = "big", .max_record = 100};
	uint8_t hdr[CMN_TFR_HEADER_SIZE];
	uint64_t len;

	build(&s, sizes, 3, 0);
	collect_buf(s.data, s.len, &o, &r);
	ck_assert_uint_eq(r.n, 1);
	ck_assert_int_eq(r.end_rc, -EMSGSIZE);
	ck_assert_msg(strstr(r.msg, "big: offset 26: record length 101 exceeds the cap of 100"),
		      "message: %s", r.msg);
	collect_fd(s.data, s.len, &o, &r);
	ck_assert_uint_eq(r.n, 1);
	ck_assert_int_eq(r.end_rc, -EMSGSIZE);
	collect_push(s.data, s.len, &o, 1, &r);
	ck_assert_uint_eq(r.n, 1);
	ck_assert_int_eq(r.end_rc, -EMSGSIZE);
	ck_assert_ptr_nonnull(strstr(r.msg, "offset 26"));
	/* a cap of exactly the length passes */
	o.max_record = 101;
	collect_buf(s.data, s.len, &o, &r);
	ck_assert_uint_eq(r.n, 3);
	ck_assert_int_eq(r.end_rc, 0);

	/* a valid header announcing 2^62 bytes: refused by the default cap, before any allocation
	 */
	cmn_tfr_put_header(hdr, 1ull << 62);
	ck_assert_int_eq(cmn_tfr_get_header(hdr, CMN_TFR_DEFAULT_MAX_RECORD, &len), -EMSGSIZE);
	collect_fd(hdr, sizeof(hdr), NULL, &r);
	ck_assert_int_eq(r.end_rc, -EMSGSIZE);
	collect_push(hdr, sizeof(hdr), NULL, 3, &r);
	ck_assert_int_eq(r.end_rc, -EMSGSIZE);
	free(s.data);
}
END_TEST

/* A flipped bit in a length or in the length's CRC: -EILSEQ at that record, and the stream is dead.
 */
START_TEST(test_length_crc_flip)
{
	static const size_t sizes[] = {7, 30, 9};
	const size_t at[] = {0, 3, 7, 8, 11}; /* length bytes and crc bytes of record 1 */
	struct stream s;
	struct tfr_result r;
	struct cmn_tfr_opts o = {.name = "flip"};

	build(&s, sizes, 3, 0);
	for (size_t k = 0; k < sizeof(at) / sizeof(at[0]); k++) {
		size_t pos = s.off[1] + at[k];
		for (int fe = 0; fe < 3; fe++) {
			s.data[pos] ^= 0x10;
			if (fe == 0)
				collect_buf(s.data, s.len, &o, &r);
			else if (fe == 1)
				collect_fd(s.data, s.len, &o, &r);
			else
				collect_push(s.data, s.len, &o, 0, &r);
			s.data[pos] ^= 0x10;
			ck_assert_uint_eq(r.n, 1);
			ck_assert_int_eq(r.end_rc, -EILSEQ);
			ck_assert_msg(strstr(r.msg, "flip: offset 23: length crc mismatch"),
				      "byte %zu, fe %d: %s", at[k], fe, r.msg);
		}
	}
	/* the helper on its own */
	{
		uint8_t hdr[CMN_TFR_HEADER_SIZE];
		uint64_t len = 0;
		cmn_tfr_put_header(hdr, 12345);
		ck_assert_int_eq(cmn_tfr_get_header(hdr, 1 << 20, &len), 0);
		ck_assert_uint_eq(len, 12345);
		hdr[2] ^= 1;
		ck_assert_int_eq(cmn_tfr_get_header(hdr, 1 << 20, &len), -EILSEQ);
	}
	free(s.data);
}
END_TEST

/* A flipped payload or footer bit: that record is skipped and counted, the rest is read. */
START_TEST(test_payload_crc_flip)
{
	static const size_t sizes[] = {40, 40, 40, 40, 40};
	struct stream s;
	struct tfr_result r;
	struct cmn_tfr_opts o = {.name = "p.tfrecord"};
	const size_t positions[] = {12, 12 + 39, 12 + 40, 12 + 43}; /* payload first/last, footer */

	build(&s, sizes, 5, 0);
	for (size_t k = 0; k < sizeof(positions) / sizeof(positions[0]); k++) {
		size_t pos = s.off[2] + positions[k];
		s.data[pos] ^= 0x01;
		for (int fe = 0; fe < 3; fe++) {
			if (fe == 0)
				collect_buf(s.data, s.len, &o, &r);
			else if (fe == 1)
				collect_fd(s.data, s.len, &o, &r);
			else
				collect_push(s.data, s.len, &o, 1, &r);
			ck_assert_uint_eq(r.n, 4);
			ck_assert_uint_eq(r.off[2], s.off[3]);
			ck_assert_uint_eq(r.hash[3], s.hash[4]);
			ck_assert_int_eq(r.end_rc, 0);
			ck_assert_uint_eq(r.bad, 1);
			ck_assert_uint_eq(r.records, 4);
			if (fe < 2) {
				ck_assert_int_eq(r.n_badmsg, 1);
				ck_assert_msg(strstr(r.msg,
						     "p.tfrecord: offset 112: payload crc mismatch "
						     "(record of 40 bytes)"),
					      "message: %s", r.msg);
			}
		}
		/* skip_crc trusts the payload CRC */
		o.skip_crc = true;
		collect_buf(s.data, s.len, &o, &r);
		ck_assert_uint_eq(r.n, 5);
		ck_assert_uint_eq(r.bad, 0);
		o.skip_crc = false;
		s.data[pos] ^= 0x01;
	}
	free(s.data);
}
END_TEST

/* ---- the frame walker ---- */

/* Every frame whole, at its offset; cut at every byte: 0 at the cut frame, then whole after a
 * refill. */
START_TEST(test_walk_frames_and_cuts)
{
	struct stream s;
	struct cmn_tfr_frame fr;
	const uint64_t base = 1000;

	build(&s, mixed_sizes, sizeof(mixed_sizes) / sizeof(mixed_sizes[0]), 0);
	for (size_t cut = 0; cut <= s.len; cut += cut < 600 || s.len - cut < 600 ? 1 : 997) {
		struct cmn_tfr_walk w = {
		    .buf = s.data, .len = cut, .base = base, .check_crc = true};
		size_t i = 0;
		int rc;
		while ((rc = cmn_tfr_walk_next(&w, &fr)) == 1) {
			ck_assert_uint_lt(i, s.n);
			ck_assert_uint_eq(fr.offset, base + s.off[i]);
			ck_assert_uint_eq(fr.len, s.rlen[i]);
			ck_assert_uint_eq(fr.need, s.rlen[i] + CMN_TFR_OVERHEAD);
			ck_assert_uint_eq(fnv1a(fr.data, (size_t)fr.len), s.hash[i]);
			ck_assert_uint_eq(fr.crc, cmn_crc32c(0, fr.data, (size_t)fr.len));
			i++;
		}
		ck_assert_int_eq(rc, 0);
		/* stopped at the cut frame (or the end), which starts at pos */
		uint64_t at = i < s.n ? s.off[i] : s.len;
		ck_assert_uint_eq(fr.offset, base + at);
		ck_assert_uint_eq(w.pos, at);
		if (cut - at < CMN_TFR_HEADER_SIZE)
			ck_assert_uint_eq(fr.need, CMN_TFR_HEADER_SIZE);
		else
			ck_assert_uint_eq(fr.need, s.rlen[i] + CMN_TFR_OVERHEAD);
		ck_assert_ptr_null(fr.data);
		/* the same answer again, and the frame after a refill */
		ck_assert_int_eq(cmn_tfr_walk_next(&w, &fr), 0);
		ck_assert_uint_eq(w.pos, at);
		w.len = s.len;
		if (i < s.n) {
			ck_assert_int_eq(cmn_tfr_walk_next(&w, &fr), 1);
			ck_assert_uint_eq(fr.offset, base + at);
			ck_assert_uint_eq(fr.len, s.rlen[i]);
		}
	}
	free(s.data);
}
END_TEST

/* Each reason a walk stops: length CRC, cap, payload CRC (skippable; not checked without
 * check_crc). */
START_TEST(test_walk_errors)
{
	static const size_t sizes[] = {40, 41, 42};
	struct stream s;
	struct cmn_tfr_frame fr;

	build(&s, sizes, 3, 0);
	/* length crc: -EILSEQ at that frame, pos stays */
	s.data[s.off[1] + 2] ^= 0x04;
	struct cmn_tfr_walk w = {.buf = s.data, .len = s.len, .base = 7, .check_crc = true};
	ck_assert_int_eq(cmn_tfr_walk_next(&w, &fr), 1);
	ck_assert_int_eq(cmn_tfr_walk_next(&w, &fr), -EILSEQ);
	ck_assert_uint_eq(fr.offset, 7 + s.off[1]);
	ck_assert_uint_eq(fr.len, 41 ^ (0x04ull << 16));
	ck_assert_uint_eq(w.pos, s.off[1]);
	s.data[s.off[1] + 2] ^= 0x04;

	/* the cap: -EMSGSIZE with the length; a cap of exactly the length passes */
	w = (struct cmn_tfr_walk){.buf = s.data, .len = s.len, .max_record = 40};
	ck_assert_int_eq(cmn_tfr_walk_next(&w, &fr), 1);
	ck_assert_int_eq(cmn_tfr_walk_next(&w, &fr), -EMSGSIZE);
	ck_assert_uint_eq(fr.offset, s.off[1]);
	ck_assert_uint_eq(fr.len, 41);
	ck_assert_uint_eq(w.pos, s.off[1]);
	w.max_record = 41;
	ck_assert_int_eq(cmn_tfr_walk_next(&w, &fr), 1);

	/* a payload bit: -EBADMSG with the frame, and the walk goes on after it */
	s.data[s.off[1] + CMN_TFR_HEADER_SIZE + 5] ^= 0x80;
	w = (struct cmn_tfr_walk){.buf = s.data, .len = s.len, .check_crc = true};
	ck_assert_int_eq(cmn_tfr_walk_next(&w, &fr), 1);
	ck_assert_int_eq(cmn_tfr_walk_next(&w, &fr), -EBADMSG);
	ck_assert_uint_eq(fr.offset, s.off[1]);
	ck_assert_uint_eq(fr.len, 41);
	ck_assert_ptr_eq(fr.data, s.data + s.off[1] + CMN_TFR_HEADER_SIZE);
	ck_assert_uint_eq(w.pos, s.off[2]);
	ck_assert_int_eq(cmn_tfr_walk_next(&w, &fr), 1);
	ck_assert_uint_eq(fr.offset, s.off[2]);
	/* without check_crc the frame is whole; fr.crc is the footer's */
	w = (struct cmn_tfr_walk){.buf = s.data, .len = s.len, .pos = s.off[1]};
	ck_assert_int_eq(cmn_tfr_walk_next(&w, &fr), 1);
	ck_assert_uint_ne(fr.crc, cmn_crc32c(0, fr.data, (size_t)fr.len));
	ck_assert_uint_eq(fr.crc, cmn_tfr_get_footer(s.data + s.off[2] - CMN_TFR_FOOTER_SIZE));
	free(s.data);
}
END_TEST

/* headers_only: frames end at their header; pos passes payloads that buf does not hold. */
START_TEST(test_walk_headers_only)
{
	static const size_t sizes[] = {100, 5000, 3, 70000, 0};
	struct stream s;
	struct cmn_tfr_frame fr;

	build(&s, sizes, 5, 0);
	/* the whole stream: every frame, no payload looked at */
	s.data[s.off[1] + CMN_TFR_HEADER_SIZE] ^= 1;
	struct cmn_tfr_walk w = {
	    .buf = s.data, .len = s.len, .check_crc = true, .headers_only = true};
	for (size_t i = 0; i < s.n; i++) {
		ck_assert_int_eq(cmn_tfr_walk_next(&w, &fr), 1);
		ck_assert_uint_eq(fr.offset, s.off[i]);
		ck_assert_uint_eq(fr.len, s.rlen[i]);
		ck_assert_ptr_null(fr.data);
	}
	ck_assert_int_eq(cmn_tfr_walk_next(&w, &fr), 0);
	ck_assert_uint_eq(fr.offset, s.len);
	/* a buffer of the first 200 bytes: frame 1's payload runs past it, frame 2 is outside */
	w = (struct cmn_tfr_walk){.buf = s.data, .len = 200, .headers_only = true};
	ck_assert_int_eq(cmn_tfr_walk_next(&w, &fr), 1);
	ck_assert_int_eq(cmn_tfr_walk_next(&w, &fr), 1);
	ck_assert_uint_eq(w.pos, s.off[2]);
	ck_assert_int_eq(cmn_tfr_walk_next(&w, &fr), 0);
	ck_assert_uint_eq(fr.offset, s.off[2]);
	ck_assert_uint_eq(fr.need, CMN_TFR_HEADER_SIZE);
	/* the caller's refill: a new window that starts at that frame */
	w.buf = s.data + s.off[2];
	w.len = 64;
	w.base = s.off[2];
	w.pos = 0;
	ck_assert_int_eq(cmn_tfr_walk_next(&w, &fr), 1);
	ck_assert_uint_eq(fr.offset, s.off[2]);
	ck_assert_uint_eq(fr.len, 3);
	ck_assert_int_eq(cmn_tfr_walk_next(&w, &fr), 1);
	ck_assert_uint_eq(fr.len, 70000);
	ck_assert_uint_eq(w.base + w.pos, s.off[4]);
	free(s.data);
}
END_TEST

/* ---- GZIP ---- */

START_TEST(test_gzip_round_trip)
{
	struct stream s;
	struct tfr_result *r = malloc(sizeof(*r));
	struct cmn_tfr_opts o = {.name = "z.gz"};

	ck_assert_ptr_nonnull(r);
	build(&s, mixed_sizes, N_MIXED, 0);
	for (int members = 1; members <= 3; members++) {
		size_t zlen;
		uint8_t *z = gzip_of(s.data, s.len, members, &zlen);
		for (int comp = 0; comp < 2; comp++) {
			o.compression = comp ? CMN_TFR_GZIP : CMN_TFR_AUTO;
			o.read_size = 0;
			collect_buf(z, zlen, &o, r);
			assert_matches(r, &s, "gzip buffer reader");
			collect_fd(z, zlen, &o, r);
			assert_matches(r, &s, "gzip fd reader");
			o.read_size = 100;
			collect_fd(z, zlen, &o, r);
			assert_matches(r, &s, "gzip fd reader, small reads");
			collect_push(z, zlen, &o, 0, r);
			assert_matches(r, &s, "gzip push, random chunks");
		}
		o.compression = CMN_TFR_AUTO;
		collect_push(z, zlen, &o, 1, r);
		assert_matches(r, &s, "gzip push, 1-byte chunks");
		free(z);
	}
	free(s.data);
	free(r);
}
END_TEST

START_TEST(test_gzip_errors)
{
	static const size_t sizes[] = {100, 2000, 50};
	struct stream s;
	struct tfr_result r;
	struct cmn_tfr_opts o = {.name = "bad.gz"};
	size_t zlen;
	uint8_t *z;

	build(&s, sizes, 3, 0);
	z = gzip_of(s.data, s.len, 2, &zlen);
	/* truncated compressed file: at several cuts, always -EPROTO */
	for (size_t cut = zlen - 1; cut > 20; cut -= zlen / 7) {
		for (int fe = 0; fe < 3; fe++) {
			if (fe == 0)
				collect_buf(z, cut, &o, &r);
			else if (fe == 1)
				collect_fd(z, cut, &o, &r);
			else
				collect_push(z, cut, &o, 0, &r);
			ck_assert_msg(r.end_rc == -EPROTO, "cut %zu of %zu, fe %d: %d (%s)", cut,
				      zlen, fe, r.end_rc, r.msg);
			ck_assert_ptr_nonnull(strstr(r.msg, "truncated"));
		}
	}
	/* the last member's CRC32 trailer is wrong: -EIO after the records */
	z[zlen - 6] ^= 0xff;
	for (int fe = 0; fe < 3; fe++) {
		if (fe == 0)
			collect_buf(z, zlen, &o, &r);
		else if (fe == 1)
			collect_fd(z, zlen, &o, &r);
		else
			collect_push(z, zlen, &o, 1, &r);
		ck_assert_int_eq(r.end_rc, -EIO);
		ck_assert_msg(strstr(r.msg, "bad.gz: corrupt gzip data at compressed offset"),
			      "fe %d: %s", fe, r.msg);
	}
	z[zlen - 6] ^= 0xff;
	/* trailing garbage after the last member */
	{
		uint8_t *g = malloc(zlen + 4);
		memcpy(g, z, zlen);
		memcpy(g + zlen, "junk", 4);
		collect_buf(g, zlen + 4, &o, &r);
		ck_assert_int_eq(r.end_rc, -EIO);
		ck_assert_uint_eq(r.n, 3);
		collect_push(g, zlen + 4, &o, 0, &r);
		ck_assert_int_eq(r.end_rc, -EIO);
		free(g);
	}
	/* forcing GZIP on a plain stream */
	o.compression = CMN_TFR_GZIP;
	collect_buf(s.data, s.len, &o, &r);
	ck_assert_int_eq(r.end_rc, -EIO);
	free(z);
	free(s.data);
}
END_TEST

/*
 * Random damage (bit flips, cuts, garbage) of random streams, plain and GZIP:
 * the buffer reader, the fd reader and the push decoder must return the same
 * records and end the same way, since they share one framing step.
 */
static uint64_t damage_seed = 0x243f6a8885a308d3ull;

static uint64_t next_rand(void)
{
	damage_seed ^= damage_seed << 13;
	damage_seed ^= damage_seed >> 7;
	damage_seed ^= damage_seed << 17;
	return damage_seed;
}

START_TEST(test_random_damage_front_ends_agree)
{
	struct tfr_result *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));

	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(b);
	for (int it = 0; it < 400; it++) {
		size_t sizes[24], n, len;
		struct stream s;
		struct cmn_tfr_opts o = {.name = "r", .max_record = 3000, .read_size = 257};
		uint8_t *data;
		bool gz = it % 5 == 4;

		n = 1 + next_rand() % 24;
		for (size_t i = 0; i < n; i++)
			sizes[i] = next_rand() % 4 == 0 ? next_rand() % 2900 : next_rand() % 200;
		build(&s, sizes, n, 0);
		data = s.data;
		len = s.len;
		if (gz) {
			data = gzip_of(s.data, s.len, 1 + (int)(next_rand() % 2), &len);
			free(s.data);
		}
		switch (next_rand() % 4) {
		case 0: /* flip 1-3 bits anywhere */
			for (int k = (int)(next_rand() % 3); k >= 0; k--) {
				size_t at = next_rand() % len;
				data[at] ^= (uint8_t)(1u << (next_rand() % 8));
			}
			break;
		case 1: /* cut anywhere */
			len = next_rand() % (len + 1);
			break;
		case 2: /* overwrite a run with garbage */
			for (size_t k = 0, at = next_rand() % len; k < 20 && at + k < len; k++)
				data[at + k] = (uint8_t)next_rand();
			break;
		default: /* undamaged */
			break;
		}
		collect_buf(data, len, &o, a);
		collect_fd(data, len, &o, b);
		assert_same(a, b, "buffer vs fd reader");
		collect_push(data, len, &o, 0, b);
		assert_same(a, b, "buffer reader vs push decoder");
		if (it % 10 == 0) {
			collect_push(data, len, &o, 1, b);
			assert_same(a, b, "buffer reader vs push decoder, 1-byte chunks");
		}
		free(data);
	}
	free(a);
	free(b);
}
END_TEST

/* ---- push decoder specifics ---- */

struct stop_ctx {
	int seen;
	int stop_at;
};

static int stop_cb(const struct cmn_tfr_record *rec, void *ctx)
{
	struct stop_ctx *c = ctx;
	(void)rec;
	if (c->seen == c->stop_at)
		return -ECANCELED;
	c->seen++;
	return 0;
}

START_TEST(test_push_stop_and_reset)
{
	static const size_t sizes[] = {10, 20, 30, 40};
	struct stream s;
	struct stop_ctx c = {0, 2};
	struct cmn_tfr_push *p;
	char err[128];

	build(&s, sizes, 4, 0);
	ck_assert_int_eq(cmn_tfr_push_new(&p, NULL, stop_cb, &c, err, sizeof(err)), 0);
	ck_assert_int_eq(cmn_tfr_push_feed(p, s.data, s.len), -ECANCELED);
	ck_assert_int_eq(c.seen, 2);
	ck_assert_uint_eq(cmn_tfr_push_offset(p), s.off[2]); /* end of the last accepted record */
	ck_assert_int_eq(cmn_tfr_push_feed(p, s.data, 1), -ECANCELED); /* sticky */

	/* reset: a retried transfer from offset 0 */
	cmn_tfr_push_reset(p);
	c.seen = 0;
	c.stop_at = -1;
	ck_assert_int_eq(cmn_tfr_push_feed(p, s.data, s.len / 2), 0);
	cmn_tfr_push_reset(p);
	ck_assert_uint_eq(cmn_tfr_push_offset(p), 0);
	c.seen = 0;
	ck_assert_int_eq(cmn_tfr_push_feed(p, s.data, s.len), 0);
	ck_assert_int_eq(cmn_tfr_push_finish(p), 0);
	ck_assert_int_eq(c.seen, 4);
	ck_assert_uint_eq(cmn_tfr_push_records(p), 4);
	ck_assert_uint_eq(cmn_tfr_push_offset(p), s.len);
	cmn_tfr_push_free(p);
	free(s.data);
}
END_TEST

/*
 * cmn_tfr_push_take: a record gathered across chunks is handed over in the
 * decoder's own buffer (no copy), stays valid after later feeds, and the
 * spare becomes the next gathering buffer; a record inside one chunk is
 * -ENOENT and changes nothing.
 */
struct take_ctx {
	struct cmn_tfr_push *p;
	const struct stream *s;
	size_t seen;
	size_t taken, in_chunk;
	void *bufs[RES_MAX];
	const uint8_t *data[RES_MAX];
};

static int take_cb(const struct cmn_tfr_record *rec, void *ctx)
{
	struct take_ctx *c = ctx;
	size_t i = c->seen++;
	void *buf = NULL;
	size_t cap = 0;
	void *spare = malloc(64);

	ck_assert_ptr_nonnull(spare);
	ck_assert_uint_eq(rec->len, c->s->rlen[i]);
	int rc = cmn_tfr_push_take(c->p, spare, 64, &buf, &cap);
	if (rc == -ENOENT) {
		free(spare); /* still the caller's */
		ck_assert_ptr_null(buf);
		c->in_chunk++;
		ck_assert_uint_eq(fnv1a(rec->data, rec->len), c->s->hash[i]);
		return 0;
	}
	ck_assert_int_eq(rc, 0);
	ck_assert_ptr_nonnull(buf);
	ck_assert((const uint8_t *)rec->data >= (const uint8_t *)buf &&
		  (const uint8_t *)rec->data + rec->len <= (const uint8_t *)buf + cap);
	c->bufs[c->taken] = buf;
	c->data[i] = rec->data;
	c->taken++;
	return 0;
}

START_TEST(test_push_take)
{
	static const size_t sizes[] = {10, 5000, 20, 3000, 7, 40000, 3};
	const size_t n = sizeof(sizes) / sizeof(sizes[0]);
	struct stream s;
	struct take_ctx c = {0};
	char err[128];

	build(&s, sizes, n, 0);
	c.s = &s;
	ck_assert_int_eq(cmn_tfr_push_new(&c.p, NULL, take_cb, &c, err, sizeof(err)), 0);
	for (size_t off = 0; off < s.len; off += 1000) {
		size_t k = s.len - off < 1000 ? s.len - off : 1000;
		ck_assert_int_eq(cmn_tfr_push_feed(c.p, s.data + off, k), 0);
	}
	ck_assert_int_eq(cmn_tfr_push_finish(c.p), 0);
	ck_assert_uint_eq(c.seen, n);
	ck_assert_uint_ge(c.taken, 3);	  /* 5000, 3000 and 40000 span chunks */
	ck_assert_uint_ge(c.in_chunk, 1); /* the small ones fit inside one */
	/* taken records are intact after every later feed */
	for (size_t i = 0; i < n; i++)
		if (c.data[i])
			ck_assert_uint_eq(fnv1a(c.data[i], s.rlen[i]), s.hash[i]);
	for (size_t i = 0; i < c.taken; i++)
		free(c.bufs[i]);
	cmn_tfr_push_free(c.p);
	free(s.data);
}
END_TEST

/* The push decoder buffers at most one partial record. */
START_TEST(test_push_cap)
{
	struct cmn_tfr_push *p;
	struct cmn_tfr_opts o = {.max_record = 1000};
	uint8_t hdr[CMN_TFR_HEADER_SIZE];
	char err[128];

	ck_assert_int_eq(cmn_tfr_push_new(&p, &o, NULL, NULL, err, sizeof(err)), 0);
	cmn_tfr_put_header(hdr, 1001);
	ck_assert_int_eq(cmn_tfr_push_feed(p, hdr, 5), 0);
	ck_assert_int_eq(cmn_tfr_push_feed(p, hdr + 5, 7), -EMSGSIZE);
	cmn_tfr_push_free(p);
}
END_TEST

/* ---- writer ---- */

START_TEST(test_writer_errors)
{
	struct cmn_tfr_writer *w;
	char err[128];
	int fds[2];

	/* a closed pipe: the write fails and the error comes back */
	ck_assert_int_eq(pipe(fds), 0);
	close(fds[0]);
	signal(SIGPIPE, SIG_IGN);
	ck_assert_int_eq(cmn_tfr_writer_open(&w, fds[1], 64, err, sizeof(err)), 0);
	ck_assert_int_eq(cmn_tfr_writer_append(w, "0123456789", 10, 0, false), 0);
	ck_assert_int_eq(cmn_tfr_writer_flush(w), -EPIPE);
	cmn_tfr_writer_free(w);
	close(fds[1]);
}
END_TEST

/* ---- write-behind ---- */

/* Blocks lent to a writer: each remembers how often it came back. */
struct lent {
	uint8_t *block;
	size_t cap;
	int taken;    /* 1 when append_lent took it */
	int released; /* times the release callback gave it back */
};

struct lent_log {
	struct lent v[128];
	size_t n;
	pthread_mutex_t mu;
};

static void on_release(void *ctx, void *block, size_t cap)
{
	struct lent_log *log = ctx;
	pthread_mutex_lock(&log->mu);
	for (size_t i = 0; i < log->n; i++)
		if (log->v[i].block == block) {
			ck_assert_uint_eq(cap, log->v[i].cap);
			log->v[i].released++;
		}
	pthread_mutex_unlock(&log->mu);
}

/* Record i's size: small ones, ones past the 32 KiB lending floor, ones past the buffer. */
static size_t behind_size(size_t i)
{
	static const size_t sizes[] = {10, 40000, 33, 70000, 32768, 5000, 200000, 1, 0, 65536};
	return sizes[i % 10] + (i / 10) * 3;
}

/*
 * Appends n records to w, lent when i % 3 != 2 (blocks logged), until one
 * fails.  Returns 0 or that error.
 */
static int append_all(struct cmn_tfr_writer *w, struct lent_log *log, size_t n)
{
	ck_assert_uint_le(n, sizeof(log->v) / sizeof(log->v[0]));
	for (size_t i = 0; i < n; i++) {
		size_t len = behind_size(i);
		uint8_t *p = malloc(len + 1);
		ck_assert_ptr_nonnull(p);
		for (size_t j = 0; j < len; j++)
			p[j] = pattern(i, j);
		pthread_mutex_lock(&log->mu);
		log->v[log->n++] = (struct lent){p, len + 1, 0, 0};
		pthread_mutex_unlock(&log->mu);
		uint32_t crc = cmn_crc32c(0, p, len);
		int rc = i % 3 == 2 ? cmn_tfr_writer_append(w, p, len, crc, true)
				    : cmn_tfr_writer_append_lent(w, p, len, crc, p, len + 1);
		if (rc < 0)
			return rc;
		ck_assert_int_le(rc, 1);
		if (rc == 1 && len < 32768)
			ck_abort_msg("a record of %zu bytes was taken (under the 32 KiB floor)",
				     len);
		log->v[log->n - 1].taken = rc;
	}
	return 0;
}

/* Every block taken came back exactly once, no other one came back; frees them all. */
static size_t check_released(struct lent_log *log)
{
	size_t taken = 0;
	for (size_t i = 0; i < log->n; i++) {
		ck_assert_int_eq(log->v[i].released, log->v[i].taken);
		taken += (size_t)log->v[i].taken;
		free(log->v[i].block);
	}
	log->n = 0;
	return taken;
}

static uint8_t *file_bytes(int fd, size_t *len)
{
	struct stat st;
	ck_assert_int_eq(fstat(fd, &st), 0);
	uint8_t *p = malloc((size_t)st.st_size + 1);
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(pread(fd, p, (size_t)st.st_size, 0), st.st_size);
	*len = (size_t)st.st_size;
	return p;
}

START_TEST(test_writer_behind)
{
	enum { N = 120 };
	static struct lent_log log;
	pthread_mutex_init(&log.mu, NULL);
	char err[128];
	struct cmn_tfr_writer *a, *b;
	int fa = memfd_create("tfr-now", MFD_CLOEXEC), fb = memfd_create("tfr-behind", MFD_CLOEXEC);
	ck_assert_int_ge(fa, 0);
	ck_assert_int_ge(fb, 0);

	/* the same records written at once, then behind (a 4 KiB buffer: many hand-offs) */
	ck_assert_int_eq(cmn_tfr_writer_open(&a, fa, 4096, err, sizeof(err)), 0);
	ck_assert_int_eq(append_all(a, &log, N), 0);
	ck_assert_int_eq(cmn_tfr_writer_flush(a), 0);
	ck_assert_uint_eq(check_released(&log), 0); /* without write-behind nothing is taken */

	ck_assert_int_eq(cmn_tfr_writer_open(&b, fb, 4096, err, sizeof(err)), 0);
	ck_assert_int_eq(cmn_tfr_writer_behind(b, on_release, &log), 0);
	ck_assert_int_eq(append_all(b, &log, N), 0);
	ck_assert_uint_eq(cmn_tfr_writer_bytes(b), cmn_tfr_writer_bytes(a));
	ck_assert_int_eq(cmn_tfr_writer_flush(b), 0);
	/* flush waited for the thread: every block taken is back, once */
	ck_assert_uint_ge(check_released(&log), N / 4);

	size_t la, lb;
	uint8_t *da = file_bytes(fa, &la), *db = file_bytes(fb, &lb);
	ck_assert_uint_eq(la, cmn_tfr_writer_bytes(a));
	ck_assert_uint_eq(lb, la);
	ck_assert_int_eq(memcmp(da, db, la), 0);

	/* appends after a flush go on at the end */
	ck_assert_int_eq(cmn_tfr_writer_append(b, "tail", 4, 0, false), 0);
	ck_assert_int_eq(cmn_tfr_writer_flush(b), 0);
	free(db);
	db = file_bytes(fb, &lb);
	ck_assert_uint_eq(lb, la + 4 + CMN_TFR_OVERHEAD);
	ck_assert_int_eq(memcmp(da, db, la), 0);
	cmn_tfr_writer_free(a);
	cmn_tfr_writer_free(b);
	free(da);
	free(db);
	close(fa);
	close(fb);
}
END_TEST

START_TEST(test_writer_behind_errors)
{
	static struct lent_log log;
	pthread_mutex_init(&log.mu, NULL);
	char err[128];
	struct cmn_tfr_writer *w;
	int fds[2];

	/* a closed pipe: a write of the thread fails; a later append or the flush says so */
	ck_assert_int_eq(pipe(fds), 0);
	close(fds[0]);
	signal(SIGPIPE, SIG_IGN);
	ck_assert_int_eq(cmn_tfr_writer_open(&w, fds[1], 4096, err, sizeof(err)), 0);
	ck_assert_int_eq(cmn_tfr_writer_behind(w, on_release, &log), 0);
	int rc = append_all(w, &log, 60);
	if (rc == 0)
		rc = cmn_tfr_writer_flush(w);
	ck_assert_int_eq(rc, -EPIPE);
	ck_assert_int_eq(cmn_tfr_writer_flush(w), -EPIPE); /* latched */
	cmn_tfr_writer_free(w);
	/* blocks taken came back once (written or not); the one refused stayed ours */
	check_released(&log);
	close(fds[1]);

	/* freed without a flush: what was queued is released, not lost */
	int fd = memfd_create("tfr-free", MFD_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(cmn_tfr_writer_open(&w, fd, 4096, err, sizeof(err)), 0);
	ck_assert_int_eq(cmn_tfr_writer_behind(w, on_release, &log), 0);
	ck_assert_int_eq(append_all(w, &log, 90), 0);
	cmn_tfr_writer_free(w);
	ck_assert_uint_ge(check_released(&log), 90 / 4);
	close(fd);
}
END_TEST

static Suite *tfr_suite(void)
{
	Suite *s = suite_create("common");
	TCase *tc;

#define ADD(name, fn)                                                                              \
	tc = tcase_create(name);                                                                   \
	tcase_add_test(tc, fn);                                                                    \
	suite_add_tcase(s, tc)
	ADD("tfrecord_round_trip_all_front_ends", test_round_trip);
	ADD("tfrecord_buffer_reader_zero_copy", test_zero_copy);
	ADD("tfrecord_empty_stream", test_empty_stream);
	ADD("tfrecord_truncated_at_every_byte", test_truncated_everywhere);
	ADD("tfrecord_oversized_length", test_oversized);
	ADD("tfrecord_length_crc_flip", test_length_crc_flip);
	ADD("tfrecord_payload_crc_flip_skipped", test_payload_crc_flip);
	ADD("tfrecord_walk_frames_and_cuts", test_walk_frames_and_cuts);
	ADD("tfrecord_walk_errors", test_walk_errors);
	ADD("tfrecord_walk_headers_only", test_walk_headers_only);
	ADD("tfrecord_gzip_round_trip_multi_member", test_gzip_round_trip);
	ADD("tfrecord_gzip_errors", test_gzip_errors);
	ADD("tfrecord_random_damage_front_ends_agree", test_random_damage_front_ends_agree);
	ADD("tfrecord_push_stop_and_reset", test_push_stop_and_reset);
	ADD("tfrecord_push_cap", test_push_cap);
	ADD("tfrecord_push_take_hands_over_gathered_records", test_push_take);
	ADD("tfrecord_writer_errors", test_writer_errors);
	ADD("tfrecord_writer_behind_same_bytes_blocks_back_once", test_writer_behind);
	ADD("tfrecord_writer_behind_errors_and_free", test_writer_behind_errors);
#undef ADD
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(tfr_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
