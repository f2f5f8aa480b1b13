/*
 * fault.h - named crash points for crash tests (SQLite's style of
 * simulated crashes): with RC_FAULT=point:n in the environment, the n-th
 * pass of this process through cmn_fault("point") ends the process at once
 * with _exit(CMN_FAULT_EXIT), as kill -9 would (no atexit handlers, no
 * buffered output flushed, no fsync, no unlock beyond what the kernel does).
 *
 * The points (docs/reliability.md, "Crash points"):
 *   before_rename  cachefs/shard_writer.c seal: file written and flushed,
 *                  still in tmp/ (a raw object: in objects/, not closed)
 *   before_commit  cachefs/shard_writer.c seal: renamed, catalog row not
 *                  committed
 *   in_commit      cachefs/catalog.c: every statement of a transaction run,
 *                  COMMIT not yet
 *   evict          cachefs/store.c cfs_store_reap (a boundary's victims, an
 *                  evicted file's last release, a retired file, a file
 *                  withdrawn as corrupt or stale): after each file
 *                  unlinked, its GONE not committed
 *   reconcile      cachefs/reconcile.c: before each file it deletes
 *   plan_partial   cachefs/catalog_plan.c: a whole object's transfer
 *                  recorded as begun (plan_partial), before its first byte
 *   before_sync    cachefs/store.c cfs_store_sync: files listed in
 *                  `unsynced`, before the fsyncs that make them durable
 *
 * Unset, a call costs one atomic load (acquire) and a branch.
 */
#ifndef RC_COMMON_FAULT_H
#define RC_COMMON_FAULT_H

/* The exit status of a process stopped by a crash point. */
#define CMN_FAULT_EXIT 86

/*
 * Counts one pass through the crash point `name` (one of the names above)
 * and ends the process with _exit(CMN_FAULT_EXIT) when RC_FAULT names this
 * point and this is its n-th pass.  RC_FAULT is read once, at the first
 * call; a malformed value or an unknown point name ends the process with a
 * one-line message and _exit(2), so a mistyped test never passes by not
 * crashing.  Any thread may call it.
 */
void cmn_fault(const char *name);

#endif
