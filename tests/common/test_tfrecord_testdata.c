/*
 * test_tfrecord_testdata.c - the TFRecord readers against real files.
 *
 * The files of $RC_TESTDATA (../shared/testdata) were written by
 * TensorFlow's own writers in public projects; their README gives the record
 * counts checked here.  Fails (one line) when the folder is missing.
 */
#include "tests/common/tfr_util.h"

#include "common/crc32c.h"

#include <fcntl.h>
#include <inttypes.h>
#include <sys/stat.h>
#include <zlib.h>

static const char *testdata;

static uint8_t *slurp(const char *name, size_t *len)
{
	char path[1024];
	struct stat st;
	uint8_t *buf;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", testdata, name);
	fd = open(path, O_RDONLY);
	ck_assert_msg(fd >= 0, "%s: cannot open", path);
	ck_assert_int_eq(fstat(fd, &st), 0);
	buf = malloc((size_t)st.st_size + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(read(fd, buf, (size_t)st.st_size), st.st_size);
	close(fd);
	*len = (size_t)st.st_size;
	return buf;
}

/* All front ends agree on one file and find `want` records. */
static void check_file(const char *name, size_t want, struct tfr_result *out)
{
	struct tfr_result *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));
	struct cmn_tfr_opts o = {.name = name};
	size_t len;
	uint8_t *data = slurp(name, &len);

	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(b);
	collect_fd(data, len, &o, a);
	ck_assert_msg(a->n == want && a->end_rc == 0,
		      "%s: %zu records (end %d: %s), README says %zu", name, a->n, a->end_rc,
		      a->msg, want);
	ck_assert_uint_eq(a->bad, 0);
	collect_buf(data, len, &o, b);
	assert_same(a, b, "buffer reader vs fd reader");
	collect_push(data, len, &o, 1, b);
	assert_same(a, b, "push 1-byte vs fd reader");
	collect_push(data, len, &o, 0, b);
	assert_same(a, b, "push random chunks vs fd reader");
	o.read_size = 64;
	collect_fd(data, len, &o, b);
	assert_same(a, b, "fd reader with 64-byte reads vs default");
	if (out)
		*out = *a;
	free(data);
	free(a);
	free(b);
}

START_TEST(test_example)
{
	check_file("example__pytorch_data__example.tfrecord", 4, NULL);
}
END_TEST

START_TEST(test_seqex)
{
	check_file("seqex__pytorch_data__sequence_example.tfrecord", 4, NULL);
}
END_TEST

START_TEST(test_raw_magenta)
{
	static const char *const want[] = {"hello world", "12345", "success"};
	struct tfr_result *r = malloc(sizeof(*r));
	uint64_t off = 0;

	check_file("raw__magenta__tfrecord_iterator_test.tfrecord", 3, r);
	for (int i = 0; i < 3; i++) {
		ck_assert_uint_eq(r->len[i], strlen(want[i]));
		ck_assert_uint_eq(r->hash[i], fnv1a((const uint8_t *)want[i], strlen(want[i])));
		ck_assert_uint_eq(r->off[i], off);
		off += strlen(want[i]) + CMN_TFR_OVERHEAD;
	}
	free(r);
}
END_TEST

START_TEST(test_gzip_penguin)
{
	const char *name = "example_gzip__tfx__penguin_Split-eval_data_tfrecord-00000-of-00001.gz";
	struct tfr_result *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));
	size_t zlen, cap = 1 << 20, plain_len;
	uint8_t *z, *plain = malloc(cap);
	z_stream s;
	struct cmn_tfr_opts o = {.name = name, .compression = CMN_TFR_NONE};

	check_file(name, 100, a);
	/* an independent inflate of the whole file, read as plain TFRecord, gives the same */
	z = slurp(name, &zlen);
	memset(&s, 0, sizeof(s));
	ck_assert_int_eq(inflateInit2(&s, 16 + MAX_WBITS), Z_OK);
	s.next_in = z;
	s.avail_in = (uInt)zlen;
	s.next_out = plain;
	s.avail_out = (uInt)cap;
	ck_assert_int_eq(inflate(&s, Z_FINISH), Z_STREAM_END);
	plain_len = cap - s.avail_out;
	inflateEnd(&s);
	collect_buf(plain, plain_len, &o, b);
	assert_same(a, b, "gzip reader vs plain reader of inflated bytes");
	ck_assert_uint_eq(b->off[99] + b->len[99] + CMN_TFR_OVERHEAD, plain_len);
	free(z);
	free(plain);
	free(a);
	free(b);
}
END_TEST

/*
 * The bytes /usr/bin/python3's zlib.compress makes of testdata file `name`,
 * as two zlib streams when `halves` (split at a record boundary `cut`), or
 * NULL when no python3 can be run.  zlib.compress writes a zlib-wrapped
 * deflate stream (RFC 1950 header, Adler-32 trailer): what TensorFlow's ZLIB
 * writer (ZlibOutputBuffer, zlib's default window bits) writes.
 */
static uint8_t *python_zlib(const char *name, size_t cut, size_t *len)
{
	const char *py = getenv("PYTHON") ? getenv("PYTHON") : "/usr/bin/python3";
	char cmd[2048];
	size_t cap = 1 << 20, n = 0, got;
	uint8_t *out = malloc(cap);
	FILE *f;

	ck_assert_ptr_nonnull(out);
	if (access(py, X_OK) != 0) {
		free(out);
		return NULL;
	}
	snprintf(
	    cmd, sizeof(cmd),
	    "%s -c 'import sys, zlib; d = open(sys.argv[1], \"rb\").read(); c = int(sys.argv[2]); "
	    "sys.stdout.buffer.write(zlib.compress(d[:c] if c else d) + "
	    "(zlib.compress(d[c:]) if c else b\"\"))' '%s/%s' %zu",
	    py, testdata, name, cut);
	f = popen(cmd, "r");
	ck_assert_ptr_nonnull(f);
	while ((got = fread(out + n, 1, cap - n, f)) > 0)
		n += got;
	ck_assert_int_eq(pclose(f), 0);
	ck_assert_uint_gt(n, 2);
	*len = n;
	return out;
}

START_TEST(test_zlib_python)
{
	const char *name = "example__pytorch_data__example.tfrecord";
	struct tfr_result *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));
	struct cmn_tfr_opts o = {.name = "example.zz"};
	size_t plen, zlen;
	uint8_t *plain = slurp(name, &plen), *z;

	check_file(name, 4, a);
	z = python_zlib(name, 0, &zlen);
	ck_assert_msg(z, "no /usr/bin/python3 to write the ZLIB file (a Debian package the "
			 "suite needs: scripts/deps.sh)");
	ck_assert_int_eq(cmn_tfr_detect(z, zlen), CMN_TFR_ZLIB);
	ck_assert_int_eq(cmn_tfr_detect(plain, plen), CMN_TFR_NONE);
	/* auto: every front end reads the same records as from the plain file */
	collect_fd(z, zlen, &o, b);
	assert_same(a, b, "zlib fd reader (auto) vs plain file");
	collect_buf(z, zlen, &o, b);
	assert_same(a, b, "zlib buffer reader (auto) vs plain file");
	collect_push(z, zlen, &o, 1, b);
	assert_same(a, b, "zlib push 1-byte (auto) vs plain file");
	collect_push(z, zlen, &o, 0, b);
	assert_same(a, b, "zlib push random chunks (auto) vs plain file");
	o.compression = CMN_TFR_ZLIB;
	o.read_size = 64;
	collect_fd(z, zlen, &o, b);
	assert_same(a, b, "zlib fd reader (zlib, 64-byte reads) vs plain file");
	/* forced gzip on zlib data: refused as corrupt gzip data */
	o.compression = CMN_TFR_GZIP;
	collect_buf(z, zlen, &o, b);
	ck_assert_int_eq(b->end_rc, -EIO);
	ck_assert_msg(strstr(b->msg, "corrupt gzip data"), "%s", b->msg);
	/* truncated: the stream ends inside the zlib stream */
	o.compression = CMN_TFR_AUTO;
	collect_buf(z, zlen - 3, &o, b);
	ck_assert_int_eq(b->end_rc, -EPROTO);
	ck_assert_msg(strstr(b->msg, "zlib stream ends inside"), "%s", b->msg);
	collect_push(z, zlen - 3, &o, 0, b);
	ck_assert_int_eq(b->end_rc, -EPROTO);
	/* a flipped byte in the deflate data: corrupt zlib data (or a CRC failure) */
	z[zlen / 2] ^= 0x55;
	collect_buf(z, zlen, &o, b);
	ck_assert_msg(b->end_rc == -EIO || b->bad > 0 || b->end_rc == -EILSEQ,
		      "flipped byte not noticed: end %d, %zu records", b->end_rc, b->n);
	free(z);
	/* two zlib streams one after the other (cut after record 2) read as one */
	z = python_zlib(name, (size_t)(a->off[2]), &zlen);
	collect_fd(z, zlen, &o, b);
	assert_same(a, b, "two zlib streams vs plain file");
	free(z);
	free(plain);
	free(a);
	free(b);
}
END_TEST

/*
 * Plain TFRecords whose first bytes look like gzip or zlib headers: a
 * record of 559903 bytes starts 1f 8b 08 00, one of 40056 bytes 78 9c.
 * auto must read them as plain (their header's length CRC holds).
 */
START_TEST(test_detect_plain_lookalikes)
{
	static const uint64_t lens[] = {0x00088b1f, 0x9c78};
	for (int i = 0; i < 2; i++) {
		size_t n = (size_t)lens[i] + CMN_TFR_OVERHEAD;
		uint8_t *d = calloc(1, n);
		struct tfr_result *r = malloc(sizeof(*r));
		struct cmn_tfr_opts o = {.name = "lookalike"};

		ck_assert_ptr_nonnull(d);
		ck_assert_ptr_nonnull(r);
		memset(d + CMN_TFR_HEADER_SIZE, 'x', (size_t)lens[i]);
		cmn_tfr_put_header(d, lens[i]);
		cmn_tfr_put_footer(d + n - CMN_TFR_FOOTER_SIZE,
				   cmn_crc32c(0, d + CMN_TFR_HEADER_SIZE, (size_t)lens[i]));
		ck_assert_int_eq(cmn_tfr_detect(d, n), CMN_TFR_NONE);
		collect_fd(d, n, &o, r);
		ck_assert_msg(r->n == 1 && r->end_rc == 0, "length %" PRIu64 ": %zu records, %s",
			      lens[i], r->n, r->msg);
		collect_push(d, n, &o, 0, r);
		ck_assert_msg(r->n == 1 && r->end_rc == 0, "push, length %" PRIu64 ": %s", lens[i],
			      r->msg);
		free(r);
		free(d);
	}
	/* short and other heads */
	ck_assert_int_eq(cmn_tfr_detect("", 0), CMN_TFR_NONE);
	ck_assert_int_eq(cmn_tfr_detect("\x1f\x8b\x08", 3), CMN_TFR_GZIP);
	ck_assert_int_eq(cmn_tfr_detect("\x1f\x8b", 2), CMN_TFR_NONE);
	ck_assert_int_eq(cmn_tfr_detect("\x78\x9c", 2), CMN_TFR_ZLIB);
	ck_assert_int_eq(cmn_tfr_detect("\x78\x01", 2), CMN_TFR_ZLIB);
	ck_assert_int_eq(cmn_tfr_detect("\x78\xda", 2), CMN_TFR_ZLIB);
	ck_assert_int_eq(cmn_tfr_detect("\x78\x9d", 2), CMN_TFR_NONE); /* check bits wrong */
	ck_assert_int_eq(cmn_tfr_detect("\x78\xbb", 2), CMN_TFR_NONE); /* preset dictionary */
	ck_assert_str_eq(cmn_tfr_compression_name(CMN_TFR_ZLIB), "zlib");
	/* not TFRecord, not compressed: one message saying so, at offset 0 */
	{
		static const char junk[] = "this is not a TFRecord file at all\n";
		struct tfr_result *r = malloc(sizeof(*r));
		struct cmn_tfr_opts o = {.name = "junk.txt"};
		ck_assert_int_eq(cmn_tfr_detect(junk, sizeof(junk) - 1), CMN_TFR_NONE);
		collect_fd(junk, sizeof(junk) - 1, &o, r);
		ck_assert_int_eq(r->end_rc, -EILSEQ);
		ck_assert_msg(strstr(r->msg, "junk.txt: offset 0: no TFRecord header") &&
				  strstr(r->msg, "not a TFRecord file"),
			      "%s", r->msg);
		collect_push(junk, sizeof(junk) - 1, &o, 0, r);
		ck_assert_int_eq(r->end_rc, -EILSEQ);
		free(r);
	}
}
END_TEST

static Suite *testdata_suite(void)
{
	Suite *s = suite_create("common");
	TCase *tc;

#define ADD(name, fn)                                                                              \
	tc = tcase_create(name);                                                                   \
	tcase_add_test(tc, fn);                                                                    \
	suite_add_tcase(s, tc)
	ADD("tfrecord_real_example_pytorch", test_example);
	ADD("tfrecord_real_seqex_pytorch", test_seqex);
	ADD("tfrecord_real_raw_magenta", test_raw_magenta);
	ADD("tfrecord_real_gzip_tfx_penguin", test_gzip_penguin);
	ADD("tfrecord_zlib_python_over_real_example", test_zlib_python);
	ADD("tfrecord_auto_plain_lookalikes", test_detect_plain_lookalikes);
#undef ADD
	return s;
}

int main(void)
{
	struct stat st;
	SRunner *sr;
	int failed;

	testdata = getenv("RC_TESTDATA");
	if (!testdata || stat(testdata, &st) != 0 || !S_ISDIR(st.st_mode)) {
		printf("FAIL: RC_TESTDATA (%s) is not a directory of real TFRecord files "
		       "(tests/data/tensorflow holds them)\n",
		       testdata ? testdata : "unset");
		return 1;
	}
	sr = srunner_create(testdata_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
