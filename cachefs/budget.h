/*
 * budget.h - byte accounting for DESIGN invariant 4 (admission control).
 *
 * The budget counts the bytes a cache directory holds or is about to hold:
 *
 *   reserved  bytes promised to writers (files in tmp/ being written, plus
 *             the room they asked for ahead of writing);
 *   sealed    bytes of sealed files in shards/ and objects/ (state sealed);
 *   draining  bytes of evicted or withdrawn files not deleted yet (held by a
 *             handle or a view until their last release, DESIGN invariant
 *             3, or about to be reaped): on disk until then.
 *
 * Invariant 4 as this module upholds it: a reservation is granted only if
 * reserved + sealed + draining + request <= limit afterwards.  Writers must
 * reserve before they write (cachefs/shard_writer.c refuses to write bytes
 * it has not reserved), so what is on disk never exceeds the limit.  When
 * the limit shrinks at run time below what is already held, nothing is
 * deleted here: new reservations wait until eviction brings the total under
 * the new limit (the evictor runs at the epoch boundary).
 *
 * A second, per-epoch bound: `admit` caps the fresh bytes admitted during
 * one epoch (DESIGN "Epochs").  admit_used counts bytes reserved or sealed
 * since the epoch began; cfs_budget_new_epoch() resets it to what is still
 * reserved (in-flight writes are admitted into the new epoch).
 *
 * Waiting: cfs_budget_reserve() sleeps on a condition variable (no polling)
 * until room appears, its timeout passes, or cfs_budget_cancel() is called.
 * Every function is thread-safe; all fields are protected by one mutex
 * inside the budget, which is never held while calling out of this module.
 */
#ifndef RC_CACHEFS_BUDGET_H
#define RC_CACHEFS_BUDGET_H

#include <stdbool.h>
#include <stdint.h>

#define CFS_BUDGET_UNLIMITED UINT64_MAX /* an `admit` with no bound */

struct cfs_budget;

/* A consistent snapshot of the counters (cfs_budget_get). */
struct cfs_budget_stat {
	uint64_t limit;
	uint64_t admit;	   /* per-epoch admit bound, or CFS_BUDGET_UNLIMITED */
	uint64_t reserved; /* see the file comment */
	uint64_t sealed;
	uint64_t draining;
	uint64_t admit_used;	/* reserved or sealed since the epoch began */
	uint64_t peak;		/* highest reserved + sealed + draining seen */
	uint32_t waiting_limit; /* threads now waiting for room under limit */
	uint32_t waiting_admit; /* threads now waiting for the next epoch */
	bool cancelled;
};

/*
 * Creates a budget with `limit` bytes and no admit bound, all counters 0.
 * Returns 0 and *out, or -ENOMEM (*out untouched).  Free with cfs_budget_free.
 */
int cfs_budget_new(struct cfs_budget **out, uint64_t limit);

/* Frees b.  No thread may be waiting in it (cancel and join them first). */
void cfs_budget_free(struct cfs_budget *b);

/*
 * Reserves `bytes` for writing, waiting up to timeout_ms (0: do not wait)
 * for room under both `limit` and the epoch's `admit`.  Returns
 *   0           reserved: the caller now owns `bytes` of reservation and must
 *               hand them back through cfs_budget_release() or convert them
 *               with cfs_budget_commit();
 *   -EAGAIN     timeout_ms == 0 and there is no room now;
 *   -ETIMEDOUT  no room appeared within timeout_ms;
 *   -ECANCELED  cfs_budget_cancel() was called (before or during the wait);
 *   -EFBIG      bytes > limit: it cannot fit under the current limit, so
 *               the call fails at once instead of waiting out its timeout.
 *               (bytes > this epoch's admit, even admit 0, waits: the next
 *               epoch may admit more.)
 * On failure nothing is reserved.  bytes == 0 always succeeds.
 */
int cfs_budget_reserve(struct cfs_budget *b, uint64_t bytes, uint64_t timeout_ms);

/* cfs_budget_reserve(b, bytes, 0): never blocks; -EAGAIN when no room. */
int cfs_budget_try_reserve(struct cfs_budget *b, uint64_t bytes);

/*
 * As cfs_budget_try_reserve(), for a copy of records already resident
 * (cachefs/stale.h): room under the limit only, not under the epoch's
 * admit, since it brings nothing new in; the bytes still count in
 * admit_used, as every reservation does.
 */
int cfs_budget_try_reserve_copy(struct cfs_budget *b, uint64_t bytes);

/*
 * Gives back `bytes` of reservation (an aborted write, or the unused tail of
 * a reservation).  Wakes waiters.  bytes must not exceed what the caller
 * holds (asserted).
 */
void cfs_budget_release(struct cfs_budget *b, uint64_t bytes);

/*
 * At seal: turns `used` bytes of the caller's reservation of `reserved`
 * bytes into sealed bytes and releases reserved - used.  used <= reserved.
 */
void cfs_budget_commit(struct cfs_budget *b, uint64_t reserved, uint64_t used);

/* Adds sealed bytes found on disk (start-up reconciliation only). */
void cfs_budget_add_sealed(struct cfs_budget *b, uint64_t bytes);

/* A sealed file was evicted or withdrawn: sealed -= bytes, draining += bytes. */
void cfs_budget_sealed_to_draining(struct cfs_budget *b, uint64_t bytes);

/* The last handle of an evicted file was released and the file deleted. */
void cfs_budget_draining_removed(struct cfs_budget *b, uint64_t bytes);

/*
 * Changes the limit (grow or shrink) at run time; wakes waiters.  Bytes
 * already held above a shrunk limit stay until eviction removes them.
 */
void cfs_budget_set_limit(struct cfs_budget *b, uint64_t limit);

/*
 * Starts a new epoch's admit budget: admit (CFS_BUDGET_UNLIMITED for none)
 * and admit_used = bytes reserved now.  Wakes waiters.
 */
void cfs_budget_new_epoch(struct cfs_budget *b, uint64_t admit);

/*
 * Raises the current epoch's admit to `admit` (nothing when it is not
 * above the admit in force); admit_used stays.  Wakes waiters.
 */
void cfs_budget_raise_admit(struct cfs_budget *b, uint64_t admit);

/*
 * Shutdown: every waiting and future cfs_budget_reserve() returns
 * -ECANCELED.  Release/commit keep working so writers can unwind.
 */
void cfs_budget_cancel(struct cfs_budget *b);

/* Fills *st with a consistent snapshot. */
void cfs_budget_get(struct cfs_budget *b, struct cfs_budget_stat *st);

#endif
