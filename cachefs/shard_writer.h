/*
 * shard_writer.h - writing one local file of the cache and sealing it by
 * DESIGN invariant 2 (tmp/, rename, catalog commit; the bytes made durable
 * by the store's next sync point: docs/design.md, "Departures").
 *
 * Two kinds of writer share one type:
 *   - a TFRecord shard writer (cfs_shard_writer_open): appends records whose
 *     CRC the sampler already verified (invariant 5) into
 *     tmp/<id>.tfrecord, remembering each record's source for the catalog;
 *     sealed into shards/<id>.tfrecord;
 *   - a raw object writer (cfs_raw_writer_open, format=raw): the bytes of
 *     one remote object in any number of cfs_raw_writer_write() calls into
 *     objects/<id> itself (no tmp/ file, no rename: without its row it is
 *     visible to no one); sealed with one sample (the whole file) and a
 *     sanitized display name (cachefs/names.h).
 *
 * Budget (invariant 4): a writer never writes a byte it has not reserved.
 * Before appending, reserve room with cfs_shard_writer_reserve() (blocks
 * until the store's budget has room, with a timeout) or
 * cfs_shard_writer_try_reserve(); an append beyond the reservation fails
 * with -ENOBUFS and writes nothing.  Sealing converts what was written into
 * sealed bytes and gives back the rest; aborting gives back everything.
 * A TFRecord record of `len` payload bytes takes len + CMN_TFR_OVERHEAD
 * bytes (cfs_shard_writer_record_bytes()).
 *
 * Threads: one writer is used by one thread at a time; different writers
 * of one store may run in parallel.  Ownership: the writer keeps a pointer
 * to the store, which must outlive it; payloads are copied out before a
 * call returns.
 */
#ifndef RC_CACHEFS_SHARD_WRITER_H
#define RC_CACHEFS_SHARD_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "common/tfrecord.h"

#include "cachefs/store.h"

struct cfs_shard_writer;

/*
 * Starts a TFRecord shard admitted in `epoch`: allocates an id and creates
 * tmp/<id>.tfrecord.  Reserves nothing.  Returns 0 and *out, or -errno with
 * a message in err (*out untouched).
 */
int cfs_shard_writer_open(struct cfs_shard_writer **out, struct cfs_store *s, uint32_t epoch,
			  char *err, size_t errlen);

/*
 * Starts a raw object file for object `object_id` whose remote key is `key`
 * (copied; used only for the display name, never for a path).
 */
int cfs_raw_writer_open(struct cfs_shard_writer **out, struct cfs_store *s, uint32_t epoch,
			int64_t object_id, const char *key, char *err, size_t errlen);

/* Bytes a TFRecord record of `len` payload bytes occupies in a shard. */
uint64_t cfs_shard_writer_record_bytes(size_t len);

/*
 * Adds `bytes` to the writer's reservation, waiting up to timeout_ms for
 * room (cfs_budget_reserve: -ETIMEDOUT, -ECANCELED, -EFBIG; -EAGAIN with
 * timeout 0).  On failure the reservation is unchanged.
 */
int cfs_shard_writer_reserve(struct cfs_shard_writer *w, uint64_t bytes, uint64_t timeout_ms);
int cfs_shard_writer_try_reserve(struct cfs_shard_writer *w, uint64_t bytes);

/*
 * Adds `bytes` that the caller already reserved in the store's budget
 * (cfs_budget_reserve) to the writer's reservation: the writer now owns
 * them (released or committed with the writer's own).  Never fails.
 */
void cfs_shard_writer_adopt(struct cfs_shard_writer *w, uint64_t bytes);

/* Reserved bytes not yet written. */
uint64_t cfs_shard_writer_room(const struct cfs_shard_writer *w);

/*
 * Appends one record (TFRecord writers only): payload of len bytes whose
 * unmasked crc32c `crc` the caller verified, from object `object_id` at
 * `object_offset` in that object.  Returns 0, -ENOBUFS (not enough reserved;
 * nothing written), -EINVAL (a raw writer), or a write error (-ENOSPC,
 * -EIO...; the writer is then broken: only abort is left).
 */
int cfs_shard_writer_append(struct cfs_shard_writer *w, const void *payload, size_t len,
			    uint32_t crc, int64_t object_id, uint64_t object_offset);

/*
 * Write-behind for a TFRecord writer (common/tfrecord.h): its writes go to a
 * thread of its own, and append_lent may take the caller's memory, given
 * back through `release` once written.  Seal and abort wait for that thread.
 * Returns 0 or -errno.
 */
int cfs_shard_writer_behind(struct cfs_shard_writer *w, cmn_tfr_release_fn release, void *ctx);

/*
 * Like append, with the payload inside `block` (cap bytes, the caller's):
 * returns 1 when the writer took the block (see cmn_tfr_writer_append_lent),
 * 0 when it stays the caller's, or the errors of append (the block stays
 * the caller's).
 */
int cfs_shard_writer_append_lent(struct cfs_shard_writer *w, const void *payload, size_t len,
				 uint32_t crc, int64_t object_id, uint64_t object_offset,
				 void *block, size_t cap);

/*
 * The record appended last is line `ordinal` (from 0) of its object's index
 * sidecar (strategy=records): samples.ordinal, so that the sampler finds
 * its unit without the index.  Ignored when nothing was appended.
 */
void cfs_shard_writer_set_ordinal(struct cfs_shard_writer *w, uint32_t ordinal);

/* Appends bytes of the object (raw writers only).  Same returns as append. */
int cfs_raw_writer_write(struct cfs_shard_writer *w, const void *data, size_t len);

/*
 * The raw object is whole: its file (in objects/ since it was opened) is
 * sealed with fs-verity where the store has it, and its descriptor
 * closed, now, on the caller's thread - step 1 of sealing (the design
 * note above cfs_shard_writer_seal_group), which a later seal then skips.
 * The file has no row until that seal commits one: invisible as before,
 * and a crash leaves a file without a row, which start-up reconciliation
 * deletes (invariant 6); an abort removes it.  Nothing can be written to
 * it afterwards.  Returns 0, or -errno with a message (the writer is left
 * to abort).
 */
int cfs_raw_writer_place(struct cfs_shard_writer *w, char *err, size_t errlen);

/*
 * Units of sampling plan plan_id (pass `pass`) that this file completes:
 * committed in the same transaction as the file's row (DESIGN 8: the
 * plan's cursor moves with the file holding the units).  units is copied.
 * Returns 0, -EINVAL (another plan or pass than earlier marks) or -ENOMEM
 * (nothing added).
 */
int cfs_shard_writer_add_marks(struct cfs_shard_writer *w, int64_t plan_id, uint64_t pass,
			       const uint64_t *units, size_t n);

/*
 * The lows of partial objects of plan plan_id (catalog.h, plan_partial)
 * that this file's commit makes true: committed in its transaction.  A
 * second call replaces the first.  Arrays are copied.  0 or -ENOMEM
 * (nothing set), -EINVAL (another plan than its marks').
 */
int cfs_shard_writer_set_lows(struct cfs_shard_writer *w, int64_t plan_id, const uint64_t *units,
			      const uint64_t *lows, size_t n);

/* The file's id, bytes written so far, records appended so far. */
int64_t cfs_shard_writer_id(const struct cfs_shard_writer *w);
uint64_t cfs_shard_writer_bytes(const struct cfs_shard_writer *w);
uint64_t cfs_shard_writer_records(const struct cfs_shard_writer *w);

/*
 * Seals the file (invariant 2): flush, rename into shards/ or objects/,
 * then the catalog row and all sample rows in one transaction (the store's
 * next sync point makes its bytes durable: cfs_store_sync); the budget turns the written bytes into
 * sealed bytes and releases the unused reservation.  A TFRecord shard with no record is aborted
 * instead and -ENODATA returned (a raw object of 0 bytes is sealed normally). Frees w in every
 * case.  Returns 0 and *id (may be NULL), or -errno with a message; on failure nothing is visible:
 * the file is removed and all bytes released.
 */
int cfs_shard_writer_seal(struct cfs_shard_writer *w, int64_t *id, char *err, size_t errlen);

/*
 * Seals n writers as one group (group commit; the design note
 * above cfs_shard_writer_seal_group() in shard_writer.c): invariant 2's
 * steps each run once for the group, in invariant 2's order for every
 * file of it - all flushed (and sealed with fs-verity where the store has
 * it), all renamed (or linked), then one catalog transaction, with a
 * savepoint per file only when a file fails without.  rcs[i] gets
 * writer i's result: 0 sealed, or -errno (that file is removed, its bytes
 * released; err holds the last such message).  Returns 0 when the group's
 * own steps worked, else -errno with a message and every rcs[i] set:
 * nothing of the group is visible.  Frees every writer and sets ws[i] to
 * NULL in every case.  n may be 0.
 */
int cfs_shard_writer_seal_group(struct cfs_shard_writer **ws, size_t n, int *rcs, char *err,
				size_t errlen);

/*
 * Counts the file's object as fetched once more (objects.fetches) in the
 * transaction that seals it, instead of a transaction of its own.
 */
void cfs_shard_writer_mark_fetched(struct cfs_shard_writer *w);

/*
 * The file's commit also withdraws SEALED file `id` (cachefs/stale.h:
 * this file holds the records of current objects copied from it):
 * cfs_catalog_shard_withdraw(CFS_WITHDRAW_STALE) in the same transaction,
 * so each record is resident in exactly one file before and after.  When
 * `id` is not SEALED any more the seal fails (-ENOENT) and nothing is
 * visible.  The caller then moves `id`'s bytes in the budget.
 */
void cfs_shard_writer_replaces(struct cfs_shard_writer *w, int64_t id);

/* Discards the tmp file, releases the whole reservation, frees w.  NULL ok. */
void cfs_shard_writer_abort(struct cfs_shard_writer *w);

#endif
