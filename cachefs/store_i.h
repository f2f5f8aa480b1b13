/*
 * store_i.h - internals shared by store.c and shard_writer.c.
 */
#ifndef RC_CACHEFS_STORE_I_H
#define RC_CACHEFS_STORE_I_H

#include "cachefs/layout.h"
#include "cachefs/store.h"

#include <pthread.h>
#include <stdatomic.h>

/*
 * All fields but the sync point's are set by cfs_store_open() and
 * read-only afterwards.  sync_mu serializes sync points (cfs_store_sync)
 * and guards sync_stop; the syncer thread runs one every sync_period_ms.
 */
struct cfs_store {
	struct cfs_layout lay; /* the directory and its fds */
	int lock_fd;	       /* CACHE_DIR/lock, flock()ed */
	bool same_boot;	       /* the lock's last owner ran since this system started */
	struct cfs_catalog *cat;
	struct cfs_budget *budget;
	struct cfs_reconcile_report rec;
	struct cfs_shard_info *start_rows; /* keep_start_rows: reconciliation's, until taken */
	size_t nstart_rows;
	bool verity; /* files are sealed with fs-verity (verity.h) */
	pthread_mutex_t sync_mu;
	pthread_cond_t sync_cv;
	bool sync_stop;	   /* sync_mu: the syncer thread is to end */
	bool syncer_on;	   /* the syncer thread was started */
	int64_t open_mark; /* the last `unsynced` entry at open: the first sync point's bound */
	pthread_t syncer;
	uint64_t sync_period_ms;
	atomic_bool sync_failed; /* a sync point failed: entries stay for the next start's check */
	atomic_uint_fast64_t sync_by_fsyncs; /* sync points with files, by an fsync of each */
	atomic_uint_fast64_t sync_by_syncfs; /* sync points by one syncfs() */
	char verity_why[160];		     /* why not, when !verity */
};

#endif
