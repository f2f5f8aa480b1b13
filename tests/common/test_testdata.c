/*
 * test_testdata.c - the real TFRecord files of ../shared/testdata (written by
 * TensorFlow in public projects) decode to the values their README documents.
 * Framing is read with common/tfrecord.h (the .gz file through its GZIP
 * path); records are decoded with cmn_ex_decode() and walked with the
 * iterator.  Exits 77 when $RC_TESTDATA is missing.
 */
#include "common/example.h"
#include "common/tfrecord.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *testdata;

/* Calls fn on each record of a testdata file; returns the record count. */
typedef void (*record_fn)(const struct cmn_tfr_record *rec, size_t index, void *ctx);

static size_t each_record(const char *name, record_fn fn, void *ctx)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", testdata, name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
	struct cmn_tfr_opts o = {.compression = CMN_TFR_AUTO, .name = name};
	struct cmn_tfr_reader *r = NULL;
	char err[256];
	ck_assert_msg(cmn_tfr_reader_open_fd(&r, fd, &o, err, sizeof(err)) == 0, "%s", err);
	struct cmn_tfr_record rec;
	size_t n = 0;
	int rc;
	while ((rc = cmn_tfr_next(r, &rec)) == 1)
		fn(&rec, n++, ctx);
	ck_assert_msg(rc == 0, "%s: %d %s", name, rc, cmn_tfr_reader_error(r));
	cmn_tfr_reader_free(r);
	close(fd);
	return n;
}

/* ---- pytorch/data example.tfrecord ------------------------------------- */

struct pt_ctx {
	struct cmn_schema *s;
	char first_key[4][16]; /* name of the first map entry of each record */
};

static void *bytes_reserve(void *ctx, size_t feature, size_t n, size_t items)
{
	static char buf[64];
	ck_assert_uint_eq(feature, 2);
	ck_assert_uint_eq(items, 1);
	ck_assert_uint_lt(n, sizeof(buf));
	memset(buf, 0, sizeof(buf));
	*(size_t *)ctx = n;
	return buf;
}

static void pt_record(const struct cmn_tfr_record *rec, size_t i, void *vctx)
{
	struct pt_ctx *c = vctx;
	int64_t xi[10];
	float xf[10];
	size_t nbytes = 0;
	void *fixed[3] = {xi, xf, NULL};
	struct cmn_ex_sink sink = {fixed, bytes_reserve, &nbytes};
	char err[256];
	int rc = cmn_ex_decode(c->s, rec->data, rec->len, &sink, err, sizeof(err));
	ck_assert_msg(rc == 0, "record %zu: %s", i, err);
	for (int j = 0; j < 10; j++) {
		ck_assert_int_eq(xi[j], 10 * (10 * (int64_t)i + j));
		ck_assert_float_eq(xf[j], (float)(10 * i + (size_t)j));
	}
	ck_assert_uint_eq(nbytes, 8);
	struct cmn_ex_iter it;
	struct cmn_ex_feature f;
	cmn_ex_iter_init(&it, rec->data, rec->len);
	ck_assert_int_eq(cmn_ex_iter_next(&it, &f, err, sizeof(err)), 1);
	ck_assert_uint_lt(f.name_len, sizeof(c->first_key[0]));
	memcpy(c->first_key[i], f.name, f.name_len);
	int n = 1;
	while (cmn_ex_iter_next(&it, &f, err, sizeof(err)) == 1) {
		n++;
		if (f.name_len == 6 && memcmp(f.name, "x_byte", 6) == 0) {
			ck_assert_int_eq(f.kind, CMN_EX_BYTES_LIST);
			ck_assert_uint_eq(f.packed_len, 8);
			ck_assert_int_eq(memcmp(f.packed, "test str", 8), 0);
		}
	}
	ck_assert_int_eq(n, 3);
}

START_TEST(test_pytorch_example_tfrecord)
{
	struct pt_ctx c = {0};
	char err[256];
	ck_assert_int_eq(cmn_schema_parse("x_int:int64[10],x_float:float32[10],x_byte:bytes", &c.s,
					  err, sizeof(err)),
			 0);
	size_t n = each_record("example__pytorch_data__example.tfrecord", pt_record, &c);
	ck_assert_uint_eq(n, 4);
	/* The README says the map's key order differs between records. */
	int differ = 0;
	for (int i = 1; i < 4; i++)
		differ |= strcmp(c.first_key[i], c.first_key[0]) != 0;
	ck_assert_msg(differ, "all records start with '%s'", c.first_key[0]);
	cmn_schema_free(c.s);
}
END_TEST

/* ---- tfx penguin, GZIP ------------------------------------------------- */

struct pg_ctx {
	struct cmn_schema *s;
	size_t per_species[3];
};

static void pg_record(const struct cmn_tfr_record *rec, size_t i, void *vctx)
{
	struct pg_ctx *c = vctx;
	int64_t species;
	float cl, cd, fl, bm;
	void *fixed[5] = {&species, &cl, &cd, &fl, &bm};
	struct cmn_ex_sink sink = {fixed, NULL, NULL};
	char err[256];
	int rc = cmn_ex_decode(c->s, rec->data, rec->len, &sink, err, sizeof(err));
	ck_assert_msg(rc == 0, "record %zu: %s", i, err);
	ck_assert_int_ge(species, 0);
	ck_assert_int_le(species, 2);
	c->per_species[species]++;
	/* TFX's penguin measurements are min-max scaled into [0, 1]. */
	float v[4] = {cl, cd, fl, bm};
	for (int k = 0; k < 4; k++)
		ck_assert_msg(v[k] >= 0 && v[k] <= 1, "record %zu: feature %d = %g", i, k,
			      (double)v[k]);
	if (i == 0) {
		/* The first record, as python3-protobuf reads it. */
		ck_assert_int_eq(species, 0);
		ck_assert_float_eq(cl, 0.24727272987365723f);
		ck_assert_float_eq(cd, 0.5595238208770752f);
		ck_assert_float_eq(fl, 0.1525423675775528f);
		ck_assert_float_eq(bm, 0.2569444477558136f);
	}
}

START_TEST(test_penguin_gzip)
{
	struct pg_ctx c = {0};
	char err[256];
	ck_assert_int_eq(cmn_schema_parse("species:int64[1],culmen_length_mm:float32,"
					  "culmen_depth_mm:float32,flipper_length_mm:float32,"
					  "body_mass_g:float32",
					  &c.s, err, sizeof(err)),
			 0);
	size_t n = each_record(
	    "example_gzip__tfx__penguin_Split-eval_data_tfrecord-00000-of-00001.gz", pg_record, &c);
	ck_assert_uint_eq(n, 100);
	/* Species counts of this split (python3-protobuf agrees: oracle_random.py). */
	ck_assert_uint_eq(c.per_species[0], 47);
	ck_assert_uint_eq(c.per_species[1], 22);
	ck_assert_uint_eq(c.per_species[2], 31);
	cmn_schema_free(c.s);
}
END_TEST

/* ---- SequenceExample read as an Example: its context is field 1 too ---- */

static void seq_record(const struct cmn_tfr_record *rec, size_t i, void *vctx)
{
	struct cmn_schema *s = vctx;
	int64_t xi[10];
	float xf[10];
	void *fixed[2] = {xi, xf};
	struct cmn_ex_sink sink = {fixed, NULL, NULL};
	char err[256];
	/* feature_lists (field 2) is an unknown field of Example: skipped. */
	int rc = cmn_ex_decode(s, rec->data, rec->len, &sink, err, sizeof(err));
	ck_assert_msg(rc == 0, "record %zu: %s", i, err);
	for (int j = 0; j < 10; j++) {
		ck_assert_int_eq(xi[j], 10 * (10 * (int64_t)i + j));
		ck_assert_float_eq(xf[j], (float)(10 * i + (size_t)j));
	}
}

START_TEST(test_sequence_example_context)
{
	struct cmn_schema *s;
	char err[256];
	ck_assert_int_eq(
	    cmn_schema_parse("x_int:int64[10],x_float:float32[10]", &s, err, sizeof(err)), 0);
	ck_assert_uint_eq(
	    each_record("seqex__pytorch_data__sequence_example.tfrecord", seq_record, s), 4);
	cmn_schema_free(s);
}
END_TEST

/* ---- raw payloads are not Examples: an error or nothing, never a crash -- */

static void raw_record(const struct cmn_tfr_record *rec, size_t i, void *vctx)
{
	struct cmn_schema *s = vctx;
	int64_t v;
	void *fixed[1] = {&v};
	struct cmn_ex_sink sink = {fixed, NULL, NULL};
	char err[256];
	int rc = cmn_ex_decode(s, rec->data, rec->len, &sink, err, sizeof(err));
	ck_assert_msg(rc == -EBADMSG || rc == -ENOENT, "record %zu: rc %d", i, rc);
}

START_TEST(test_raw_payloads_rejected)
{
	struct cmn_schema *s;
	char err[256];
	ck_assert_int_eq(cmn_schema_parse("y:int64", &s, err, sizeof(err)), 0);
	ck_assert_uint_eq(
	    each_record("raw__magenta__tfrecord_iterator_test.tfrecord", raw_record, s), 3);
	cmn_schema_free(s);
}
END_TEST

int main(void)
{
	testdata = getenv("RC_TESTDATA");
	char probe[4096];
	snprintf(probe, sizeof(probe), "%s/README.md", testdata ? testdata : "");
	if (!testdata || access(probe, R_OK) != 0) {
		printf("SKIP: $RC_TESTDATA (%s) has no README.md: the real TFRecord files are "
		       "missing\n",
		       testdata ? testdata : "unset");
		return 77;
	}
	Suite *s = suite_create("example_testdata");
	TCase *tc = tcase_create("pytorch_example_tfrecord");
	tcase_add_test(tc, test_pytorch_example_tfrecord);
	suite_add_tcase(s, tc);
	tc = tcase_create("penguin_gzip");
	tcase_add_test(tc, test_penguin_gzip);
	suite_add_tcase(s, tc);
	tc = tcase_create("sequence_example_context");
	tcase_add_test(tc, test_sequence_example_context);
	suite_add_tcase(s, tc);
	tc = tcase_create("raw_payloads_rejected");
	tcase_add_test(tc, test_raw_payloads_rejected);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
