/*
 * test_schema.c - unit tests of common/schema.c: the feature schema grammar,
 * its errors (with the column they point at), defaults, lookup, formatting.
 */
#include "common/schema.h"

#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct cmn_schema *parse_ok(const char *spec)
{
	struct cmn_schema *s = NULL;
	char err[256];
	int rc = cmn_schema_parse(spec, &s, err, sizeof(err));
	ck_assert_msg(rc == 0, "parse '%s' failed: %d %s", spec, rc, err);
	ck_assert_ptr_nonnull(s);
	return s;
}

START_TEST(test_design_spec)
{
	struct cmn_schema *s = parse_ok("x:float32[4,1000000,3],y:int64[1],ids:int64[],img:bytes");
	ck_assert_uint_eq(s->n, 4);
	const struct cmn_feature *x = &s->feature[0];
	ck_assert_str_eq(x->name, "x");
	ck_assert_int_eq(x->dtype, CMN_DT_FLOAT32);
	ck_assert_uint_eq(x->ndims, 3);
	ck_assert_uint_eq(x->dims[0], 4);
	ck_assert_uint_eq(x->dims[1], 1000000);
	ck_assert_uint_eq(x->dims[2], 3);
	ck_assert_uint_eq(x->count, 12000000);
	ck_assert_uint_eq(x->row_bytes, 48000000);
	ck_assert(!x->ragged);
	ck_assert(!x->has_default);
	const struct cmn_feature *y = &s->feature[1];
	ck_assert_int_eq(y->dtype, CMN_DT_INT64);
	ck_assert_uint_eq(y->count, 1);
	ck_assert_uint_eq(y->row_bytes, 8);
	const struct cmn_feature *ids = &s->feature[2];
	ck_assert(ids->ragged);
	ck_assert_uint_eq(ids->count, 0);
	ck_assert_uint_eq(ids->elem_size, 8);
	const struct cmn_feature *img = &s->feature[3];
	ck_assert_int_eq(img->dtype, CMN_DT_BYTES);
	ck_assert(img->ragged);
	ck_assert_uint_eq(img->elem_size, 1);
	ck_assert_uint_eq(s->n_ragged, 2);
	ck_assert_uint_eq(s->fixed_row_bytes, 48000008);
	cmn_schema_free(s);
}
END_TEST

START_TEST(test_scalars_aliases_blanks)
{
	struct cmn_schema *s = parse_ok(" label : int64 , w:float , m : uint8 [ 2 , 3 ] ");
	ck_assert_uint_eq(s->n, 3);
	ck_assert_str_eq(s->feature[0].name, "label");
	ck_assert_uint_eq(s->feature[0].ndims, 0);
	ck_assert_uint_eq(s->feature[0].count, 1);
	ck_assert_int_eq(s->feature[1].dtype, CMN_DT_FLOAT32);
	ck_assert_uint_eq(s->feature[2].count, 6);
	ck_assert_uint_eq(s->feature[2].row_bytes, 6);
	cmn_schema_free(s);
	/* Names keep anything but the separators: slashes, dots, UTF-8. */
	s = parse_ok("image/encoded:bytes,a.b-c:int64[],\xc3\xa9t\xc3\xa9:float32[2]");
	ck_assert_str_eq(s->feature[0].name, "image/encoded");
	ck_assert_str_eq(s->feature[2].name, "\xc3\xa9t\xc3\xa9");
	cmn_schema_free(s);
}
END_TEST

START_TEST(test_defaults)
{
	struct cmn_schema *s =
	    parse_ok("y:int64[1]=-7,w:float32[2]=0.5,m:uint8[3]=255,ids:int64[]=[ ],img:bytes=\"\","
		     "n:float32=nan,big:int64=9223372036854775807");
	ck_assert(s->feature[0].has_default);
	ck_assert_int_eq(s->feature[0].def.i, -7);
	ck_assert_float_eq(s->feature[1].def.f, 0.5f);
	ck_assert_uint_eq(s->feature[2].def.u, 255);
	ck_assert(s->feature[3].has_default);
	ck_assert(s->feature[4].has_default);
	ck_assert(isnan(s->feature[5].def.f));
	ck_assert_int_eq(s->feature[6].def.i, INT64_MAX);
	cmn_schema_free(s);
	s = parse_ok("a:int64");
	ck_assert(!s->feature[0].has_default);
	cmn_schema_free(s);
}
END_TEST

/* Each bad spec fails with -EINVAL, names the column, and says what is wrong. */
static const struct {
	const char *spec;
	int column;
	const char *says;
} bad_specs[] = {
    {"", 1, "empty schema"},
    {"   ", 4, "empty schema"},
    {"x", 2, "expected ':'"},
    {"x:", 3, "expected a dtype"},
    {"x:float33[4]", 3, "unknown dtype 'float33'"},
    {"x:float32[4", 12, "expected ',' or ']'"},
    {"x:float32[0]", 11, "dimension 0"},
    {"x:float32[-1]", 11, "expected a dimension"},
    {"x:float32[4,]", 13, "expected a dimension"},
    {"x:float32[99999999999999999999]", 11, "too large"},
    {"x:float32[65536,65536,65536]", 23, "more than"},
    {"x:float32[68719476736,68719476736]", 23, "more than"}, /* 2^72 must not wrap */
    {"x:float32[1,1,1,1,1,1,1,1,1]", 27, "more than 8 dimensions"},
    {"x:float32[4],", 14, "expected a feature name"},
    {"x:float32[4],,y:int64", 14, "expected a feature name"},
    {":int64", 1, "expected a feature name"},
    {"x:int64 y:int64", 9, "unexpected 'y'"},
    {"x:int64,x:float32", 9, "named twice"},
    {"img:bytes[4]", 10, "bytes features are ragged"},
    {"y:int64=", 9, "expected a default value"},
    {"y:int64=abc", 9, "not an integer"},
    {"y:int64=99999999999999999999", 9, "out of int64 range"},
    {"m:uint8[2]=256", 12, "out of uint8 range"},
    {"m:uint8[2]=-1", 12, "out of uint8 range"},
    {"w:float32=1e39", 11, "out of float32 range"},
    {"w:float32=x", 11, "not a number"},
    {"ids:int64[]=0", 13, "default can only be []"},
    {"img:bytes=abc", 11, "can only be \"\""},
    {"y:int64=1.5", 10, "unexpected '.'"},
    {"sequence x:int64[]", 1, "each step needs a fixed shape"},
    {"sequence x:bytes", 1, "each step needs a fixed shape"},
    {"record x:int64", 1, "the whole record is bytes"},
    {"record p:bytes,y:int64", 1, "must be the schema's only feature"},
    {"y:int64, record p:bytes", 10, "must be the schema's only feature"},
    {"record p:bytes=\"\"", 15, "takes no default"},
    {"sequence  :int64", 11, "expected a feature name"},
    {"seq x:int64", 5, "expected ':' and a dtype after feature name 'seq'"},
};

START_TEST(test_errors_point_at_column)
{
	const char *spec = bad_specs[_i].spec;
	struct cmn_schema *s = (struct cmn_schema *)0x1;
	char err[256] = "";
	int rc = cmn_schema_parse(spec, &s, err, sizeof(err));
	ck_assert_msg(rc == -EINVAL, "'%s': rc %d, want -EINVAL", spec, rc);
	ck_assert_ptr_eq(s, (struct cmn_schema *)0x1); /* untouched */
	char col[32];
	snprintf(col, sizeof(col), "column %d:", bad_specs[_i].column);
	ck_assert_msg(strstr(err, col), "'%s': message '%s' lacks '%s'", spec, err, col);
	ck_assert_msg(strstr(err, bad_specs[_i].says), "'%s': message '%s' lacks '%s'", spec, err,
		      bad_specs[_i].says);
}
END_TEST

START_TEST(test_name_limits)
{
	char spec[600];
	memset(spec, 'a', 255);
	strcpy(spec + 255, ":int64");
	struct cmn_schema *s = parse_ok(spec);
	ck_assert_uint_eq(s->feature[0].name_len, 255);
	cmn_schema_free(s);
	memset(spec, 'a', 256);
	strcpy(spec + 256, ":int64");
	char err[256];
	ck_assert_int_eq(cmn_schema_parse(spec, &s, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "longer than 255"));
}
END_TEST

START_TEST(test_lookup_many_features)
{
	/* The maximum number of features, all findable; one more is refused. */
	size_t cap = 16 * (CMN_SCHEMA_MAX_FEATURES + 1);
	char *spec = malloc(cap);
	size_t o = 0;
	for (int i = 0; i < CMN_SCHEMA_MAX_FEATURES; i++)
		o += (size_t)snprintf(spec + o, cap - o, "%sf%d:int64", i ? "," : "", i);
	struct cmn_schema *s = parse_ok(spec);
	ck_assert_uint_eq(s->n, CMN_SCHEMA_MAX_FEATURES);
	for (int i = 0; i < CMN_SCHEMA_MAX_FEATURES; i++) {
		char name[16];
		int n = snprintf(name, sizeof(name), "f%d", i);
		ck_assert_int_eq(cmn_schema_find(s, name, (size_t)n), i);
	}
	ck_assert_int_eq(cmn_schema_find(s, "f", 1), -1);
	ck_assert_int_eq(cmn_schema_find(s, "f1x", 3), -1);
	ck_assert_int_eq(cmn_schema_find(s, "", 0), -1);
	/* Lookup by length, not NUL: "f12" with length 2 is "f1". */
	ck_assert_int_eq(cmn_schema_find(s, "f12", 2), 1);
	cmn_schema_free(s);
	snprintf(spec + o, cap - o, ",extra:int64");
	char err[256];
	ck_assert_int_eq(cmn_schema_parse(spec, &s, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "more than 256 features"));
	free(spec);
}
END_TEST

START_TEST(test_format_roundtrip)
{
	static const char *specs[] = {
	    "x:float32[4,1000000,3],y:int64[1],ids:int64[],img:bytes",
	    "label:int64=0,mask:uint8[16]=255,w:float32[2]=-1.5,ids:int64[]=[],img:bytes=\"\"",
	    "s:float32,t:uint8[]",
	    "sequence  a:int64[2,3], context\tb:float32,c:uint8[4], sequence d:float32=[]",
	    "record payload:bytes",
	    "context:int64,sequence:float32[2]", /* names, not keywords */
	};
	static const char *want[] = {
	    "x:float32[4,1000000,3],y:int64[1],ids:int64[],img:bytes",
	    "label:int64=0,mask:uint8[16]=255,w:float32[2]=-1.5,ids:int64[]=[],img:bytes=\"\"",
	    "s:float32,t:uint8[]",
	    "sequence a:int64[2,3],context b:float32,c:uint8[4],sequence d:float32=[]",
	    "record payload:bytes",
	    "context:int64,sequence:float32[2]",
	};
	for (size_t k = 0; k < sizeof(specs) / sizeof(specs[0]); k++) {
		struct cmn_schema *s = parse_ok(specs[k]);
		char buf[512];
		size_t n = cmn_schema_format(s, buf, sizeof(buf));
		ck_assert_uint_eq(n, strlen(buf));
		ck_assert_str_eq(buf, want[k]);
		/* Truncated output stays NUL-terminated and reports the full length. */
		char small[8];
		ck_assert_uint_eq(cmn_schema_format(s, small, sizeof(small)), n);
		ck_assert_uint_eq(strlen(small), sizeof(small) - 1);
		struct cmn_schema *s2 = parse_ok(buf);
		ck_assert_uint_eq(s2->n, s->n);
		for (size_t i = 0; i < s->n; i++) {
			ck_assert_str_eq(s2->feature[i].name, s->feature[i].name);
			ck_assert_int_eq(s2->feature[i].dtype, s->feature[i].dtype);
			ck_assert_uint_eq(s2->feature[i].count, s->feature[i].count);
			ck_assert_int_eq(s2->feature[i].ragged, s->feature[i].ragged);
			ck_assert_int_eq(s2->feature[i].has_default, s->feature[i].has_default);
			ck_assert_int_eq(s2->feature[i].place, s->feature[i].place);
			ck_assert_uint_eq(s2->feature[i].step_count, s->feature[i].step_count);
		}
		cmn_schema_free(s2);
		cmn_schema_free(s);
	}
	ck_assert_str_eq(cmn_dtype_name(CMN_DT_UINT8), "uint8");
}
END_TEST

START_TEST(test_places)
{
	struct cmn_schema *s = parse_ok("sequence a:int64[2,3], b:float32, context c:uint8[4]");
	ck_assert(s->sequence);
	ck_assert(!s->record);
	ck_assert_int_eq(s->feature[0].place, CMN_PLACE_SEQUENCE);
	ck_assert(s->feature[0].ragged);
	ck_assert_uint_eq(s->feature[0].step_count, 6);
	ck_assert_uint_eq(s->feature[0].ndims, 2);
	ck_assert_uint_eq(s->feature[0].row_bytes, 0);
	ck_assert_int_eq(s->feature[1].place, CMN_PLACE_FEATURE);
	ck_assert_int_eq(s->feature[2].place, CMN_PLACE_CONTEXT);
	ck_assert_uint_eq(s->n_ragged, 1);
	ck_assert_uint_eq(s->fixed_row_bytes, 4 + 4);
	cmn_schema_free(s);
	s = parse_ok("record payload:bytes");
	ck_assert(s->record);
	ck_assert(s->feature[0].ragged);
	cmn_schema_free(s);
	s = parse_ok("x:int64");
	ck_assert(!s->sequence && !s->record);
	cmn_schema_free(s);
}
END_TEST

static Suite *schema_suite(void)
{
	Suite *s = suite_create("schema");
	TCase *tc;
	tc = tcase_create("design_spec");
	tcase_add_test(tc, test_design_spec);
	suite_add_tcase(s, tc);
	tc = tcase_create("scalars_aliases_blanks");
	tcase_add_test(tc, test_scalars_aliases_blanks);
	suite_add_tcase(s, tc);
	tc = tcase_create("defaults");
	tcase_add_test(tc, test_defaults);
	suite_add_tcase(s, tc);
	tc = tcase_create("errors_point_at_column");
	tcase_add_loop_test(tc, test_errors_point_at_column, 0,
			    (int)(sizeof(bad_specs) / sizeof(bad_specs[0])));
	suite_add_tcase(s, tc);
	tc = tcase_create("name_limits");
	tcase_add_test(tc, test_name_limits);
	suite_add_tcase(s, tc);
	tc = tcase_create("lookup_many_features");
	tcase_add_test(tc, test_lookup_many_features);
	suite_add_tcase(s, tc);
	tc = tcase_create("places_sequence_context_record");
	tcase_add_test(tc, test_places);
	suite_add_tcase(s, tc);
	tc = tcase_create("format_roundtrip");
	tcase_add_test(tc, test_format_roundtrip);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(schema_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
