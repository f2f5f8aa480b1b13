/*
 * arena.h - a bump allocator in blocks, for many small things that live and
 * die together: a listing's keys, the sampling plan's objects and their
 * keys.  One malloc per block (4 KiB for the first, doubling up to
 * CMN_ARENA_BLOCK), no header or rounding per allocation; nothing is freed
 * but the whole arena.  What it hands out never moves.
 *
 * Not thread-safe: an arena belongs to one thread at a time.
 */
#ifndef RC_COMMON_ARENA_H
#define RC_COMMON_ARENA_H

#include <stddef.h>

#define CMN_ARENA_BLOCK ((size_t)1 << 20) /* the largest block, but for one larger request */

struct cmn_arena_blk;

struct cmn_arena {
	struct cmn_arena_blk *blk; /* newest first; owned */
};

/*
 * n bytes aligned to `align` (a power of two, at most 16), not zeroed.
 * NULL when out of memory (the arena is unchanged).
 */
void *cmn_arena_alloc(struct cmn_arena *a, size_t n, size_t align);

/* The same, zeroed. */
void *cmn_arena_zalloc(struct cmn_arena *a, size_t n, size_t align);

/* A copy of the n bytes at s with a NUL after them, or NULL. */
char *cmn_arena_strndup(struct cmn_arena *a, const char *s, size_t n);

/* Bytes of the blocks held (what the arena costs). */
size_t cmn_arena_bytes(const struct cmn_arena *a);

/* Frees every block; *a is empty again (ready for reuse). */
void cmn_arena_free(struct cmn_arena *a);

#endif
