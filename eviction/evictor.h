/*
 * evictor.h - the retirement plan of an epoch boundary: what to evict and
 * how much to admit.
 *
 * evc_plan_boundary() is pure: from the schedule entry S of epoch E+1, the
 * statistics of every sealed resident shard and the bytes that are on disk
 * but not sealed-resident (evicted-but-open files, files being written), it
 * computes the victims, the admit budget of E+1 and, when the budget is
 * short, why (DESIGN "Epochs" step 2).  The one boundary that applies it to
 * the catalog and the view is daemon/boundary.c.
 *
 * Arithmetic of a boundary (all in bytes):
 *   used     = sum(sealed resident shards) + other   (other: draining + being written)
 *   target   = S.limit - S.admit                      (room for the fresh data)
 *   1. soft:  evict by S.policy (evc_order: never pinned, never below
 *             S.min_uses, never a fresh file: one that has not been in any
 *             view yet, so evicting it would throw away a download nobody
 *             could read)
 *             while used > target.  `none` evicts nothing here.
 *   2. hard:  if still used > S.limit (the limit shrank), evict the remaining
 *             unpinned shards in policy order (none: fifo) while used > S.limit,
 *             ignoring min_uses: DESIGN invariant 4 is a bound, min_uses a
 *             preference.  Pinned shards are never victims (invariant 3);
 *             their bytes drain when their last handle closes.
 *   3. admit = min(S.admit, S.limit - used), 0 when used >= S.limit; under
 *      `none`, 0 as soon as used_before >= S.limit or the room left is
 *      smaller than the largest resident file (frozen once full).
 *   Hence used_after + admit <= S.limit always, and used_after <= S.limit
 *   unless pinned + other bytes alone exceed it (EVC_REASON_OVER_LIMIT).
 */
#ifndef RC_EVICTION_EVICTOR_H
#define RC_EVICTION_EVICTOR_H

#include "eviction/policy.h"
#include "eviction/schedule.h"

#include <stddef.h>
#include <stdint.h>

/* Why the admit budget of an epoch is below the entry's admit (or why not). */
enum evc_reason {
	EVC_REASON_OK = 0,	 /* full admit budget */
	EVC_REASON_FROZEN,	 /* policy none and the cache is (nearly) full */
	EVC_REASON_MIN_USES,	 /* room held mostly by shards used < min_uses times */
	EVC_REASON_PINNED,	 /* room held mostly by open / live files */
	EVC_REASON_OVER_LIMIT,	 /* pinned + draining bytes alone exceed the limit */
	EVC_REASON_LIMIT_FORCED, /* full budget, but the limit shrank and shards below
				  * min_uses were evicted to honour it */
	EVC_REASON_FRESH,	 /* room held mostly by fresh files: never in a view
				  * yet, so not victims */
};

/* A short stable token for JSON and tables: "ok", "frozen", "min_uses", ... */
const char *evc_reason_name(enum evc_reason r);

/* The result of one boundary. */
struct evc_plan {
	size_t n_victims;	/* victims[0..n_victims): indices into the shard array */
	uint64_t evict_bytes;	/* their bytes */
	uint64_t used_before;	/* sealed resident + other, before */
	uint64_t used_after;	/* ... after the victims are gone (draining still counts) */
	uint64_t target;	/* S.limit - S.admit */
	uint64_t admit;		/* budget of the epoch: <= S.admit, used_after + admit <= S.limit */
	uint64_t held_min_uses; /* bytes kept only because of min_uses */
	uint64_t held_pinned;	/* bytes of pinned shards + other */
	uint64_t held_fresh;	/* bytes of fresh files kept (never in a view yet) */
	size_t n_forced;	/* victims below min_uses (hard phase) */
	enum evc_reason reason;
	char why[320]; /* one line for stats/status; "" when reason is OK */
};

/*
 * Plans the boundary into epoch `epoch` under entry s (see the file
 * comment).  shards[0..n) are the sealed resident shards (not modified);
 * `other` the bytes on disk that are not among them.  victims[] must have
 * room for n; it receives indices in eviction order.
 * Returns 0, or -ENOMEM (*out unspecified).  Pure and thread-safe.
 */
int evc_plan_boundary(const struct evc_entry *s, uint32_t epoch, const struct evc_shard *shards,
		      size_t n, uint64_t other, size_t *victims, struct evc_plan *out);

#endif
