/*
 * stale.h - the files of changed objects (docs/sampler.md, "Re-listing and
 * changed objects").
 *
 * A relist that sees a new ETag or size marks the object's old row STALE
 * (cfs_catalog_objects_sync); the new version is a new object of the plan.
 * The local files holding the old version's records must leave the view,
 * but a TFRecord shard mixes the records of several objects, and the
 * current objects' records in it must not leave with them.  So a stale
 * file is replaced: the records of current objects it holds are copied
 * (locally, CRC-checked) into a new shard, whose commit withdraws the old
 * file (cfs_catalog_shard_withdraw, CFS_WITHDRAW_STALE) in the same
 * transaction; a file with no current record is withdrawn alone.  The new
 * shard joins the next epoch's view like any file sealed now; the old one
 * stays readable in the current view and is deleted when that view ends
 * and its last handle closes (DESIGN 3): no view lists a record twice, and
 * none lists the old version after the next boundary.
 *
 * The copy reserves its room under the limit (invariant 4) but not under
 * the epoch's admit (cfs_budget_try_reserve_copy: it brings nothing new
 * in), so a cache full to its limit copies once an eviction made room.
 * Callers: the daemon's integrity thread (daemon/scrub.c).  Threads: any,
 * one file at a time per caller.
 */
#ifndef RC_CACHEFS_STALE_H
#define RC_CACHEFS_STALE_H

#include <stddef.h>
#include <stdint.h>

#include "cachefs/shard_writer.h"
#include "cachefs/store.h"

/*
 * Copies the records of current (not STALE) objects held by SEALED
 * TFRecord file `id` into a new shard admitted in `epoch`, not sealed:
 * *out is the writer, already set to replace `id`
 * (cfs_shard_writer_replaces), for the caller to seal when no boundary
 * runs; NULL when `id` holds no such record (withdraw it alone).
 * *records: the records copied.  Never waits for room.
 * Returns 0, or -errno with a message in err and nothing left behind:
 *   -EAGAIN/-EFBIG/-ECANCELED  no room under the limit now (try later);
 *   -EBADMSG   a record of `id` does not match its catalog row (length or
 *              CRC): the file is corrupt, drop it as such;
 *   -EINVAL    `id` is a raw object holding a current record;
 *   other      I/O or catalog errors.
 */
int cfs_stale_copy(struct cfs_store *s, int64_t id, uint32_t epoch, struct cfs_shard_writer **out,
		   uint64_t *records, char *err, size_t errlen);

#endif
