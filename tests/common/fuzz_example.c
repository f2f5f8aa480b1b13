/*
 * fuzz_example.c - libFuzzer target for the tf.Example decoder and the
 * schema parser (common/example.c, common/schema.c).
 *
 * The first input byte picks what the rest is fed to:
 *   0..191    an Example: walked with the iterator (every feature's values
 *             read into buffers of exactly the announced size), then decoded
 *             with one of a few schemas into exactly-sized rows and a
 *             ragged sink that checks the counts it is given; when the
 *             decode succeeds, every feature's values must equal what the
 *             iterator reads for the last entry of that name (a
 *             differential check of the two paths);
 *   192..255  a schema string for cmn_schema_parse(); a parsed schema is
 *             formatted and parsed again and must be equal.
 * Built with -fsanitize=fuzzer,address,undefined (tests/common/meson.build):
 * any read outside the input or the destinations is a crash.
 */
#include "common/example.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const specs[] = {
    "a:float32[2],b:int64[],c:bytes,d:uint8[3]=1,e:int64=5,f:float32[]=[]",
    "x_int:int64[10],x_float:float32[10],x_byte:bytes",
    "x:float32[4],y:int64[1],ids:int64[],img:bytes,m:uint8[]",
    "\xc3\xa9:uint8[2],s:float32=-1",
    "species:int64[1],culmen_length_mm:float32=0,u:uint8[4]",
};
#define NSPECS (sizeof(specs) / sizeof(specs[0]))

static struct cmn_schema *schemas[NSPECS];

struct sink_ctx {
	const struct cmn_schema *s;
	void *bufs[CMN_SCHEMA_MAX_FEATURES];
	size_t n[CMN_SCHEMA_MAX_FEATURES];
};

static void *reserve(void *vctx, size_t feature, size_t n, size_t items)
{
	struct sink_ctx *c = vctx;
	if (feature >= c->s->n || !c->s->feature[feature].ragged)
		abort();
	if (c->s->feature[feature].dtype != CMN_DT_BYTES && items != n &&
	    c->s->feature[feature].dtype != CMN_DT_UINT8)
		abort();
	free(c->bufs[feature]);
	/* Exactly the room asked for: an overrun trips ASan. */
	c->bufs[feature] = malloc(n * c->s->feature[feature].elem_size + 1);
	c->n[feature] = n;
	return c->bufs[feature];
}

/*
 * The values the iterator gives for the last entry named like schema
 * feature sf, converted as the decoder converts them.  Returns the element
 * count and a malloc'ed array in *out, -1 when the feature is absent or
 * has no list (the decoder then used the default), or -2 when the iterator
 * fails on an entry (the decoder does not look inside entries it skips).
 */
static long iter_values(const uint8_t *data, size_t size, const struct cmn_feature *sf,
			uint8_t **out)
{
	struct cmn_ex_iter it;
	struct cmn_ex_feature f, last;
	char err[256];
	int found = 0, rc;
	cmn_ex_iter_init(&it, data, size);
	while ((rc = cmn_ex_iter_next(&it, &f, err, sizeof(err))) == 1) {
		if (f.name_len == sf->name_len && memcmp(f.name, sf->name, f.name_len) == 0) {
			last = f;
			found = 1;
		}
	}
	if (rc < 0)
		return -2; /* an entry the decoder skipped is malformed: no comparison */
	if (!found || last.kind == CMN_EX_NONE)
		return -1;
	size_t bytes = last.kind == CMN_EX_BYTES_LIST	? last.n_bytes
		       : last.kind == CMN_EX_FLOAT_LIST ? 4 * last.n_values
							: 8 * last.n_values;
	uint8_t *v = malloc(bytes + 1);
	cmn_ex_feature_read(&last, v, NULL);
	if (sf->dtype == CMN_DT_UINT8 && last.kind == CMN_EX_INT64_LIST) {
		for (size_t i = 0; i < last.n_values; i++)
			v[i] = v[8 * i]; /* low byte, little-endian */
	}
	*out = v;
	return (long)(last.kind == CMN_EX_BYTES_LIST ? last.n_bytes : last.n_values);
}

/* After a successful decode: each feature equals the iterator's reading. */
static void cross_check(const uint8_t *data, size_t size, const struct cmn_schema *s,
			void *const *fixed, const struct sink_ctx *c)
{
	for (size_t i = 0; i < s->n; i++) {
		const struct cmn_feature *sf = &s->feature[i];
		const uint8_t *got = sf->ragged ? c->bufs[i] : fixed[i];
		size_t n = sf->ragged ? c->n[i] : (size_t)sf->count;
		uint8_t *want = NULL;
		long wn = iter_values(data, size, sf, &want);
		if (wn == -2)
			return;
		if (wn < 0) {
			if (!sf->has_default)
				abort(); /* decoded a missing feature without a default */
			if (sf->ragged) {
				if (n != 0)
					abort();
				continue;
			}
			for (size_t k = 0; k < n; k++)
				if (memcmp(got + k * sf->elem_size, &sf->def, sf->elem_size) != 0)
					abort();
			continue;
		}
		if ((size_t)wn != n)
			abort();
		if (n && memcmp(got, want, n * sf->elem_size) != 0)
			abort();
		free(want);
	}
}

static void fuzz_example(const uint8_t *data, size_t size, unsigned pick)
{
	/* The iterator, reading every feature's values. */
	struct cmn_ex_iter it;
	struct cmn_ex_feature f;
	char err[256];
	cmn_ex_iter_init(&it, data, size);
	for (int guard = 0; guard < 100000; guard++) {
		int rc = cmn_ex_iter_next(&it, &f, err, sizeof(err));
		if (rc <= 0)
			break;
		size_t bytes = f.kind == CMN_EX_BYTES_LIST   ? f.n_bytes
			       : f.kind == CMN_EX_FLOAT_LIST ? 4 * f.n_values
							     : 8 * f.n_values;
		if (f.name_len > size || (f.packed && f.packed_len > size))
			abort();
		void *dst = malloc(bytes + 1);
		size_t *lens = malloc((f.n_values + 1) * sizeof(size_t));
		cmn_ex_feature_read(&f, dst, lens);
		free(dst);
		free(lens);
	}

	/* The schema decoder. */
	const struct cmn_schema *s = schemas[pick % NSPECS];
	void *fixed[CMN_SCHEMA_MAX_FEATURES];
	struct sink_ctx c = {.s = s};
	for (size_t i = 0; i < s->n; i++)
		fixed[i] = s->feature[i].ragged ? NULL : malloc(s->feature[i].row_bytes);
	struct cmn_ex_sink sink = {fixed, reserve, &c};
	int rc = cmn_ex_decode(s, data, size, &sink, err, sizeof(err));
	if (rc != 0 && err[0] == '\0')
		abort(); /* every error has a message */
	if (rc == 0)
		cross_check(data, size, s, fixed, &c);
	for (size_t i = 0; i < s->n; i++) {
		free(fixed[i]);
		free(c.bufs[i]);
	}
}

static void fuzz_schema(const uint8_t *data, size_t size)
{
	char *spec = malloc(size + 1);
	memcpy(spec, data, size);
	spec[size] = '\0';
	struct cmn_schema *s;
	char err[256];
	if (cmn_schema_parse(spec, &s, err, sizeof(err)) == 0) {
		char buf[8192];
		size_t n = cmn_schema_format(s, buf, sizeof(buf));
		if (n < sizeof(buf)) {
			struct cmn_schema *s2;
			if (cmn_schema_parse(buf, &s2, err, sizeof(err)) != 0)
				abort(); /* the canonical form must parse */
			if (s2->n != s->n)
				abort();
			for (size_t i = 0; i < s->n; i++)
				if (s2->feature[i].count != s->feature[i].count ||
				    s2->feature[i].dtype != s->feature[i].dtype ||
				    strcmp(s2->feature[i].name, s->feature[i].name) != 0 ||
				    cmn_schema_find(s2, s->feature[i].name,
						    s->feature[i].name_len) != (int)i)
					abort();
			cmn_schema_free(s2);
		}
		cmn_schema_free(s);
	} else if (err[0] == '\0') {
		abort();
	}
	free(spec);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!schemas[0]) {
		char err[256];
		for (size_t i = 0; i < NSPECS; i++)
			if (cmn_schema_parse(specs[i], &schemas[i], err, sizeof(err)))
				abort();
	}
	if (size == 0)
		return 0;
	if (data[0] < 192) {
		/* A copy of exactly the input, so reads past it are caught. */
		uint8_t *copy = malloc(size - 1 ? size - 1 : 1);
		memcpy(copy, data + 1, size - 1);
		fuzz_example(copy, size - 1, data[0]);
		free(copy);
	} else {
		fuzz_schema(data + 1, size - 1);
	}
	return 0;
}
