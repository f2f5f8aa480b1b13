/*
 * layout.h - the cache directory's layout (DESIGN "The cache directory"):
 * its open directory fds and the names of files, built only from numeric
 * ids (invariant 7: no local path is derived from a remote key).
 *
 * A leaf of cachefs: store.c, shard_writer.c and reconcile.c use it; it
 * uses nothing of theirs.  All fields are set once by cfs_store_open().
 */
#ifndef RC_CACHEFS_LAYOUT_H
#define RC_CACHEFS_LAYOUT_H

#include "cachefs/store.h"

#include <stddef.h>
#include <stdint.h>

struct cfs_layout {
	char *dir;	/* CACHE_DIR, absolute */
	int dir_fd;	/* CACHE_DIR */
	int shards_fd;	/* CACHE_DIR/shards */
	int objects_fd; /* CACHE_DIR/objects */
	int tmp_fd;	/* CACHE_DIR/tmp */
};

/* The name of file id of kind inside its directory ("12.tfrecord", "12"). */
void cfs__file_name(enum cfs_kind kind, int64_t id, char *buf, size_t buflen);

/* Room for any file's path relative to the cache directory (cfs__relpath). */
#define CFS_RELPATH_MAX 40

/*
 * The path of file id of kind relative to the cache directory
 * ("shards/12.tfrecord", "objects/12"), written into buf; returns buf.
 */
const char *cfs__relpath(enum cfs_kind kind, int64_t id, char buf[CFS_RELPATH_MAX]);

/* The directory fd that holds files of kind. */
int cfs__kind_fd(const struct cfs_layout *l, enum cfs_kind kind);

#endif
