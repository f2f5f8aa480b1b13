/*
 * pb_build.h - a tiny protobuf wire writer for tests: builds Examples by
 * hand, including what the encoder never writes (unpacked values, unknown
 * fields, duplicate keys, odd field order).  Test-only; header-only.
 *
 * A pb is a growable byte buffer; pb_ld() appends a length-delimited field
 * whose payload is another pb.  Allocation failures abort (tests only).
 */
#ifndef RC_TESTS_PB_BUILD_H
#define RC_TESTS_PB_BUILD_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pb {
	uint8_t *d;
	size_t len, cap;
};

static inline void pb_raw(struct pb *b, const void *p, size_t n)
{
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 64;
		while (cap < b->len + n)
			cap *= 2;
		b->d = realloc(b->d, cap);
		if (!b->d)
			abort();
		b->cap = cap;
	}
	if (n)
		memcpy(b->d + b->len, p, n);
	b->len += n;
}

static inline void pb_varint(struct pb *b, uint64_t v)
{
	uint8_t t[10];
	size_t n = 0;
	while (v >= 0x80) {
		t[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	t[n++] = (uint8_t)v;
	pb_raw(b, t, n);
}

static inline void pb_tag(struct pb *b, uint32_t num, unsigned wt)
{
	pb_varint(b, ((uint64_t)num << 3) | wt);
}

/* Length-delimited field with raw bytes. */
static inline void pb_bytes(struct pb *b, uint32_t num, const void *p, size_t n)
{
	pb_tag(b, num, 2);
	pb_varint(b, n);
	pb_raw(b, p, n);
}

/* Length-delimited field whose payload is the message `m` (m is kept). */
static inline void pb_ld(struct pb *b, uint32_t num, const struct pb *m)
{
	pb_bytes(b, num, m->d, m->len);
}

static inline void pb_fixed32(struct pb *b, uint32_t num, uint32_t v)
{
	pb_tag(b, num, 5);
	pb_raw(b, &v, 4);
}

static inline void pb_fixed64(struct pb *b, uint32_t num, uint64_t v)
{
	pb_tag(b, num, 1);
	pb_raw(b, &v, 8);
}

static inline void pb_vfield(struct pb *b, uint32_t num, uint64_t v)
{
	pb_tag(b, num, 0);
	pb_varint(b, v);
}

static inline void pb_free(struct pb *b)
{
	free(b->d);
	b->d = NULL;
	b->len = b->cap = 0;
}

static inline void pb_reset(struct pb *b)
{
	b->len = 0;
}

/* ---- Example pieces --------------------------------------------------- */

/* FloatList with the values packed in one field. */
static inline void pb_float_list_packed(struct pb *list, const float *v, size_t n)
{
	pb_bytes(list, 1, v, 4 * n);
}

/* FloatList with one fixed32 field per value. */
static inline void pb_float_list_unpacked(struct pb *list, const float *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t u;
		memcpy(&u, &v[i], 4);
		pb_fixed32(list, 1, u);
	}
}

static inline void pb_int64_list_packed(struct pb *list, const int64_t *v, size_t n)
{
	struct pb p = {0};
	for (size_t i = 0; i < n; i++)
		pb_varint(&p, (uint64_t)v[i]);
	pb_ld(list, 1, &p);
	pb_free(&p);
}

static inline void pb_int64_list_unpacked(struct pb *list, const int64_t *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		pb_vfield(list, 1, (uint64_t)v[i]);
}

/* Appends a map entry {key, value = Feature{kind: list}} to a Features message. */
static inline void pb_entry(struct pb *features, const char *key, unsigned kind,
			    const struct pb *list)
{
	struct pb feat = {0}, entry = {0};
	if (kind)
		pb_ld(&feat, kind, list);
	pb_bytes(&entry, 1, key, strlen(key));
	pb_ld(&entry, 2, &feat);
	pb_ld(features, 1, &entry);
	pb_free(&feat);
	pb_free(&entry);
}

/* Wraps a Features message into an Example. */
static inline void pb_example(struct pb *example, const struct pb *features)
{
	pb_ld(example, 1, features);
}

#endif
