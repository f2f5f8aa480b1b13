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
	bool verity; /* files are sealed with fs-verity (verity.h) */
	/*
	 * How a raw writer's file comes to its name (store.c, probe_tmpfile):
	 * CFS_ANON_NONE, a named file in tmp/ renamed into objects/; else an
	 * unnamed O_TMPFILE of tmp/ linked into objects/ by linkat() of the
	 * descriptor itself (CFS_ANON_EMPTY_PATH) or of /proc/self/fd/N
	 * (CFS_ANON_PROC).
	 */
	enum { CFS_ANON_NONE, CFS_ANON_EMPTY_PATH, CFS_ANON_PROC } anon;
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

/*
 * Links the unnamed file open as fd (an O_TMPFILE of tmp/) as `name` in
 * the directory dfd, the way s->anon says.  0 or -errno.
 */
int cfs__anon_link(const struct cfs_store *s, int fd, int dfd, const char *name);

#endif
