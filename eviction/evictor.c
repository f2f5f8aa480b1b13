/*
 * evictor.c - the epoch boundary driver: snapshot -> plan -> commit.
 *
 * DESIGN NOTE (in the manner of SQLite's pager.c)
 *
 * Terms.
 *   shard      a sealed file of the cache (a TFRecord shard or a raw object).
 *   resident   a shard whose catalog state is SEALED.
 *   pinned     a resident shard with an open handle, or a member of a live
 *              epoch other than the one ending (DESIGN invariant 3).
 *   draining   bytes of shards marked EVICTING whose file is still open.
 *   other      draining + reserved (being written) bytes: on disk or
 *              promised, but not resident.
 *   used       resident bytes + other: what invariant 4 bounds by `limit`.
 *   entry S    the schedule entry in force for the epoch being entered.
 *
 * Invariants this module keeps (numbers are DESIGN's):
 *   E1 (inv. 3)  a pinned shard is never a victim.
 *   E2 (inv. 4)  after a boundary, used + admit budget <= S.limit; and
 *                used <= S.limit unless pinned + other bytes alone exceed it
 *                (reason over_limit; they drain on release).
 *   E3           a shard used fewer than S.min_uses times is a victim only to
 *                honour a limit that shrank (reason limit_forced).
 *   E4           a boundary is atomic: the victims, the new epoch row and
 *                its budget are committed in one catalog transaction, or
 *                nothing is.
 *   E5           a boundary never waits for room: when pins or min_uses
 *                leave less than S.admit, the epoch starts with what fits
 *                and the reason is recorded (no deadlock, issue 5 item 4).
 *
 * States of a shard, and who moves it:
 *
 *      (tmp, no row) --cfs_catalog_shard_insert--> SEALED (resident)
 *      SEALED --commit() of a boundary whose plan names it--> EVICTING
 *      EVICTING --last handle released (cachefs), unlink--> GONE
 *
 *   A victim without open handles passes EVICTING -> GONE right after the
 *   commit; its bytes leave `used` when the file is unlinked.
 *
 * A boundary into epoch E+1 (DESIGN "Epochs" step 1; steps 2-4 belong to
 * cachefs/epoch.c):
 *   1. ops->snapshot(): resident shards with their statistics, and other.
 *   2. evc_plan_boundary() with S = evc_schedule_at(E+1): victims, budget.
 *   3. ops->commit(): one transaction (E4); the store then deletes the
 *      unpinned victims and sets the budget's limit/admit to S and the plan.
 *
 * Not here: choosing victims (policy.c), the arithmetic (plan.c), SQL
 * (cachefs/catalog.c), file deletion and handle counts (cachefs).
 * Locking: none inside; the caller serialises boundaries, and the store
 * ops take the locks of the cache.
 */
#include "eviction/evictor.h"
#include "common/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

int evc_boundary(const struct evc_schedule *sch, uint32_t epoch, const struct evc_store_ops *ops,
		 void *ctx, struct evc_plan *out, char *err, size_t errlen)
{
	struct evc_shard *shards = NULL;
	size_t n = 0, *victims = NULL;
	int64_t *ids = NULL;
	uint64_t other = 0;
	char desc[160];

	const struct evc_entry *s = evc_schedule_at(sch, epoch);
	int rc = ops->snapshot(ctx, &shards, &n, &other, err, errlen);
	if (rc < 0)
		return rc;
	rc = -ENOMEM;
	victims = malloc((n ? n : 1) * sizeof(*victims));
	ids = malloc((n ? n : 1) * sizeof(*ids));
	if (!victims || !ids) {
		snprintf(err, errlen, "epoch %u: out of memory planning the boundary", epoch);
		goto out;
	}
	rc = evc_plan_boundary(s, epoch, shards, n, other, victims, out);
	if (rc < 0) {
		snprintf(err, errlen, "epoch %u: out of memory planning the boundary", epoch);
		goto out;
	}
	for (size_t i = 0; i < out->n_victims; i++)
		ids[i] = shards[victims[i]].id;
	rc = ops->commit(ctx, epoch, s, ids, out->n_victims, out, err, errlen);
	if (rc < 0)
		goto out;
	cmn_log(CMN_LOG_INFO, "epoch %u: %s; evicted %zu shards (%llu bytes), admit %llu bytes",
		epoch, evc_entry_describe(s, desc, sizeof(desc)), out->n_victims,
		(unsigned long long)out->evict_bytes, (unsigned long long)out->admit);
	if (out->reason != EVC_REASON_OK)
		cmn_log(CMN_LOG_WARN, "epoch %u: %s", epoch, out->why);
out:
	free(ids);
	free(victims);
	free(shards);
	return rc;
}
