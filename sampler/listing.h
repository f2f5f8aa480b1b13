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
	/*
	 * This node's share (DESIGN, Scale-out): smp__listing_add keeps a key
	 * only when smp_listing_in_share() says so, so a node of a many-node
	 * job holds, sorts and records its share, not the whole dataset.
	 * world_size 0 or 1 keeps everything.  Set before the first add.
	 */
	uint32_t rank, world_size;
	uint64_t seen; /* objects the source listed, in the share or not (no sidecar) */
};

/* A stable 64-bit hash of key[0..n) (FNV-1a): the rank/world_size split. */
static inline uint64_t smp_key_hash_n(const char *key, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 offset basis */
	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)key[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* smp_key_hash_n over a NUL-terminated key. */
static inline uint64_t smp_key_hash(const char *key)
{
	return smp_key_hash_n(key, strlen(key));
}

/* 1 when key[0..n) ends in ".idx" after at least one byte: an index sidecar. */
static inline int smp_key_is_sidecar(const char *key, size_t n)
{
	return n > 4 && !memcmp(key + n - 4, ".idx", 4);
}

/*
 * Whether key[0..n) is in share rank of world_size: its hash modulo
 * world_size is rank.  A sidecar "x.idx" is in the share of "x", so an
 * object and its index are always kept or dropped together.
 */
static inline int smp_listing_in_share(uint32_t rank, uint32_t world_size, const char *key,
				       size_t n)
{
	if (world_size <= 1)
		return 1;
	if (smp_key_is_sidecar(key, n))
		n -= 4;
	return smp_key_hash_n(key, n) % world_size == rank;
}

/* The object's ETag (s3), or "mtime-size" (http, file); "" when none. */
static inline const char *smp_object_etag(const struct smp_object *o)
{
	return o->key + strlen(o->key) + 1;
}

/* Frees the array and every block; *l is zeroed (ready for reuse). */
void smp_listing_free(struct smp_listing *l);

#endif
