/*
 * test_tfrecord_testdata.c - the TFRecord readers against real files.
 *
 * The files of $RC_TESTDATA (../shared/testdata) were written by
 * TensorFlow's own writers in public projects; their README gives the record
 * counts checked here.  Exits 77 (skip) when the folder is missing.
 */
#include "tests/common/tfr_util.h"

#include <fcntl.h>
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
		printf("skip: RC_TESTDATA (%s) is not a directory of real TFRecord files\n",
		       testdata ? testdata : "unset");
		return 77;
	}
	sr = srunner_create(testdata_suite());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
