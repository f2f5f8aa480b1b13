/*
 * listing_i.h - building a listing (listing.c), for the source back-ends.
 */
#ifndef RC_SAMPLER_LISTING_I_H
#define RC_SAMPLER_LISTING_I_H

#include "sampler/listing.h"

/*
 * Appends a copy of key[0..keylen) with size and etag (NULL: "") when the
 * key is in the listing's share (smp_listing_in_share; 0 and nothing held
 * when not), and counts it in l->seen unless it is a sidecar.  Returns 0,
 * -EINVAL (empty key, a NUL inside, over SMP_KEY_MAX bytes: checked in or
 * out of the share), -E2BIG (the listing already holds
 * SMP_LIST_MAX_OBJECTS), -ENOMEM; on failure *l holds the same objects (its
 * array or blocks may have grown).
 */
int smp__listing_add(struct smp_listing *l, const char *key, size_t keylen, uint64_t size,
		     const char *etag);

/* Sorts by key (bytewise) and drops all but the first of equal keys. */
void smp__listing_sort_unique(struct smp_listing *l);

/*
 * A malloc'd copy of s[0..n) ending in exactly one '/' added if missing (a
 * prefix or a directory URL).  NULL when out of memory.
 */
char *smp__with_slash(const char *s, size_t n);

#endif
