/*
 * listing.h - what a listing of a source is: objects (key, size, etag) under
 * hard caps on what a server can make us hold.
 *
 * Keys are relative to the source URL's prefix and are data (DESIGN 7): they
 * are only ever percent-encoded into URLs, never turned into local paths.
 */
#ifndef RC_SAMPLER_LISTING_H
#define RC_SAMPLER_LISTING_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/arena.h"

/* Caps on what a server can make us hold. */
#define SMP_LIST_BODY_CAP    ((size_t)64 << 20) /* one listing response (JSON, MANIFEST, XML page) */
#define SMP_LIST_MAX_OBJECTS 50000000u		/* objects in one listing */
#define SMP_LIST_MAX_DEPTH   32			/* autoindex / directory nesting */
#define SMP_LIST_MAX_PAGES   1000000u		/* ListObjectsV2 pages */
#define SMP_KEY_MAX	     1024		/* bytes of one key (S3's own limit) */
#define SMP_ETAG_MAX	     160 /* bytes of a kept ETag, NUL included; a longer one is not kept */

struct smp_object {
	char *key; /* relative to the source prefix; in the listing's blocks, followed
		      there by the etag: smp_object_etag() */
	uint64_t size;
};

/*
 * The keys and etags live in the listing's arena (common/arena.h),
 * packed end to end (each key, its NUL, its etag, its NUL): one malloc per
 * block, not two per object, no malloc header or rounding per string, and
 * no etag pointer per object.  A string stays where it is until
 * smp_listing_free; an object dropped from v (a duplicate, a sidecar) leaves
 * its bytes in the block.
 */
struct smp_listing {
	struct smp_object *v; /* sorted by key (bytewise) once complete */
	size_t n, cap;
	struct cmn_arena strs;	      /* the keys' and etags' blocks; owned */
	char validator[SMP_ETAG_MAX]; /* what tells this listing from a later one without
				  listing again: the MANIFEST's ETag; "" when none
				  (smp_source_list_changed) */
};

/* The object's ETag (s3), or "mtime-size" (http, file); "" when none. */
static inline const char *smp_object_etag(const struct smp_object *o)
{
	return o->key + strlen(o->key) + 1;
}

/* Frees the array and every block; *l is zeroed (ready for reuse). */
void smp_listing_free(struct smp_listing *l);

#endif
