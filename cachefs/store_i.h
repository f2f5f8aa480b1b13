/*
 * store_i.h - internals shared by store.c, reconcile.c and shard_writer.c.
 */
#ifndef RC_CACHEFS_STORE_I_H
#define RC_CACHEFS_STORE_I_H

#include "cachefs/store.h"

/* All fields are set by cfs_store_open() and read-only afterwards. */
struct cfs_store {
	char *dir;
	int dir_fd;	/* CACHE_DIR */
	int shards_fd;	/* CACHE_DIR/shards */
	int objects_fd; /* CACHE_DIR/objects */
	int tmp_fd;	/* CACHE_DIR/tmp */
	int lock_fd;	/* CACHE_DIR/lock, flock()ed */
	struct cfs_catalog *cat;
	struct cfs_budget *budget;
	struct cfs_reconcile_report rec;
};

/* The name of file id of kind inside its directory ("12.tfrecord", "12"). */
void cfs__file_name(enum cfs_kind kind, int64_t id, char *buf, size_t buflen);

/* The directory fd that holds files of kind. */
int cfs__kind_fd(const struct cfs_store *s, enum cfs_kind kind);

/*
 * Start-up reconciliation (DESIGN invariant 6), reconcile.c: empties tmp/,
 * joins the files of shards/ and objects/ against the catalog's rows and
 * repairs both, then adds the surviving bytes to the budget.  Fills s->rec.
 * Returns 0 or -errno with a message.
 */
int cfs__reconcile(struct cfs_store *s, char *err, size_t errlen);

#endif
