/*
 * store_i.h - internals shared by store.c and shard_writer.c.
 */
#ifndef RC_CACHEFS_STORE_I_H
#define RC_CACHEFS_STORE_I_H

#include "cachefs/layout.h"
#include "cachefs/store.h"

/* All fields are set by cfs_store_open() and read-only afterwards. */
struct cfs_store {
	struct cfs_layout lay; /* the directory and its fds */
	int lock_fd;	       /* CACHE_DIR/lock, flock()ed */
	struct cfs_catalog *cat;
	struct cfs_budget *budget;
	struct cfs_reconcile_report rec;
	bool verity;	      /* files are sealed with fs-verity (verity.h) */
	char verity_why[160]; /* why not, when !verity */
};

#endif
