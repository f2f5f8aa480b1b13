/*
 * listing.c - building and freeing a listing.
 *
 * Owns nothing beyond the listing it is given.  Does not fetch anything: the
 * back-ends (file_list.c, http_list.c, s3.c) fill listings through
 * smp__listing_add(), which enforces the key and count caps of listing.h
 * and keeps only this node's share of the keys (struct smp_listing).
 * Strings: each object's key and etag are copied end to end into the
 * listing's arena (common/arena.h), so a listing of N objects costs its
 * array, the bytes of its strings and a malloc per block, not two mallocs
 * per object.  No locking: a listing belongs to one thread.
 */
#include "sampler/listing_i.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

int smp__listing_add(struct smp_listing *l, const char *key, size_t keylen, uint64_t size,
		     const char *etag)
{
	if (keylen == 0 || keylen > SMP_KEY_MAX || memchr(key, '\0', keylen))
		return -EINVAL;
	if (!smp_key_is_sidecar(key, keylen))
		l->seen++;
	if (!smp_listing_in_share(l->rank, l->world_size, key, keylen))
		return 0; /* another node's: neither held nor counted against the cap */
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
	char *p = cmn_arena_alloc(&l->strs, keylen + 1 + el + 1, 1);
	if (!p)
		return -ENOMEM;
	struct smp_object *o = &l->v[l->n++];
	o->key = p;
	memcpy(p, key, keylen);
	p[keylen] = '\0';
	memcpy(p + keylen + 1, etag, el + 1); /* smp_object_etag */
	o->size = size;
	return 0;
}

void smp_listing_free(struct smp_listing *l)
{
	cmn_arena_free(&l->strs);
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
