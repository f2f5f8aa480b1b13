/*
 * shuffle.c - the bounded shuffle buffer (see shuffle.h).
 *
 * Records are stored as one malloc'd block each; removal swaps the chosen
 * slot with the last one, so taking a random record is O(1).
 */
#include "sampler/shuffle.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct smp_shuffle {
	struct smp_rec *v; /* data pointers owned */
	size_t n, cap;
	size_t bytes, max_bytes;
	uint64_t rng;
};

static uint64_t next_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

int smp_shuffle_new(struct smp_shuffle **out, size_t cap_bytes, uint64_t seed)
{
	struct smp_shuffle *b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->max_bytes = cap_bytes ? cap_bytes : 1;
	b->rng = seed;
	*out = b;
	return 0;
}

void smp_shuffle_free(struct smp_shuffle *b)
{
	if (!b)
		return;
	for (size_t i = 0; i < b->n; i++)
		free((void *)b->v[i].data);
	free(b->v);
	free(b);
}

/* Hands one random record to sink; on success frees it. */
static int pop_one(struct smp_shuffle *b, smp_rec_sink sink, void *ctx)
{
	size_t i = (size_t)(next_rand(&b->rng) % b->n);
	struct smp_rec r = b->v[i];
	int rc = sink(&r, ctx);
	if (rc)
		return rc;
	b->v[i] = b->v[b->n - 1];
	b->n--;
	b->bytes -= r.len;
	free((void *)r.data);
	return 0;
}

int smp_shuffle_add(struct smp_shuffle *b, const struct smp_rec *r, smp_rec_sink sink, void *ctx)
{
	if (b->n == b->cap) {
		size_t nc = b->cap ? b->cap * 2 : 1024;
		struct smp_rec *nv = realloc(b->v, nc * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		b->v = nv;
		b->cap = nc;
	}
	uint8_t *copy = malloc(r->len ? r->len : 1);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, r->data, r->len);
	b->v[b->n] = *r;
	b->v[b->n].data = copy;
	b->n++;
	b->bytes += r->len;
	while (b->n > 1 && (b->bytes > b->max_bytes || b->n > SMP_SHUFFLE_MAX_RECORDS)) {
		int rc = pop_one(b, sink, ctx);
		if (rc == -EWOULDBLOCK)
			return 0; /* kept; the caller sheds the excess later */
		if (rc)
			return rc;
	}
	return 0;
}

int smp_shuffle_shed(struct smp_shuffle *b, smp_rec_sink sink, void *ctx)
{
	while (b->n > 1 && (b->bytes > b->max_bytes || b->n > SMP_SHUFFLE_MAX_RECORDS)) {
		int rc = pop_one(b, sink, ctx);
		if (rc)
			return rc;
	}
	return 0;
}

int smp_shuffle_drain(struct smp_shuffle *b, smp_rec_sink sink, void *ctx)
{
	while (b->n) {
		int rc = pop_one(b, sink, ctx);
		if (rc)
			return rc;
	}
	return 0;
}
