/*
 * shuffle.c - the bounded shuffle buffer (see shuffle.h).
 *
 * Records are stored as one block each (a record's data may start inside
 * its block: blocks taken over from the push decoder begin with the
 * record's header); removal swaps the chosen slot with the last one, so
 * taking a random record is O(1).  Blocks of records that
 * left are kept in a small pool (POOL_BLOCKS blocks, POOL_BYTES bytes) and
 * reused for records of similar size: in steady state every record in means
 * one out, and recycling the block avoids a malloc/free pair that glibc
 * turns into fresh, zero-filled pages for large records (measured: ~15 % of
 * an ingest's CPU, docs/bench-sampler.md).  A sink may keep a record's
 * block (SMP_REC_KEPT: a shard writer writes it from there on a thread of
 * its own); it comes back through smp_shuffle_give_back, from that thread,
 * into `back`, which the sampler's thread moves into the pool.
 *
 * Threads: the sampler's thread only, but for smp_shuffle_give_back; back_mu
 * protects back, nback, back_cap and returned.
 */
#include "sampler/shuffle.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define POOL_BLOCKS 64
#define POOL_BYTES  ((size_t)64 << 20)

struct block {
	uint8_t *p;
	size_t cap;
};

struct smp_shuffle {
	struct smp_rec *v; /* data points inside vblock[i] */
	uint8_t **vblock;  /* [cap]: each record's block (owned) */
	size_t *vcap;	   /* [cap]: capacity of each record's block */
	size_t n, cap;
	size_t bytes, max_bytes;
	uint64_t rng;
	struct block pool[POOL_BLOCKS];
	size_t npool, pool_bytes;
	pthread_mutex_t back_mu;
	struct block *back; /* blocks given back, not yet in the pool */
	size_t nback, back_cap;
	size_t returned; /* blocks given back since the last collect_back (freed ones too) */
	size_t kept;	 /* blocks kept by sinks, less those collected (sampler's thread) */
};

static void block_put(struct smp_shuffle *b, uint8_t *p, size_t cap);

/* Moves the blocks given back into the pool (or frees them). */
static void collect_back(struct smp_shuffle *b)
{
	pthread_mutex_lock(&b->back_mu);
	for (size_t i = 0; i < b->nback; i++)
		block_put(b, b->back[i].p, b->back[i].cap);
	b->kept -= b->returned;
	b->nback = 0;
	b->returned = 0;
	pthread_mutex_unlock(&b->back_mu);
}

/* A block of at least len bytes, from the pool when one fits without wasting half. */
static uint8_t *block_get(struct smp_shuffle *b, size_t len, size_t *cap)
{
	uint8_t *p = smp_shuffle_spare(b, len, cap);
	if (p)
		return p;
	*cap = len ? len : 1;
	return malloc(*cap);
}

static void block_put(struct smp_shuffle *b, uint8_t *p, size_t cap)
{
	if (b->npool < POOL_BLOCKS && b->pool_bytes + cap <= POOL_BYTES) {
		b->pool[b->npool++] = (struct block){p, cap};
		b->pool_bytes += cap;
		return;
	}
	free(p);
}

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
	pthread_mutex_init(&b->back_mu, NULL);
	*out = b;
	return 0;
}

void smp_shuffle_set_cap(struct smp_shuffle *b, size_t cap_bytes)
{
	b->max_bytes = cap_bytes ? cap_bytes : 1;
}

void smp_shuffle_free(struct smp_shuffle *b)
{
	if (!b)
		return;
	collect_back(b);
	assert(b->kept == 0); /* every kept block came back */
	for (size_t i = 0; i < b->n; i++)
		free(b->vblock[i]);
	for (size_t i = 0; i < b->npool; i++)
		free(b->pool[i].p);
	free(b->back);
	pthread_mutex_destroy(&b->back_mu);
	free(b->v);
	free(b->vblock);
	free(b->vcap);
	free(b);
}

/* Hands one random record to sink; on success frees it. */
static int pop_one(struct smp_shuffle *b, smp_rec_sink sink, void *ctx)
{
	size_t i = (size_t)(next_rand(&b->rng) % b->n);
	struct smp_rec r = b->v[i];
	size_t rcap = b->vcap[i];
	uint8_t *blk = b->vblock[i];
	r.block = blk;
	r.block_cap = rcap;
	int rc = sink(&r, ctx);
	if (rc < 0)
		return rc;
	b->v[i] = b->v[b->n - 1];
	b->vblock[i] = b->vblock[b->n - 1];
	b->vcap[i] = b->vcap[b->n - 1];
	b->n--;
	b->bytes -= r.len;
	if (rc == SMP_REC_KEPT)
		b->kept++;
	else
		block_put(b, blk, rcap);
	return 0;
}

/* Room for one more record in the arrays.  0 or -ENOMEM. */
static int grow(struct smp_shuffle *b)
{
	if (b->n < b->cap)
		return 0;
	size_t nc = b->cap ? b->cap * 2 : 1024;
	struct smp_rec *nv = realloc(b->v, nc * sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	b->v = nv;
	uint8_t **nb = realloc(b->vblock, nc * sizeof(*nb));
	if (!nb)
		return -ENOMEM;
	b->vblock = nb;
	size_t *nvc = realloc(b->vcap, nc * sizeof(*nvc));
	if (!nvc)
		return -ENOMEM;
	b->vcap = nvc;
	b->cap = nc;
	return 0;
}

/* Stores r (data inside block) and sheds records while over the caps. */
static int insert(struct smp_shuffle *b, const struct smp_rec *r, uint8_t *block, size_t bcap,
		  smp_rec_sink sink, void *ctx)
{
	b->v[b->n] = *r;
	b->vblock[b->n] = block;
	b->vcap[b->n] = bcap;
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

int smp_shuffle_add(struct smp_shuffle *b, const struct smp_rec *r, smp_rec_sink sink, void *ctx)
{
	if (grow(b))
		return -ENOMEM;
	size_t bcap;
	uint8_t *copy = block_get(b, r->len, &bcap);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, r->data, r->len);
	struct smp_rec c = *r;
	c.data = copy;
	return insert(b, &c, copy, bcap, sink, ctx);
}

int smp_shuffle_add_block(struct smp_shuffle *b, const struct smp_rec *r, void *block, size_t cap,
			  smp_rec_sink sink, void *ctx)
{
	if (grow(b)) {
		free(block);
		return -ENOMEM;
	}
	return insert(b, r, block, cap, sink, ctx);
}

void smp_shuffle_give_back(struct smp_shuffle *b, void *block, size_t cap)
{
	pthread_mutex_lock(&b->back_mu);
	if (b->nback == b->back_cap) {
		size_t nc = b->back_cap ? b->back_cap * 2 : 64;
		struct block *nb = realloc(b->back, nc * sizeof(*nb));
		if (!nb) { /* cannot queue it: not reused */
			b->returned++;
			pthread_mutex_unlock(&b->back_mu);
			free(block);
			return;
		}
		b->back = nb;
		b->back_cap = nc;
	}
	b->back[b->nback++] = (struct block){block, cap};
	b->returned++;
	pthread_mutex_unlock(&b->back_mu);
}

void *smp_shuffle_spare(struct smp_shuffle *b, size_t len, size_t *cap)
{
	collect_back(b);
	for (size_t i = 0; i < b->npool; i++) {
		if (b->pool[i].cap >= len && b->pool[i].cap / 2 <= len) {
			uint8_t *p = b->pool[i].p;
			*cap = b->pool[i].cap;
			b->pool_bytes -= *cap;
			b->pool[i] = b->pool[--b->npool];
			return p;
		}
	}
	*cap = 0;
	return NULL;
}

void smp_shuffle_unspare(struct smp_shuffle *b, void *block, size_t cap)
{
	if (block)
		block_put(b, block, cap);
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

size_t smp_shuffle_count(const struct smp_shuffle *b)
{
	return b ? b->n : 0;
}

void smp_shuffle_each(const struct smp_shuffle *b, void (*fn)(const struct smp_rec *r, void *ctx),
		      void *ctx)
{
	for (size_t i = 0; b && i < b->n; i++)
		fn(&b->v[i], ctx);
}
