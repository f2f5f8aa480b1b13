/*
 * listing.c - building and freeing a listing.
 *
 * Owns nothing beyond the listing it is given.  Does not fetch anything: the
 * back-ends (file_list.c, http_list.c, s3.c) fill listings through
 * smp__listing_add(), which enforces the key and count caps of listing.h.
 * Strings: each object's key and etag are copied end to end into the
 * listing's blocks (struct smp__strblk), 4 KiB for the first and doubling up
 * to SMP_LIST_BLOCK, so a listing of N objects costs its array, the bytes of
 * its strings and a malloc per block, not two mallocs per object.  No
 * locking: a listing belongs to one thread.
 */
#include "sampler/listing_i.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define SMP_LIST_BLOCK_MIN ((size_t)4 << 10)
#define SMP_LIST_BLOCK	   ((size_t)1 << 20) /* the largest block, but for one long string pair */

struct smp__strblk {
	struct smp__strblk *next; /* the block filled before this one */
	size_t used, cap;	  /* bytes of data[] */
	char data[];
};

/*
 * Room for n bytes in l's newest block, a new block if it has none.
 * Returns where they go (not yet counted as used), or NULL (out of memory:
 * l unchanged).
 */
static char *block_room(struct smp_listing *l, size_t n)
{
	struct smp__strblk *b = l->blk;
	if (b && b->cap - b->used >= n)
		return b->data + b->used;
	size_t cap = b ? b->cap * 2 : SMP_LIST_BLOCK_MIN;
	if (cap > SMP_LIST_BLOCK)
		cap = SMP_LIST_BLOCK;
	if (cap < n)
		cap = n;
	struct smp__strblk *nb = malloc(sizeof(*nb) + cap);
	if (!nb)
		return NULL;
	nb->next = b;
	nb->used = 0;
	nb->cap = cap;
	l->blk = nb;
	return nb->data;
}

int smp__listing_add(struct smp_listing *l, const char *key, size_t keylen, uint64_t size,
		     const char *etag)
{
	if (keylen == 0 || keylen > SMP_KEY_MAX || memchr(key, '\0', keylen))
		return -EINVAL;
	if (l->n >= SMP_LIST_MAX_OBJECTS)
		return -E2BIG;
	if (l->n == l->cap) {
		size_t nc = l->cap ? l->cap * 2 : 256;
		struct smp_object *v = realloc(l->v, nc * sizeof(*v));
		if (!v)
			return -ENOMEM;
		l->v = v;
		l->cap = nc;
	}
	if (!etag)
		etag = "";
	size_t el = strlen(etag);
	char *p = block_room(l, keylen + 1 + el + 1);
	if (!p)
		return -ENOMEM;
	struct smp_object *o = &l->v[l->n++];
	o->key = p;
	memcpy(p, key, keylen);
	p[keylen] = '\0';
	memcpy(p + keylen + 1, etag, el + 1); /* smp_object_etag */
	o->size = size;
	l->blk->used += keylen + 1 + el + 1;
	return 0;
}

void smp_listing_free(struct smp_listing *l)
{
	struct smp__strblk *b = l->blk;
	while (b) {
		struct smp__strblk *next = b->next;
		free(b);
		b = next;
	}
	free(l->v);
	memset(l, 0, sizeof(*l));
}

static int cmp_obj(const void *a, const void *b)
{
	return strcmp(((const struct smp_object *)a)->key, ((const struct smp_object *)b)->key);
}

void smp__listing_sort_unique(struct smp_listing *l)
{
	if (l->n > 1) /* qsort(NULL, 0) is undefined: an empty listing */
		qsort(l->v, l->n, sizeof(l->v[0]), cmp_obj);
	/* A key listed twice (MANIFEST duplicates) is one object. */
	size_t w = 0;
	for (size_t i = 0; i < l->n; i++) {
		if (w > 0 && !strcmp(l->v[w - 1].key, l->v[i].key))
			continue; /* its strings stay in the blocks until smp_listing_free */
		l->v[w++] = l->v[i];
	}
	l->n = w;
}

char *smp__with_slash(const char *s, size_t n)
{
	bool add = n == 0 || s[n - 1] != '/';
	char *r = malloc(n + 2);
	if (!r)
		return NULL;
	memcpy(r, s, n);
	if (add)
		r[n++] = '/';
	r[n] = '\0';
	return r;
}
