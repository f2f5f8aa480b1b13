/*
 * policy.h - eviction policies: pure victim choice over shard statistics.
 *
 * A policy never touches disk, SQL or FUSE: it is given an array of
 * struct evc_shard (a snapshot of the catalog's statistics) and returns
 * indices into it.  The same code runs in the daemon's evictor, in
 * `rollcache simulate` and in the unit tests.
 *
 * Victim order per policy (ties always broken by the next key, last by id):
 *   fifo    oldest admitted first: (created, id)            - the rolling window
 *   lru     least recently used first: (last_use, created, id)
 *   uses    most used first: (-full_reads, created, id)    - retire what was seen most
 *   random  a seeded shuffle: (mix(seed, id), id); the order of a shard does
 *           not depend on the order of the input array, only on seed and id.
 *           plan.c mixes the epoch into the seed, so each boundary draws anew
 *   none    nothing is a victim (freeze); see plan.c for a limit that shrinks
 *
 * Never a victim: a pinned shard (pins > 0: an open handle or a live epoch,
 * DESIGN invariant 3), and a shard used fewer than min_uses times (the
 * min_uses floor, under every policy).  A "use" is a read to the end
 * (full_reads): a reader that opened a shard and stopped early has not seen
 * its records.
 */
#ifndef RC_EVICTION_POLICY_H
#define RC_EVICTION_POLICY_H

#include "common/config.h"

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

/* What a policy knows about one sealed resident shard. */
struct evc_shard {
	int64_t id;	     /* catalog id; unique within one array; the last tie-break */
	uint64_t bytes;	     /* on disk */
	uint32_t created;    /* epoch during which it was admitted (admission order) */
	uint64_t reads;	     /* read calls served (statistics only) */
	uint64_t full_reads; /* times read to the end: the "uses" of min_uses and `uses` */
	uint64_t last_use;   /* monotonic tick (e.g. ms) of the last read, or of its
			      * admission when never read: LRU counts admission as a
			      * use, so fresh unread data is not the first victim */
	uint32_t pins;	     /* open handles + live epochs holding it; > 0: never a victim */
	bool fresh;	     /* never in a view yet (admitted after the ending epoch's snapshot):
			      * never a victim of the soft phase (evc_plan_boundary) */
};

/*
 * Victim order: writes to order[] (room for n) the indices of the shards
 * that policy `p` may evict, first victim first, and their count to *n_order.
 * Pinned shards and shards with full_reads < min_uses are left out; `none`
 * gives an empty order.  seed matters only to `random`.
 * Returns 0, or -ENOMEM (order[] and *n_order unspecified) or -EINVAL (p
 * unknown).  Thread-safe; shards is not modified.
 */
int evc_order(enum cmn_policy p, uint64_t seed, uint32_t min_uses, const struct evc_shard *shards,
	      size_t n, size_t *order, size_t *n_order);

/*
 * The set to evict to bring `used` bytes down to `target`: the shortest
 * prefix of evc_order() whose bytes, taken from used, leave <= target.  When
 * the order runs out first, all of it (the caller sees *used_after > target).
 * victims[] needs room for n.  *used_after = used - bytes of the victims.
 * Returns 0 or -ENOMEM/-EINVAL as evc_order().
 */
int evc_select(enum cmn_policy p, uint64_t seed, uint32_t min_uses, const struct evc_shard *shards,
	       size_t n, uint64_t used, uint64_t target, size_t *victims, size_t *n_victims,
	       uint64_t *used_after);

#endif
