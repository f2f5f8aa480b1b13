/*
 * arena.c - the bump allocator of arena.h.
 *
 * Each block records how much of it is used; an allocation takes the next
 * aligned bytes of the newest block, or a new block when they do not fit
 * (the rest of the old one is left unused).
 */
#include "common/arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CMN_ARENA_BLOCK_MIN ((size_t)4 << 10)

struct cmn_arena_blk {
	struct cmn_arena_blk *next; /* the block filled before this one */
	size_t used, cap;	    /* bytes of data[] */
	_Alignas(16) unsigned char data[];
};

void *cmn_arena_alloc(struct cmn_arena *a, size_t n, size_t align)
{
	struct cmn_arena_blk *b = a->blk;
	if (b) {
		size_t at = (b->used + align - 1) & ~(align - 1);
		if (at <= b->cap && b->cap - at >= n) {
			b->used = at + n;
			return b->data + at;
		}
	}
	size_t cap = b ? b->cap * 2 : CMN_ARENA_BLOCK_MIN;
	if (cap > CMN_ARENA_BLOCK)
		cap = CMN_ARENA_BLOCK;
	if (cap < n)
		cap = n;
	if (cap > SIZE_MAX - sizeof(*b))
		return NULL;
	struct cmn_arena_blk *nb = malloc(sizeof(*nb) + cap);
	if (!nb)
		return NULL;
	nb->next = b;
	nb->used = n;
	nb->cap = cap;
	a->blk = nb;
	return nb->data;
}

void *cmn_arena_zalloc(struct cmn_arena *a, size_t n, size_t align)
{
	void *p = cmn_arena_alloc(a, n, align);
	if (p)
		memset(p, 0, n);
	return p;
}

char *cmn_arena_strndup(struct cmn_arena *a, const char *s, size_t n)
{
	char *p = n < SIZE_MAX ? cmn_arena_alloc(a, n + 1, 1) : NULL;
	if (!p)
		return NULL;
	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

size_t cmn_arena_bytes(const struct cmn_arena *a)
{
	size_t n = 0;
	for (const struct cmn_arena_blk *b = a->blk; b; b = b->next)
		n += sizeof(*b) + b->cap;
	return n;
}

void cmn_arena_free(struct cmn_arena *a)
{
	struct cmn_arena_blk *b = a->blk;
	while (b) {
		struct cmn_arena_blk *next = b->next;
		free(b);
		b = next;
	}
	a->blk = NULL;
}
