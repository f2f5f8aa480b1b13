/*
 * test_testdata.c - the real TFRecord files of ../shared/testdata (written by
 * TensorFlow in public projects) decode to the values their README documents.
 * Framing is read with common/tfrecord.h (the .gz file through its GZIP
 * path); records are decoded with cmn_ex_decode() and walked with the
 * iterator.  Fails when $RC_TESTDATA is missing.
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

/* ---- SequenceExample: refused by an Example schema, read by a sequence one -- */

/* A ragged sink that keeps each feature's values and per-record counts. */
struct rag {
	uint8_t buf[4][8192];
	size_t used[4];
	size_t n_values[4], n_items[4];
};

static void *rag_reserve(void *ctx, size_t feature, size_t n_values, size_t n_items)
{
	struct rag *r = ctx;
	const size_t esz[4] = {8, 4, 1, 1}; /* per test schema below */
	ck_assert_uint_lt(feature, 4);
	ck_assert_uint_le(r->used[feature] + n_values * esz[feature], sizeof(r->buf[0]));
	void *dst = r->buf[feature] + r->used[feature];
	r->used[feature] += n_values * esz[feature];
	r->n_values[feature] = n_values;
	r->n_items[feature] = n_items;
	return dst;
}

static void seq_refused(const struct cmn_tfr_record *rec, size_t i, void *vctx)
{
	struct cmn_schema *s = vctx;
	int64_t xi[10];
	float xf[10];
	void *fixed[2] = {xi, xf};
	struct cmn_ex_sink sink = {fixed, NULL, NULL};
	char err[512];
	int rc = cmn_ex_decode(s, rec->data, rec->len, &sink, err, sizeof(err));
	ck_assert_msg(rc == -EINVAL && strstr(err, "tf.SequenceExample") &&
			  strstr(err, "sequence NAME:dtype[shape]"),
		      "record %zu: rc %d: %s", i, rc, err);
}

START_TEST(test_sequence_example_refused_by_example_schema)
{
	struct cmn_schema *s;
	char err[256];
	ck_assert_int_eq(
	    cmn_schema_parse("x_int:int64[10],x_float:float32[10]", &s, err, sizeof(err)), 0);
	ck_assert_uint_eq(
	    each_record("seqex__pytorch_data__sequence_example.tfrecord", seq_refused, s), 4);
	cmn_schema_free(s);
}
END_TEST

static void seq_context(const struct cmn_tfr_record *rec, size_t i, void *vctx)
{
	struct cmn_schema *s = vctx;
	int64_t xi[10];
	float xf[10];
	void *fixed[2] = {xi, xf};
	struct cmn_ex_sink sink = {fixed, NULL, NULL};
	char err[256];
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
	    cmn_schema_parse("context x_int:int64[10],x_float:float32[10]", &s, err, sizeof(err)),
	    0);
	ck_assert_uint_eq(
	    each_record("seqex__pytorch_data__sequence_example.tfrecord", seq_context, s), 4);
	cmn_schema_free(s);
}
END_TEST

/*
 * README: record i has 3 + 2i steps; python3-protobuf reads every step of
 * x_int_seq as 10*(10i+j), of x_float_seq as 10i+j (j = 0..9), of
 * x_byte_seq as the one string "test str".
 */
static void seq_lists(const struct cmn_tfr_record *rec, size_t i, void *vctx)
{
	struct cmn_schema *s = vctx;
	struct rag *r = calloc(1, sizeof(*r));
	int64_t xi[10];
	void *fixed[4] = {NULL, NULL, NULL, xi};
	struct cmn_ex_sink sink = {fixed, rag_reserve, r};
	char err[256];
	size_t steps = 3 + 2 * i;
	ck_assert_ptr_nonnull(r);
	int rc = cmn_ex_decode(s, rec->data, rec->len, &sink, err, sizeof(err));
	ck_assert_msg(rc == 0, "record %zu: %s", i, err);
	ck_assert_uint_eq(r->n_items[0], steps);
	ck_assert_uint_eq(r->n_values[0], steps * 10);
	ck_assert_uint_eq(r->n_items[1], steps);
	ck_assert_uint_eq(r->n_values[1], steps * 10);
	ck_assert_uint_eq(r->n_items[2], steps);
	ck_assert_uint_eq(r->n_values[2], steps * 8);
	for (size_t k = 0; k < steps; k++) {
		for (int j = 0; j < 10; j++) {
			int64_t v;
			float f;
			memcpy(&v, r->buf[0] + 8 * (10 * k + (size_t)j), 8);
			memcpy(&f, r->buf[1] + 4 * (10 * k + (size_t)j), 4);
			ck_assert_int_eq(v, 10 * (10 * (int64_t)i + j));
			ck_assert_float_eq(f, (float)(10 * i + (size_t)j));
		}
		ck_assert_int_eq(memcmp(r->buf[2] + 8 * k, "test str", 8), 0);
	}
	for (int j = 0; j < 10; j++)
		ck_assert_int_eq(xi[j], 10 * (10 * (int64_t)i + j));
	free(r);
}

START_TEST(test_sequence_example_feature_lists)
{
	struct cmn_schema *s;
	char err[256];
	ck_assert_msg(
	    cmn_schema_parse("sequence x_int_seq:int64[10], sequence x_float_seq:float32[10],"
			     "sequence x_byte_seq:uint8[8], x_int:int64[10]",
			     &s, err, sizeof(err)) == 0,
	    "%s", err);
	ck_assert_uint_eq(
	    each_record("seqex__pytorch_data__sequence_example.tfrecord", seq_lists, s), 4);
	cmn_schema_free(s);
	/* a wrong step shape names the feature, the step and both counts */
	ck_assert_int_eq(cmn_schema_parse("sequence x_int_seq:int64[9]", &s, err, sizeof(err)), 0);
	struct rag *r = calloc(1, sizeof(*r));
	struct cmn_ex_sink sink = {NULL, rag_reserve, r};
	char path[4096];
	snprintf(path, sizeof(path), "%s/seqex__pytorch_data__sequence_example.tfrecord", testdata);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	uint8_t buf[4096];
	ssize_t n = read(fd, buf, sizeof(buf));
	close(fd);
	ck_assert_int_gt(n, 16);
	uint64_t len;
	ck_assert_int_eq(cmn_tfr_get_header(buf, (size_t)n, &len), 0);
	int rc = cmn_ex_decode(s, buf + 12, (size_t)len, &sink, err, sizeof(err));
	ck_assert_msg(rc == -EINVAL && strstr(err, "'x_int_seq'") && strstr(err, "step 0") &&
			  strstr(err, "10 values") && strstr(err, "needs 9 a step"),
		      "rc %d: %s", rc, err);
	cmn_schema_free(s);
	/* a missing feature_list: an error without a default, zero steps with =[] */
	ck_assert_int_eq(cmn_schema_parse("sequence nope:int64", &s, err, sizeof(err)), 0);
	rc = cmn_ex_decode(s, buf + 12, (size_t)len, &sink, err, sizeof(err));
	ck_assert_msg(rc == -ENOENT && strstr(err, "'nope'"), "rc %d: %s", rc, err);
	cmn_schema_free(s);
	ck_assert_int_eq(cmn_schema_parse("sequence nope:int64=[]", &s, err, sizeof(err)), 0);
	r->n_items[0] = 99;
	rc = cmn_ex_decode(s, buf + 12, (size_t)len, &sink, err, sizeof(err));
	ck_assert_msg(rc == 0, "%s", err);
	ck_assert_uint_eq(r->n_items[0], 0);
	cmn_schema_free(s);
	free(r);
}
END_TEST

/* ---- a `record` schema: the whole payload of any TFRecord ---------------- */

struct payloads {
	struct cmn_schema *s;
	char got[8][64];
	size_t n;
};

static void *payload_reserve(void *ctx, size_t feature, size_t n_values, size_t n_items)
{
	struct payloads *p = ctx;
	ck_assert_uint_eq(feature, 0);
	ck_assert_uint_eq(n_items, 1);
	ck_assert_uint_lt(n_values, sizeof(p->got[0]));
	ck_assert_uint_lt(p->n, 8);
	return p->got[p->n++];
}

static void payload_record(const struct cmn_tfr_record *rec, size_t i, void *vctx)
{
	struct payloads *p = vctx;
	struct cmn_ex_sink sink = {NULL, payload_reserve, p};
	char err[256];
	int rc = cmn_ex_decode(p->s, rec->data, rec->len, &sink, err, sizeof(err));
	ck_assert_msg(rc == 0, "record %zu: %s", i, err);
	ck_assert_uint_eq(p->n, i + 1);
	ck_assert_int_eq(memcmp(p->got[i], rec->data, rec->len), 0);
	p->got[i][rec->len] = '\0';
}

START_TEST(test_record_payload_magenta)
{
	struct payloads p = {0};
	char err[256];
	ck_assert_int_eq(cmn_schema_parse("record payload:bytes", &p.s, err, sizeof(err)), 0);
	ck_assert_uint_eq(
	    each_record("raw__magenta__tfrecord_iterator_test.tfrecord", payload_record, &p), 3);
	ck_assert_str_eq(p.got[0], "hello world");
	ck_assert_str_eq(p.got[1], "12345");
	ck_assert_str_eq(p.got[2], "success");
	cmn_schema_free(p.s);
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
		printf("FAIL: $RC_TESTDATA (%s) has no README.md: the real TFRecord files are "
		       "missing (tests/data/tensorflow holds them)\n",
		       testdata ? testdata : "unset");
		return 1;
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
	tc = tcase_create("sequence_example_refused_by_example_schema");
	tcase_add_test(tc, test_sequence_example_refused_by_example_schema);
	suite_add_tcase(s, tc);
	tc = tcase_create("sequence_example_feature_lists");
	tcase_add_test(tc, test_sequence_example_feature_lists);
	suite_add_tcase(s, tc);
	tc = tcase_create("record_payload_magenta");
	tcase_add_test(tc, test_record_payload_magenta);
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
