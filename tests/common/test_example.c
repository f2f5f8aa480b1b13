/*
 * test_example.c - unit tests of common/example.c, the zero-copy tf.Example
 * decoder and the encoder.  Inputs are built by hand (pb_build.h) so that the
 * cases the encoder never writes are covered: unpacked values, unknown
 * fields, duplicate keys, merged messages, odd orders, malformed bytes.
 * Malformed inputs are decoded from heap copies of exactly their length so
 * that ASan (meson test --setup=asan) catches any read past the end.
 */
#include "common/example.h"
#include "tests/common/pb_build.h"

#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ----------------------------------------------------------- */

static struct cmn_schema *schema(const char *spec)
{
	struct cmn_schema *s = NULL;
	char err[256];
	int rc = cmn_schema_parse(spec, &s, err, sizeof(err));
	ck_assert_msg(rc == 0, "schema '%s': %s", spec, err);
	return s;
}

/* A ragged sink collecting each feature's values of one record. */
struct arena {
	uint8_t buf[8][4096];
	size_t n[8], items[8], calls[8];
	int refuse; /* return NULL */
};

static void *arena_reserve(void *ctx, size_t feature, size_t n_values, size_t n_items)
{
	struct arena *a = ctx;
	ck_assert_uint_lt(feature, 8);
	a->calls[feature]++;
	a->n[feature] = n_values;
	a->items[feature] = n_items;
	if (a->refuse)
		return NULL;
	ck_assert_uint_le(n_values * 8, sizeof(a->buf[0]));
	return a->buf[feature];
}

/* Decodes a heap copy of exactly len bytes (so overreads trip ASan). */
static int decode_exact(const struct cmn_schema *s, const void *buf, size_t len,
			const struct cmn_ex_sink *sink, char *err, size_t errlen)
{
	void *copy = malloc(len ? len : 1);
	if (len)
		memcpy(copy, buf, len);
	int rc = cmn_ex_decode(s, copy, len, sink, err, errlen);
	free(copy);
	return rc;
}

/* Iterates a heap copy to the end; returns the count of features or the error. */
static int iterate_exact(const void *buf, size_t len)
{
	void *copy = malloc(len ? len : 1);
	if (len)
		memcpy(copy, buf, len);
	struct cmn_ex_iter it;
	struct cmn_ex_feature f;
	char err[256];
	int n = 0, rc;
	cmn_ex_iter_init(&it, copy, len);
	while ((rc = cmn_ex_iter_next(&it, &f, err, sizeof(err))) == 1) {
		/* Reading the values must stay inside the buffer too. */
		size_t need = f.n_values * 8 + f.n_bytes + 1;
		void *dst = malloc(need);
		size_t *lens = malloc((f.n_values + 1) * sizeof(size_t));
		cmn_ex_feature_read(&f, dst, lens);
		free(dst);
		free(lens);
		n++;
	}
	free(copy);
	return rc < 0 ? rc : n;
}

/* A Features message builder for the common case. */
static void add_floats(struct pb *feats, const char *key, const float *v, size_t n, int packed)
{
	struct pb list = {0};
	if (packed)
		pb_float_list_packed(&list, v, n);
	else
		pb_float_list_unpacked(&list, v, n);
	pb_entry(feats, key, CMN_EX_FLOAT_LIST, &list);
	pb_free(&list);
}

static void add_int64s(struct pb *feats, const char *key, const int64_t *v, size_t n, int packed)
{
	struct pb list = {0};
	if (packed)
		pb_int64_list_packed(&list, v, n);
	else
		pb_int64_list_unpacked(&list, v, n);
	pb_entry(feats, key, CMN_EX_INT64_LIST, &list);
	pb_free(&list);
}

static void add_bytes(struct pb *feats, const char *key, const char *const *v, size_t n)
{
	struct pb list = {0};
	for (size_t i = 0; i < n; i++)
		pb_bytes(&list, 1, v[i], strlen(v[i]));
	pb_entry(feats, key, CMN_EX_BYTES_LIST, &list);
	pb_free(&list);
}

static struct pb wrap(const struct pb *feats)
{
	struct pb ex = {0};
	pb_example(&ex, feats);
	return ex;
}

/* A valid Example touching every path: used by truncation and bit-flip tests. */
static struct pb rich_example(void)
{
	struct pb feats = {0};
	float f[5] = {1.5f, -2.0f, 0.0f, 3.25f, 1e30f};
	int64_t i[4] = {-1, 0, INT64_MAX, INT64_MIN};
	const char *b[2] = {"hello", ""};
	add_floats(&feats, "x", f, 5, 1);
	add_int64s(&feats, "y", i, 3, 0);
	add_int64s(&feats, "ids", i, 4, 1);
	add_bytes(&feats, "img", b, 2);
	const char *m[1] = {"\x01\x02\x03\x04"};
	add_bytes(&feats, "m", m, 1);
	add_floats(&feats, "r", f, 2, 0);
	pb_vfield(&feats, 9, 300); /* unknown fields */
	pb_fixed64(&feats, 10, 1);
	struct pb ex = wrap(&feats);
	pb_fixed32(&ex, 3, 7);
	pb_free(&feats);
	return ex;
}

#define RICH_SPEC "x:float32[5],y:int64[3],ids:int64[],img:bytes,m:uint8[4],r:float32[]"

/* ---- round trip -------------------------------------------------------- */

START_TEST(test_encode_decode_roundtrip)
{
	struct cmn_schema *s = schema(RICH_SPEC ",u:uint8[],big:int64[2]");
	float x[5] = {1, 2, 3, 4, 5}, r[3] = {-1, -2, -3};
	int64_t y[3] = {7, -7, 1LL << 40}, ids[2] = {11, 12}, big[2] = {INT64_MIN, -1};
	size_t lens[3] = {2, 0, 3};
	struct cmn_ex_values v[8] = {
	    {x, 5, NULL, 0},
	    {y, 3, NULL, 0},
	    {ids, 2, NULL, 0},
	    {"abcde", 5, lens, 3},
	    {"\xff\x00\x01\x02", 4, NULL, 0},
	    {r, 3, NULL, 0},
	    {"", 0, NULL, 0},
	    {big, 2, NULL, 0},
	};
	uint8_t buf[1024], buf2[1024];
	size_t len = 0, len2 = 0;
	char err[256];
	ck_assert_int_eq(cmn_ex_encode(s, v, buf, sizeof(buf), &len, err, sizeof(err)), 0);
	ck_assert_uint_eq(len, cmn_ex_encoded_size(s, v));
	ck_assert_int_eq(cmn_ex_encode(s, v, buf2, sizeof(buf2), &len2, err, sizeof(err)), 0);
	ck_assert_uint_eq(len2, len);
	ck_assert_int_eq(memcmp(buf, buf2, len), 0); /* deterministic */

	float ox[5];
	int64_t oy[3], obig[2];
	uint8_t om[4];
	void *fixed[8] = {ox, oy, NULL, NULL, om, NULL, NULL, obig};
	struct arena a = {0};
	struct cmn_ex_sink sink = {fixed, arena_reserve, &a};
	ck_assert_int_eq(decode_exact(s, buf, len, &sink, err, sizeof(err)), 0);
	ck_assert_int_eq(memcmp(ox, x, sizeof(x)), 0);
	ck_assert_int_eq(memcmp(oy, y, sizeof(y)), 0);
	ck_assert_int_eq(memcmp(obig, big, sizeof(big)), 0);
	ck_assert_int_eq(memcmp(om, "\xff\x00\x01\x02", 4), 0);
	ck_assert_uint_eq(a.n[2], 2);
	ck_assert_int_eq(memcmp(a.buf[2], ids, sizeof(ids)), 0);
	ck_assert_uint_eq(a.n[3], 5);
	ck_assert_uint_eq(a.items[3], 3);
	ck_assert_int_eq(memcmp(a.buf[3], "abcde", 5), 0);
	ck_assert_uint_eq(a.n[5], 3);
	ck_assert_int_eq(memcmp(a.buf[5], r, sizeof(r)), 0);
	ck_assert_uint_eq(a.n[6], 0);
	ck_assert_uint_eq(a.calls[6], 1); /* called once even when empty */

	/* The iterator sees the same thing, in schema order, with packed views. */
	struct cmn_ex_iter it;
	struct cmn_ex_feature f;
	cmn_ex_iter_init(&it, buf, len);
	ck_assert_int_eq(cmn_ex_iter_next(&it, &f, err, sizeof(err)), 1);
	ck_assert_uint_eq(f.name_len, 1);
	ck_assert_int_eq(f.name[0], 'x');
	ck_assert_int_eq(f.kind, CMN_EX_FLOAT_LIST);
	ck_assert_uint_eq(f.n_values, 5);
	ck_assert_ptr_nonnull(f.packed);
	ck_assert_uint_eq(f.packed_len, 20);
	ck_assert_int_eq(memcmp(f.packed, x, 20), 0);
	ck_assert_int_eq(cmn_ex_iter_next(&it, &f, err, sizeof(err)), 1);
	ck_assert_int_eq(f.kind, CMN_EX_INT64_LIST);
	ck_assert_uint_eq(f.n_values, 3);
	ck_assert_int_eq(cmn_ex_iter_next(&it, &f, err, sizeof(err)), 1);
	ck_assert_int_eq(cmn_ex_iter_next(&it, &f, err, sizeof(err)), 1);
	ck_assert_int_eq(f.kind, CMN_EX_BYTES_LIST);
	ck_assert_uint_eq(f.n_values, 3);
	ck_assert_uint_eq(f.n_bytes, 5);
	ck_assert_ptr_null(f.packed); /* three strings: no single view */
	char bytes[8];
	size_t olens[3];
	cmn_ex_feature_read(&f, bytes, olens);
	ck_assert_int_eq(memcmp(bytes, "abcde", 5), 0);
	ck_assert_uint_eq(olens[0], 2);
	ck_assert_uint_eq(olens[1], 0);
	ck_assert_uint_eq(olens[2], 3);
	int n = 4;
	while (cmn_ex_iter_next(&it, &f, err, sizeof(err)) == 1)
		n++;
	ck_assert_int_eq(n, 8);
	cmn_schema_free(s);
}
END_TEST

START_TEST(test_encoder_errors)
{
	struct cmn_schema *s = schema("x:float32[2],img:bytes");
	float x[2] = {1, 2};
	size_t lens[2] = {1, 1};
	struct cmn_ex_values v[2] = {{x, 1, NULL, 0}, {"abc", 3, NULL, 0}};
	uint8_t buf[256];
	size_t len = 12345;
	char err[256];
	ck_assert_int_eq(cmn_ex_encode(s, v, buf, sizeof(buf), &len, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "feature 'x': 1 values given, the schema needs 2"));
	ck_assert_uint_eq(cmn_ex_encoded_size(s, v), 0);
	v[0].n = 2;
	v[1].lens = lens;
	v[1].n_items = 2;
	ck_assert_int_eq(cmn_ex_encode(s, v, buf, sizeof(buf), &len, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "sum to 2, not 3"));
	v[1].lens = NULL;
	size_t need = cmn_ex_encoded_size(s, v);
	ck_assert_uint_gt(need, 0);
	ck_assert_int_eq(cmn_ex_encode(s, v, buf, need - 1, &len, err, sizeof(err)), -ENOSPC);
	ck_assert_uint_eq(len, 12345); /* untouched */
	ck_assert_int_eq(cmn_ex_encode(s, v, buf, need, &len, err, sizeof(err)), 0);
	ck_assert_uint_eq(len, need);
	cmn_schema_free(s);
}
END_TEST

/* ---- wire variants ----------------------------------------------------- */

START_TEST(test_packed_unpacked_mixed)
{
	struct cmn_schema *s = schema("f:float32[6],i:int64[6]");
	float fv[6] = {0.5f, -1, 2, INFINITY, -0.0f, 7};
	int64_t iv[6] = {1, -2, 300, INT64_MIN, INT64_MAX, 0};
	for (int mode = 0; mode < 3; mode++) {
		struct pb feats = {0};
		if (mode < 2) {
			add_floats(&feats, "f", fv, 6, mode);
			add_int64s(&feats, "i", iv, 6, mode);
		} else {
			/* Mixed: packed chunk, single values, another packed chunk. */
			struct pb fl = {0}, il = {0};
			pb_float_list_packed(&fl, fv, 2);
			pb_float_list_unpacked(&fl, fv + 2, 1);
			pb_float_list_packed(&fl, fv + 3, 0); /* empty packed field */
			pb_float_list_packed(&fl, fv + 3, 3);
			pb_int64_list_unpacked(&il, iv, 2);
			pb_int64_list_packed(&il, iv + 2, 3);
			pb_int64_list_unpacked(&il, iv + 5, 1);
			pb_entry(&feats, "i", CMN_EX_INT64_LIST, &il);
			pb_entry(&feats, "f", CMN_EX_FLOAT_LIST, &fl);
			pb_free(&fl);
			pb_free(&il);
		}
		struct pb ex = wrap(&feats);
		float of[6];
		int64_t oi[6];
		void *fixed[2] = {of, oi};
		struct cmn_ex_sink sink = {fixed, NULL, NULL};
		char err[256];
		ck_assert_msg(decode_exact(s, ex.d, ex.len, &sink, err, sizeof(err)) == 0,
			      "mode %d: %s", mode, err);
		ck_assert_int_eq(memcmp(of, fv, sizeof(fv)), 0);
		ck_assert_int_eq(memcmp(oi, iv, sizeof(iv)), 0);
		pb_free(&feats);
		pb_free(&ex);
	}
	cmn_schema_free(s);
}
END_TEST

START_TEST(test_negative_int64_ten_bytes)
{
	struct cmn_schema *s = schema("i:int64[4]");
	int64_t iv[4] = {-1, INT64_MIN, -300, INT64_MAX};
	struct cmn_ex_values v = {iv, 4, NULL, 0};
	uint8_t buf[128];
	size_t len;
	char err[256];
	ck_assert_int_eq(cmn_ex_encode(s, &v, buf, sizeof(buf), &len, err, sizeof(err)), 0);
	struct cmn_ex_iter it;
	struct cmn_ex_feature f;
	cmn_ex_iter_init(&it, buf, len);
	ck_assert_int_eq(cmn_ex_iter_next(&it, &f, err, sizeof(err)), 1);
	ck_assert_uint_eq(f.packed_len, 10 + 10 + 10 + 9); /* negatives are 10-byte varints */
	int64_t out[4];
	void *fixed[1] = {out};
	struct cmn_ex_sink sink = {fixed, NULL, NULL};
	ck_assert_int_eq(decode_exact(s, buf, len, &sink, err, sizeof(err)), 0);
	for (int k = 0; k < 4; k++)
		ck_assert_int_eq(out[k], iv[k]);

	/* A 10th byte with bits past 64 is accepted and those bits dropped, as protobuf does. */
	struct pb list = {0}, feats = {0};
	pb_tag(&list, 1, 0);
	pb_raw(&list, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 10);
	pb_entry(&feats, "i", CMN_EX_INT64_LIST, &list);
	struct pb ex = wrap(&feats);
	struct cmn_schema *s1 = schema("i:int64");
	ck_assert_int_eq(decode_exact(s1, ex.d, ex.len, &sink, err, sizeof(err)), 0);
	ck_assert_int_eq(out[0], -1);
	pb_free(&list);
	pb_free(&feats);
	pb_free(&ex);
	cmn_schema_free(s1);
	cmn_schema_free(s);
}
END_TEST

START_TEST(test_unknown_fields_and_wrong_wire_types_skipped)
{
	/* Unknown fields of every wire type at every level; known fields with
	 * another wire type are unknown fields too (protobuf's rule). */
	struct pb list = {0}, feat = {0}, entry = {0}, feats = {0}, ex = {0};
	float fv[2] = {1.25f, -8};
	pb_vfield(&list, 5, 1);
	pb_float_list_packed(&list, fv, 1);
	pb_vfield(&list, 1, 99);  /* value as varint: skipped */
	pb_fixed64(&list, 1, 99); /* value as fixed64: skipped */
	pb_bytes(&list, 7, "zz", 2);
	pb_float_list_unpacked(&list, fv + 1, 1);
	pb_fixed32(&list, 2, 0);
	pb_fixed64(&feat, 9, 0);
	pb_vfield(&feat, 3, 1); /* int64_list as varint: not a kind */
	pb_ld(&feat, CMN_EX_FLOAT_LIST, &list);
	pb_fixed32(&feat, 1, 5); /* bytes_list as fixed32: not a kind */
	pb_bytes(&feat, 4, "x", 1);
	pb_vfield(&entry, 3, 1);
	pb_fixed32(&entry, 1, 0); /* key as fixed32: skipped */
	pb_bytes(&entry, 1, "f", 1);
	pb_fixed64(&entry, 2, 0); /* value as fixed64: skipped */
	pb_ld(&entry, 2, &feat);
	pb_bytes(&entry, 5, "", 0);
	pb_vfield(&feats, 1, 3); /* entry as varint: skipped */
	pb_ld(&feats, 1, &entry);
	pb_fixed32(&feats, 2, 0);
	pb_vfield(&ex, 1, 1); /* features as varint: skipped */
	pb_bytes(&ex, 2, "junk", 4);
	pb_ld(&ex, 1, &feats);
	pb_fixed64(&ex, 1000000, 5);

	struct cmn_schema *s = schema("f:float32[2]");
	float out[2];
	void *fixed[1] = {out};
	struct cmn_ex_sink sink = {fixed, NULL, NULL};
	char err[256];
	ck_assert_msg(decode_exact(s, ex.d, ex.len, &sink, err, sizeof(err)) == 0, "%s", err);
	ck_assert_float_eq(out[0], 1.25f);
	ck_assert_float_eq(out[1], -8.0f);
	ck_assert_int_eq(iterate_exact(ex.d, ex.len), 1);
	pb_free(&list);
	pb_free(&feat);
	pb_free(&entry);
	pb_free(&feats);
	pb_free(&ex);
	cmn_schema_free(s);
}
END_TEST

START_TEST(test_last_wins_and_merges)
{
	struct cmn_schema *s = schema("a:int64[1],b:float32[2],c:int64[2],d:float32[1],e:int64[3]");
	struct pb feats = {0}, feats2 = {0};
	int64_t one = 1, two = 2, three[3] = {3, 4, 5};
	float fv[2] = {9, 10};
	/* a: duplicate key, the last entry wins (even across two features fields). */
	add_int64s(&feats, "a", &one, 1, 1);
	add_int64s(&feats2, "a", &two, 1, 1);
	/* b: first an int64 entry, then a float one: the last entry wins. */
	add_int64s(&feats, "b", three, 3, 1);
	add_floats(&feats, "b", fv, 2, 1);
	/* c: oneof float_list then int64_list: the last kind wins. */
	{
		struct pb fl = {0}, il = {0}, feat = {0}, entry = {0};
		pb_float_list_packed(&fl, fv, 2);
		pb_int64_list_packed(&il, three, 2);
		pb_ld(&feat, CMN_EX_FLOAT_LIST, &fl);
		pb_ld(&feat, CMN_EX_INT64_LIST, &il);
		pb_bytes(&entry, 1, "c", 1);
		pb_ld(&entry, 2, &feat);
		pb_ld(&feats, 1, &entry);
		pb_free(&fl);
		pb_free(&il);
		pb_free(&feat);
		pb_free(&entry);
	}
	/* d: float, int64, float: only the last float run counts (the int64
	 * case cleared the first float list). */
	{
		struct pb f1 = {0}, f2 = {0}, il = {0}, feat = {0}, entry = {0};
		pb_float_list_packed(&f1, fv, 1);
		pb_float_list_packed(&f2, fv + 1, 1);
		pb_int64_list_packed(&il, three, 1);
		pb_ld(&feat, CMN_EX_FLOAT_LIST, &f1);
		pb_ld(&feat, CMN_EX_INT64_LIST, &il);
		pb_ld(&feat, CMN_EX_FLOAT_LIST, &f2);
		/* Value before key, and the key given twice: the last key names it. */
		pb_ld(&entry, 2, &feat);
		pb_bytes(&entry, 1, "zzz", 3);
		pb_bytes(&entry, 1, "d", 1);
		pb_ld(&feats2, 1, &entry);
		pb_free(&f1);
		pb_free(&f2);
		pb_free(&il);
		pb_free(&feat);
		pb_free(&entry);
	}
	/* e: one entry carrying `value` twice, and a list split across them:
	 * protobuf merges the two Features, so the int64 runs concatenate. */
	{
		struct pb l1 = {0}, l2 = {0}, feat1 = {0}, feat2 = {0}, entry = {0};
		pb_int64_list_packed(&l1, three, 1);
		pb_int64_list_unpacked(&l2, three + 1, 2);
		pb_ld(&feat1, CMN_EX_INT64_LIST, &l1);
		pb_ld(&feat2, CMN_EX_INT64_LIST, &l2);
		pb_ld(&entry, 2, &feat1);
		pb_bytes(&entry, 1, "e", 1);
		pb_ld(&entry, 2, &feat2);
		pb_ld(&feats2, 1, &entry);
		pb_free(&l1);
		pb_free(&l2);
		pb_free(&feat1);
		pb_free(&feat2);
		pb_free(&entry);
	}
	struct pb ex = {0};
	pb_ld(&ex, 1, &feats);
	pb_ld(&ex, 1, &feats2);

	int64_t oa, oc[2], oe[3];
	float ob[2], od;
	void *fixed[5] = {&oa, ob, oc, &od, oe};
	struct cmn_ex_sink sink = {fixed, NULL, NULL};
	char err[256];
	ck_assert_msg(decode_exact(s, ex.d, ex.len, &sink, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(oa, 2);
	ck_assert_float_eq(ob[0], 9);
	ck_assert_float_eq(ob[1], 10);
	ck_assert_int_eq(oc[0], 3);
	ck_assert_int_eq(oc[1], 4);
	ck_assert_float_eq(od, 10);
	ck_assert_int_eq(oe[0], 3);
	ck_assert_int_eq(oe[1], 4);
	ck_assert_int_eq(oe[2], 5);

	/* The iterator reports every entry (duplicates included) with resolved kinds. */
	struct cmn_ex_iter it;
	struct cmn_ex_feature f;
	cmn_ex_iter_init(&it, ex.d, ex.len);
	const char *names[] = {"a", "b", "b", "c", "a", "d", "e"};
	enum cmn_ex_kind kinds[] = {CMN_EX_INT64_LIST, CMN_EX_INT64_LIST, CMN_EX_FLOAT_LIST,
				    CMN_EX_INT64_LIST, CMN_EX_INT64_LIST, CMN_EX_FLOAT_LIST,
				    CMN_EX_INT64_LIST};
	size_t counts[] = {1, 3, 2, 2, 1, 1, 3};
	for (int k = 0; k < 7; k++) {
		ck_assert_int_eq(cmn_ex_iter_next(&it, &f, err, sizeof(err)), 1);
		ck_assert_uint_eq(f.name_len, strlen(names[k]));
		ck_assert_int_eq(memcmp(f.name, names[k], f.name_len), 0);
		ck_assert_int_eq(f.kind, kinds[k]);
		ck_assert_uint_eq(f.n_values, counts[k]);
	}
	ck_assert_ptr_null(f.packed); /* e: values in two fields */
	ck_assert_int_eq(cmn_ex_iter_next(&it, &f, err, sizeof(err)), 0);
	pb_free(&feats);
	pb_free(&feats2);
	pb_free(&ex);
	cmn_schema_free(s);
}
END_TEST

/* ---- missing features, defaults, type and count errors ----------------- */

START_TEST(test_missing_and_defaults)
{
	struct pb feats = {0}, empty = {0};
	pb_entry(&feats, "e", 0, &empty);		 /* an empty Feature: kind unset */
	pb_entry(&feats, "", CMN_EX_BYTES_LIST, &empty); /* key "" is a name too */
	struct pb ex = wrap(&feats);

	struct cmn_schema *s = schema("y:int64[2]=-3,w:float32[3]=0.5,m:uint8[2]=9,e:float32[2]=0,"
				      "ids:int64[]=[],img:bytes=\"\",z:float32=-0");
	int64_t oy[2];
	float ow[3], oe[2] = {5, 5}, oz = 1;
	uint8_t om[2];
	void *fixed[7] = {oy, ow, om, oe, NULL, NULL, &oz};
	struct arena a = {0};
	struct cmn_ex_sink sink = {fixed, arena_reserve, &a};
	char err[256];
	ck_assert_msg(decode_exact(s, ex.d, ex.len, &sink, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(oy[0], -3);
	ck_assert_int_eq(oy[1], -3);
	ck_assert_float_eq(ow[2], 0.5f);
	ck_assert_uint_eq(om[1], 9);
	ck_assert_float_eq(oe[0], 0);
	ck_assert(signbit(oz));
	ck_assert_uint_eq(a.calls[4], 1);
	ck_assert_uint_eq(a.n[4], 0);
	ck_assert_uint_eq(a.calls[5], 1);
	cmn_schema_free(s);

	/* Without a default: -ENOENT naming the feature. */
	s = schema("y:int64[2]");
	ck_assert_int_eq(decode_exact(s, ex.d, ex.len, &sink, err, sizeof(err)), -ENOENT);
	ck_assert_str_eq(err, "feature 'y': missing and the schema gives no default");
	cmn_schema_free(s);
	s = schema("e:int64[2]");
	ck_assert_int_eq(decode_exact(s, ex.d, ex.len, &sink, err, sizeof(err)), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err, "feature 'e': has no value list (empty Feature)"));
	cmn_schema_free(s);
	s = schema("ids:int64[]");
	ck_assert_int_eq(decode_exact(s, ex.d, ex.len, &sink, err, sizeof(err)), -ENOENT);
	cmn_schema_free(s);
	s = schema("e:bytes");
	ck_assert_int_eq(decode_exact(s, ex.d, ex.len, &sink, err, sizeof(err)), -ENOENT);
	cmn_schema_free(s);
	pb_free(&feats);
	pb_free(&empty);
	pb_free(&ex);
}
END_TEST

START_TEST(test_type_count_range_errors)
{
	struct pb feats = {0};
	float fv[3] = {1, 2, 3};
	int64_t iv[3] = {1, 300, 3};
	add_floats(&feats, "f", fv, 3, 1);
	add_int64s(&feats, "i", iv, 3, 1);
	struct pb ex = wrap(&feats);
	char err[256];
	struct arena a = {0};
	uint8_t out[64];
	void *fixed[2] = {out, out};
	struct cmn_ex_sink sink = {fixed, arena_reserve, &a};
	static const struct {
		const char *spec;
		int rc;
		const char *msg;
	} cases[] = {
	    {"f:int64[3]", -EINVAL, "feature 'f': expected int64_list, found float_list"},
	    {"f:bytes", -EINVAL, "feature 'f': expected bytes_list, found float_list"},
	    {"f:uint8[3]", -EINVAL,
	     "feature 'f': expected bytes_list (or int64_list), found float_list"},
	    {"f:float32[4]", -EINVAL, "feature 'f': 3 values, schema float32[4] needs 4"},
	    {"f:float32[2,2]", -EINVAL, "feature 'f': 3 values, schema float32[2,2] needs 4"},
	    {"f:float32", -EINVAL, "feature 'f': 3 values, schema float32 needs 1"},
	    {"i:uint8[3]", -ERANGE, "feature 'i': int64 value 300 out of uint8 range 0..255"},
	    {"f:float32[],i:int64[]", 0, ""},
	};
	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		struct cmn_schema *s = schema(cases[k].spec);
		int rc = decode_exact(s, ex.d, ex.len, &sink, err, sizeof(err));
		ck_assert_msg(rc == cases[k].rc, "%s: rc %d want %d (%s)", cases[k].spec, rc,
			      cases[k].rc, err);
		ck_assert_str_eq(err, cases[k].msg);
		cmn_schema_free(s);
	}
	/* The sink refusing room: -ENOBUFS. */
	struct cmn_schema *s = schema("f:float32[]");
	a.refuse = 1;
	ck_assert_int_eq(decode_exact(s, ex.d, ex.len, &sink, err, sizeof(err)), -ENOBUFS);
	ck_assert_ptr_nonnull(strstr(err, "feature 'f': no room for 3 values"));
	cmn_schema_free(s);
	/* uint8 from an int64_list in range works. */
	pb_reset(&feats);
	int64_t small[2] = {0, 255};
	add_int64s(&feats, "u", small, 2, 0);
	pb_free(&ex);
	ex = wrap(&feats);
	s = schema("u:uint8[2]");
	ck_assert_int_eq(decode_exact(s, ex.d, ex.len, &sink, err, sizeof(err)), 0);
	ck_assert_uint_eq(out[0], 0);
	ck_assert_uint_eq(out[1], 255);
	cmn_schema_free(s);
	pb_free(&feats);
	pb_free(&ex);
}
END_TEST

START_TEST(test_skipped_features_not_touched)
{
	/* NULL destinations skip a feature: not checked, not written. */
	struct pb feats = {0};
	float fv[1] = {1};
	add_floats(&feats, "f", fv, 1, 1);
	struct pb ex = wrap(&feats);
	struct cmn_schema *s = schema("f:int64[9],g:int64,h:int64[]");
	void *fixed[3] = {NULL, NULL, NULL};
	struct cmn_ex_sink sink = {fixed, NULL, NULL};
	char err[256];
	ck_assert_int_eq(decode_exact(s, ex.d, ex.len, &sink, err, sizeof(err)), 0);
	struct cmn_ex_sink none = {NULL, NULL, NULL};
	ck_assert_int_eq(decode_exact(s, ex.d, ex.len, &none, err, sizeof(err)), 0);
	cmn_schema_free(s);
	pb_free(&feats);
	pb_free(&ex);
}
END_TEST

/* ---- malformed input --------------------------------------------------- */

START_TEST(test_truncation_at_every_byte)
{
	struct pb ex = rich_example();
	struct cmn_schema *s = schema(RICH_SPEC);
	float ox[5];
	int64_t oy[3];
	uint8_t om[4];
	void *fixed[6] = {ox, oy, NULL, NULL, om, NULL};
	struct arena a = {0};
	struct cmn_ex_sink sink = {fixed, arena_reserve, &a};
	char err[256];
	ck_assert_int_eq(decode_exact(s, ex.d, ex.len, &sink, err, sizeof(err)), 0);
	ck_assert_int_eq(iterate_exact(ex.d, ex.len), 6);
	size_t errors = 0;
	for (size_t cut = 0; cut < ex.len; cut++) {
		int rc = decode_exact(s, ex.d, cut, &sink, err, sizeof(err));
		ck_assert_msg(rc == 0 || rc == -EBADMSG || rc == -ENOENT || rc == -EINVAL,
			      "cut %zu: rc %d", cut, rc);
		if (rc == -EBADMSG)
			ck_assert_ptr_nonnull(strstr(err, "malformed Example at byte"));
		errors += rc != 0;
		int n = iterate_exact(ex.d, cut);
		ck_assert_msg(n >= 0 || n == -EBADMSG, "cut %zu: iter %d", cut, n);
	}
	/*
	 * Every proper prefix fails (cut 0 is an empty Example: -ENOENT), except
	 * the one that drops exactly the trailing 5-byte unknown field.
	 */
	ck_assert_uint_eq(errors, ex.len - 1);
	cmn_schema_free(s);
	pb_free(&ex);
}
END_TEST

START_TEST(test_bit_flips_never_overread)
{
	struct pb ex = rich_example();
	struct cmn_schema *s = schema(RICH_SPEC);
	float ox[5];
	int64_t oy[3];
	uint8_t om[4];
	void *fixed[6] = {ox, oy, NULL, NULL, om, NULL};
	struct arena a = {0};
	struct cmn_ex_sink sink = {fixed, arena_reserve, &a};
	char err[256];
	uint8_t *m = malloc(ex.len);
	size_t ok = 0, bad = 0;
	for (size_t bit = 0; bit < ex.len * 8; bit++) {
		memcpy(m, ex.d, ex.len);
		m[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		int rc = decode_exact(s, m, ex.len, &sink, err, sizeof(err));
		ck_assert_msg(rc == 0 || rc == -EBADMSG || rc == -ENOENT || rc == -EINVAL ||
				  rc == -ERANGE,
			      "bit %zu: rc %d", bit, rc);
		if (rc)
			ck_assert_msg(err[0] != '\0', "bit %zu: error without a message", bit);
		rc == 0 ? ok++ : bad++;
		iterate_exact(m, ex.len);
	}
	/* Both outcomes occur: flips in values decode, flips in lengths do not. */
	ck_assert_uint_gt(ok, 0);
	ck_assert_uint_gt(bad, 0);
	free(m);
	cmn_schema_free(s);
	pb_free(&ex);
}
END_TEST

/* Hand-made broken messages and the error each must give. */
static const struct {
	const char *what;
	const char *bytes;
	size_t len;
	const char *msg;
} malformed[] = {
    {"varint of 11 bytes", "\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12,
     "byte 1: varint longer than 10 bytes"},
    {"varint cut short", "\x08\xff\xff", 3, "byte 1: varint cut short"},
    {"tag cut short", "\x80", 1, "byte 0: varint cut short"},
    {"length past end", "\x0a\x05\x0a\x01", 4, "byte 1: length 5 past end of message (2 left)"},
    {"huge length", "\x0a\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 10, "past end of message"},
    {"group start", "\x0b\x0c", 2, "field 1 is a group (wire type 3)"},
    {"group end", "\x0c", 1, "field 1 is a group (wire type 4)"},
    {"wire type 6", "\x0e", 1, "field 1 has invalid wire type 6"},
    {"wire type 7", "\x17", 1, "field 2 has invalid wire type 7"},
    {"field number 0", "\x02\x00", 2, "byte 0: field number 0"},
    {"tag above 32 bits", "\x80\x80\x80\x80\x80\x01", 6, "above 32 bits"},
    {"fixed32 cut short", "\x15\x01\x02", 3, "32-bit field cut short"},
    {"fixed64 cut short", "\x11\x01\x02\x03", 4, "64-bit field cut short"},
    /* Example{features{entry{key "f", value{float_list{packed 5 bytes}}}}} */
    {"packed float of 4 bytes (valid)",
     "\x0a\x0f\x0a\x0d\x0a\x01"
     "f"
     "\x12\x08\x12\x06\x0a\x04\x00\x00\x80\x3f",
     17, "ok"},
    {"packed float of 5 bytes",
     "\x0a\x10\x0a\x0e\x0a\x01"
     "f"
     "\x12\x09\x12\x07\x0a\x05\x00\x00\x80\x3f\x00",
     18, "byte 11: packed float payload of 5 bytes is not a multiple of 4"},
    {"packed varint cut short",
     "\x0a\x0c\x0a\x0a\x0a\x01"
     "f"
     "\x12\x05\x1a\x03\x0a\x01\x80",
     14, "byte 13: varint cut short by the end of its message (1 bytes left)"},
    {"bad field inside the list",
     "\x0a\x0b\x0a\x09\x0a\x01"
     "f"
     "\x12\x04\x12\x02\x0f\x00",
     13, "invalid wire type 7"},
    {"entry overruns features", "\x0a\x03\x0a\x05\x0a", 5, "length 5 past end"},
};

START_TEST(test_malformed_cases)
{
	struct cmn_schema *s = schema("f:float32[1]");
	float out;
	void *fixed[1] = {&out};
	struct cmn_ex_sink sink = {fixed, NULL, NULL};
	char err[256];
	int rc = decode_exact(s, malformed[_i].bytes, malformed[_i].len, &sink, err, sizeof(err));
	if (strcmp(malformed[_i].msg, "ok") == 0) {
		ck_assert_msg(rc == 0, "%s: rc %d (%s)", malformed[_i].what, rc, err);
		ck_assert_float_eq(out, 1.0f);
	} else {
		ck_assert_msg(rc == -EBADMSG, "%s: rc %d (%s)", malformed[_i].what, rc, err);
		ck_assert_msg(strstr(err, malformed[_i].msg), "%s: message '%s' lacks '%s'",
			      malformed[_i].what, err, malformed[_i].msg);
		ck_assert_int_eq(iterate_exact(malformed[_i].bytes, malformed[_i].len), -EBADMSG);
	}
	cmn_schema_free(s);
}
END_TEST

START_TEST(test_iterator_sticky_error)
{
	/* After an error, every further call fails again. */
	const char bytes[] = "\x0a\x03\x0a\x05\x0a";
	struct cmn_ex_iter it;
	struct cmn_ex_feature f;
	char err[256];
	cmn_ex_iter_init(&it, bytes, 5);
	ck_assert_int_eq(cmn_ex_iter_next(&it, &f, err, sizeof(err)), -EBADMSG);
	ck_assert_int_eq(cmn_ex_iter_next(&it, &f, err, sizeof(err)), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(err, "already failed"));
	/* An empty buffer is an empty Example. */
	cmn_ex_iter_init(&it, bytes, 0);
	ck_assert_int_eq(cmn_ex_iter_next(&it, &f, err, sizeof(err)), 0);
	ck_assert_str_eq(cmn_ex_kind_name(CMN_EX_INT64_LIST), "int64_list");
}
END_TEST

/* ---- the canonical-layout fast path and the general walk agree ---------- */

START_TEST(test_fast_and_general_paths_agree)
{
	/*
	 * cmn_ex_encode() writes the canonical layout (entry = key, value;
	 * Feature = one list; list = one packed field), which the decoder
	 * recognizes directly.  The same values with an unknown field inside
	 * each Feature go through the general walk.  Both must decode alike,
	 * errors included.
	 */
	struct cmn_schema *s = schema("f:float32[3],i:int64[4],b:bytes,u:uint8[2],e:float32[]");
	float fv[3] = {1.5f, -0.0f, 3e-40f};
	int64_t iv[4] = {-1, 0, 127, INT64_MIN};
	struct cmn_ex_values v[5] = {{fv, 3, NULL, 0},
				     {iv, 4, NULL, 0},
				     {"abc", 3, NULL, 0},
				     {"\x07\x08", 2, NULL, 0},
				     {fv, 0, NULL, 0}};
	uint8_t canon[512];
	size_t clen;
	char err[256];
	ck_assert_int_eq(cmn_ex_encode(s, v, canon, sizeof(canon), &clen, err, sizeof(err)), 0);

	struct pb feats = {0}, empty = {0};
	const char *names[5] = {"f", "i", "b", "u", "e"};
	for (int k = 0; k < 5; k++) {
		struct pb list = {0}, feat = {0}, entry = {0};
		unsigned kind = k == 0 || k == 4 ? CMN_EX_FLOAT_LIST
				: k == 1	 ? CMN_EX_INT64_LIST
						 : CMN_EX_BYTES_LIST;
		if (k == 0)
			pb_float_list_packed(&list, fv, 3);
		else if (k == 1)
			pb_int64_list_packed(&list, iv, 4);
		else if (k == 2)
			pb_bytes(&list, 1, "abc", 3);
		else if (k == 3)
			pb_bytes(&list, 1, "\x07\x08", 2);
		pb_ld(&feat, kind, &list);
		pb_vfield(&feat, 9, 1); /* not canonical any more */
		pb_bytes(&entry, 1, names[k], 1);
		pb_ld(&entry, 2, &feat);
		pb_ld(&feats, 1, &entry);
		pb_free(&list);
		pb_free(&feat);
		pb_free(&entry);
	}
	struct pb gen = wrap(&feats);

	float f1[3], f2[3];
	int64_t i1[4], i2[4];
	uint8_t u1[2], u2[2];
	struct arena a1 = {0}, a2 = {0};
	void *fx1[5] = {f1, i1, NULL, u1, NULL}, *fx2[5] = {f2, i2, NULL, u2, NULL};
	struct cmn_ex_sink k1 = {fx1, arena_reserve, &a1}, k2 = {fx2, arena_reserve, &a2};
	ck_assert_int_eq(decode_exact(s, canon, clen, &k1, err, sizeof(err)), 0);
	ck_assert_int_eq(decode_exact(s, gen.d, gen.len, &k2, err, sizeof(err)), 0);
	ck_assert_int_eq(memcmp(f1, fv, sizeof(fv)), 0);
	ck_assert_int_eq(memcmp(f1, f2, sizeof(f1)), 0);
	ck_assert_int_eq(memcmp(i1, iv, sizeof(iv)), 0);
	ck_assert_int_eq(memcmp(i1, i2, sizeof(i1)), 0);
	ck_assert_int_eq(memcmp(u1, "\x07\x08", 2), 0);
	ck_assert_int_eq(memcmp(u1, u2, 2), 0);
	ck_assert_uint_eq(a1.n[2], 3);
	ck_assert_uint_eq(a2.n[2], 3);
	ck_assert_uint_eq(a1.items[2], a2.items[2]);
	ck_assert_int_eq(memcmp(a1.buf[2], a2.buf[2], 3), 0);
	ck_assert_uint_eq(a1.n[4], 0);
	ck_assert_uint_eq(a2.n[4], 0);

	/* The same type and count errors, with the same messages, either way. */
	const char *bad_specs[] = {"f:float32[4]", "i:float32[4]", "u:uint8[3]", "b:int64[]"};
	for (size_t k = 0; k < 4; k++) {
		struct cmn_schema *bs = schema(bad_specs[k]);
		char e1[256], e2[256];
		void *fx[1] = {canon}; /* never written: the checks fail first */
		struct cmn_ex_sink sk = {fx, arena_reserve, &a1};
		int r1 = decode_exact(bs, canon, clen, &sk, e1, sizeof(e1));
		int r2 = decode_exact(bs, gen.d, gen.len, &sk, e2, sizeof(e2));
		ck_assert_int_eq(r1, -EINVAL);
		ck_assert_int_eq(r2, -EINVAL);
		ck_assert_str_eq(e1, e2);
		cmn_schema_free(bs);
	}
	pb_free(&feats);
	pb_free(&empty);
	pb_free(&gen);
	cmn_schema_free(s);
}
END_TEST

/* ---- random round trips ------------------------------------------------ */

static uint64_t rng_next(uint64_t *st)
{
	uint64_t z = (*st += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

START_TEST(test_random_roundtrips)
{
	struct cmn_schema *s =
	    schema("a:float32[7],b:int64[5],c:int64[],d:bytes,e:uint8[3],f:float32[]");
	uint64_t st = 42;
	float a[7], f[40];
	int64_t b[5], c[40];
	uint8_t d[40], e[3];
	uint8_t buf[4096];
	for (int iter = 0; iter < 2000; iter++) {
		for (int k = 0; k < 7; k++) {
			uint32_t u = (uint32_t)rng_next(&st);
			memcpy(&a[k], &u, 4);
			if (isnan(a[k]))
				a[k] = 0;
		}
		for (int k = 0; k < 5; k++)
			b[k] = (int64_t)(rng_next(&st) >> (rng_next(&st) % 64));
		size_t nc = rng_next(&st) % 40, nd = rng_next(&st) % 40, nf = rng_next(&st) % 40;
		for (size_t k = 0; k < 40; k++) {
			c[k] = -(int64_t)(rng_next(&st) % 1000);
			d[k] = (uint8_t)rng_next(&st);
			f[k] = (float)k;
		}
		for (int k = 0; k < 3; k++)
			e[k] = (uint8_t)rng_next(&st);
		struct cmn_ex_values v[6] = {{a, 7, NULL, 0},  {b, 5, NULL, 0}, {c, nc, NULL, 0},
					     {d, nd, NULL, 0}, {e, 3, NULL, 0}, {f, nf, NULL, 0}};
		size_t len;
		char err[256];
		ck_assert_int_eq(cmn_ex_encode(s, v, buf, sizeof(buf), &len, err, sizeof(err)), 0);
		float oa[7];
		int64_t ob[5];
		uint8_t oe[3];
		void *fixed[6] = {oa, ob, NULL, NULL, oe, NULL};
		struct arena ar = {0};
		struct cmn_ex_sink sink = {fixed, arena_reserve, &ar};
		ck_assert_int_eq(decode_exact(s, buf, len, &sink, err, sizeof(err)), 0);
		ck_assert_int_eq(memcmp(oa, a, sizeof(a)), 0);
		ck_assert_int_eq(memcmp(ob, b, sizeof(b)), 0);
		ck_assert_int_eq(memcmp(oe, e, sizeof(e)), 0);
		ck_assert_uint_eq(ar.n[2], nc);
		ck_assert_int_eq(memcmp(ar.buf[2], c, nc * 8), 0);
		ck_assert_uint_eq(ar.n[3], nd);
		ck_assert_int_eq(memcmp(ar.buf[3], d, nd), 0);
		ck_assert_uint_eq(ar.n[5], nf);
		ck_assert_int_eq(memcmp(ar.buf[5], f, nf * 4), 0);
	}
	cmn_schema_free(s);
}
END_TEST

/* A Feature message holding one list of `kind`. */
static void pb_feature(struct pb *feat, unsigned kind, const struct pb *list)
{
	pb_ld(feat, kind, list);
}

/*
 * SequenceExample: context, and feature_lists decoded step by step with
 * protobuf's merge rules: a FeatureList value given twice in one entry
 * concatenates its steps; a repeated key keeps the last entry; a second
 * top-level feature_lists field merges its entries in.  Every truncation
 * of the record fails cleanly (-EBADMSG or a missing feature), never reads
 * outside it (decode_exact: ASan).
 */
START_TEST(test_sequence_example)
{
	struct pb ctx = {0}, fl1 = {0}, fl2 = {0}, fl_old = {0}, ent = {0}, lists = {0},
		  lists2 = {0}, ent2 = {0}, ent_old = {0}, fl_t = {0}, rec = {0};
	int64_t c = 7, st[6] = {1, 2, 3, 4, 5, 6}, old[2] = {9, 9};
	float tv[2] = {1.5f, -2.5f};
	struct pb l = {0}, f = {0};

	pb_int64_list_packed(&l, &c, 1);
	pb_entry(&ctx, "c", CMN_EX_INT64_LIST, &l);
	pb_reset(&l);
	for (int k = 0; k < 3; k++) { /* steps {1,2} {3,4} in one value, {5,6} in another */
		pb_int64_list_packed(&l, st + 2 * k, 2);
		pb_feature(&f, CMN_EX_INT64_LIST, &l);
		pb_ld(k < 2 ? &fl1 : &fl2, 1, &f);
		pb_reset(&l);
		pb_reset(&f);
	}
	pb_int64_list_unpacked(&l, old, 2);
	pb_feature(&f, CMN_EX_INT64_LIST, &l);
	pb_ld(&fl_old, 1, &f);
	pb_reset(&l);
	pb_reset(&f);
	pb_bytes(&ent_old, 1, "s", 1);
	pb_ld(&ent_old, 2, &fl_old);
	pb_bytes(&ent, 1, "s", 1);
	pb_ld(&ent, 2, &fl1);
	pb_ld(&ent, 2, &fl2);
	pb_ld(&lists, 1, &ent_old); /* replaced by the later entry of the same key */
	pb_ld(&lists, 1, &ent);
	for (int k = 0; k < 2; k++) {
		pb_float_list_unpacked(&l, tv + k, 1);
		pb_feature(&f, CMN_EX_FLOAT_LIST, &l);
		pb_ld(&fl_t, 1, &f);
		pb_reset(&l);
		pb_reset(&f);
	}
	pb_bytes(&ent2, 1, "t", 1);
	pb_ld(&ent2, 2, &fl_t);
	pb_ld(&lists2, 1, &ent2);
	pb_ld(&rec, 2, &lists);
	pb_ld(&rec, 1, &ctx);
	pb_ld(&rec, 2, &lists2);

	struct cmn_schema *s = schema("c:int64, sequence s:int64[2], sequence t:float32");
	int64_t cv = 0;
	void *fixed[3] = {&cv, NULL, NULL};
	struct arena *ar = calloc(1, sizeof(*ar));
	struct cmn_ex_sink sink = {fixed, arena_reserve, ar};
	char err[256];
	ck_assert_msg(decode_exact(s, rec.d, rec.len, &sink, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(cv, 7);
	ck_assert_uint_eq(ar->items[1], 3);
	ck_assert_uint_eq(ar->n[1], 6);
	ck_assert_int_eq(memcmp(ar->buf[1], st, sizeof(st)), 0);
	ck_assert_uint_eq(ar->items[2], 2);
	ck_assert_uint_eq(ar->n[2], 2);
	ck_assert_int_eq(memcmp(ar->buf[2], tv, sizeof(tv)), 0);
	/* the same bytes to an Example schema: refused, naming SequenceExample */
	struct cmn_schema *ex = schema("c:int64");
	ck_assert_int_eq(decode_exact(ex, rec.d, rec.len, &sink, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "tf.SequenceExample"), "%s", err);
	/* a step of another kind names the step */
	struct cmn_schema *bad = schema("sequence t:int64");
	ck_assert_int_eq(decode_exact(bad, rec.d, rec.len, &sink, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "'t': step 0: expected int64_list, found float_list"), "%s", err);
	/* every truncation: an error or a decode, never an overread */
	for (size_t cut = 0; cut < rec.len; cut++) {
		int rc = decode_exact(s, rec.d, cut, &sink, err, sizeof(err));
		ck_assert_msg(rc == 0 || rc == -EBADMSG || rc == -ENOENT || rc == -EINVAL,
			      "cut %zu: rc %d", cut, rc);
	}
	cmn_schema_free(bad);
	cmn_schema_free(ex);
	cmn_schema_free(s);
	free(ar);
	struct pb *all[] = {&ctx,  &fl1,     &fl2,  &fl_old, &ent, &lists, &lists2,
			    &ent2, &ent_old, &fl_t, &rec,    &l,   &f};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		pb_free(all[i]);
}
END_TEST

/* An unknown top-level field 2 that is no FeatureLists stays skipped (protobuf). */
START_TEST(test_unknown_field_2_not_sequence)
{
	struct pb l = {0}, feats = {0}, ex = {0};
	int64_t v = 3;
	pb_int64_list_packed(&l, &v, 1);
	pb_entry(&feats, "y", CMN_EX_INT64_LIST, &l);
	pb_ld(&ex, 1, &feats);
	pb_bytes(&ex, 2, "\x08\x01", 2); /* a message, but without a map entry */
	struct cmn_schema *s = schema("y:int64");
	int64_t y = 0;
	void *fixed[1] = {&y};
	struct cmn_ex_sink sink = {fixed, NULL, NULL};
	char err[256];
	ck_assert_msg(decode_exact(s, ex.d, ex.len, &sink, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(y, 3);
	cmn_schema_free(s);
	pb_free(&l);
	pb_free(&feats);
	pb_free(&ex);
}
END_TEST

/* A `record` schema hands the whole payload over, whatever it holds. */
START_TEST(test_record_payload)
{
	struct cmn_schema *s = schema("record payload:bytes");
	struct arena *ar = calloc(1, sizeof(*ar));
	struct cmn_ex_sink sink = {NULL, arena_reserve, ar};
	char err[256];
	static const uint8_t junk[] = {0xff, 0xff, 0xff, 0x00, 0x12};
	ck_assert_int_eq(decode_exact(s, junk, sizeof(junk), &sink, err, sizeof(err)), 0);
	ck_assert_uint_eq(ar->n[0], sizeof(junk));
	ck_assert_uint_eq(ar->items[0], 1);
	ck_assert_int_eq(memcmp(ar->buf[0], junk, sizeof(junk)), 0);
	ck_assert_int_eq(decode_exact(s, junk, 0, &sink, err, sizeof(err)), 0);
	ck_assert_uint_eq(ar->n[0], 0);
	ar->refuse = 1;
	ck_assert_int_eq(decode_exact(s, junk, sizeof(junk), &sink, err, sizeof(err)), -ENOBUFS);
	/* the encoder writes tf.Example only */
	size_t out_len;
	uint8_t buf[64];
	struct cmn_ex_values v = {.data = junk, .n = sizeof(junk)};
	ck_assert_uint_eq(cmn_ex_encoded_size(s, &v), 0);
	ck_assert_int_eq(cmn_ex_encode(s, &v, buf, sizeof(buf), &out_len, err, sizeof(err)),
			 -EINVAL);
	cmn_schema_free(s);
	free(ar);
}
END_TEST

static Suite *example_suite(void)
{
	Suite *s = suite_create("example");
	struct {
		const char *name;
		const TTest *fn;
	} cases[] = {
	    {"encode_decode_roundtrip", test_encode_decode_roundtrip},
	    {"encoder_errors", test_encoder_errors},
	    {"packed_unpacked_mixed", test_packed_unpacked_mixed},
	    {"negative_int64_ten_bytes", test_negative_int64_ten_bytes},
	    {"unknown_fields_skipped", test_unknown_fields_and_wrong_wire_types_skipped},
	    {"last_wins_and_merges", test_last_wins_and_merges},
	    {"missing_and_defaults", test_missing_and_defaults},
	    {"type_count_range_errors", test_type_count_range_errors},
	    {"skipped_features_not_touched", test_skipped_features_not_touched},
	    {"truncation_at_every_byte", test_truncation_at_every_byte},
	    {"bit_flips_never_overread", test_bit_flips_never_overread},
	    {"iterator_sticky_error", test_iterator_sticky_error},
	    {"random_roundtrips", test_random_roundtrips},
	    {"fast_and_general_paths_agree", test_fast_and_general_paths_agree},
	    {"sequence_example", test_sequence_example},
	    {"unknown_field_2_not_sequence", test_unknown_field_2_not_sequence},
	    {"record_payload", test_record_payload},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		TCase *tc = tcase_create(cases[i].name);
		tcase_add_test(tc, cases[i].fn);
		suite_add_tcase(s, tc);
	}
	TCase *tc = tcase_create("malformed_cases");
	tcase_add_loop_test(tc, test_malformed_cases, 0,
			    (int)(sizeof(malformed) / sizeof(malformed[0])));
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(example_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
