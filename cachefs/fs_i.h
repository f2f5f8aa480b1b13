/*
 * fs_i.h - internals of the FUSE view shared by fs.c (the handlers, inodes
 * and handles) and fs_meta.c (what the view says about its files without
 * reading them: the records xattr and the epochs' index files).
 */
#ifndef RC_CACHEFS_FS_I_H
#define RC_CACHEFS_FS_I_H

#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 314
#endif

#include "cachefs/epoch.h"

#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The fixed inodes of the mount; every other inode number is the address
 * of a node of epoch.h (struct cfs_efile, cfs_epoch, cfs_edir, cfs_eindex),
 * whose first field says which.
 */
enum {
	INO_ROOT = FUSE_ROOT_ID, /* 1 */
	INO_EPOCHS = 2,
	INO_META = 3, /* .rollcache */
	INO_CURRENT = 4,
	INO_STATS = 5,
	INO_METRICS = 6,
	INO_CONTROL = 7,
	INO_META_EPOCHS = 8, /* .rollcache/epochs: the epochs' index files */
	INO_FIXED_MAX = 8,
};

_Static_assert(sizeof(fuse_ino_t) >= sizeof(uintptr_t), "inode numbers are node addresses");

static inline bool cfs__is_node(fuse_ino_t ino)
{
	return ino > INO_FIXED_MAX;
}

/* The node type (enum cfs_node_type) of a node inode. */
static inline uint32_t cfs__node_type(fuse_ino_t ino)
{
	return *(const uint32_t *)(uintptr_t)ino;
}

/* The record-count xattr every file of an epoch answers (DESIGN "The mount"). */
#define CFS_XATTR_RECORDS "user.rollcache.records"

/* FUSE getxattr / listxattr of any inode; each replies once. */
void cfs__fs_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size);
void cfs__fs_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);

/* An open index file of one epoch (.rollcache/epochs/<E>). */
struct cfs__index;

/*
 * Opens the index of ep, holding ep listed (cfs_epoch_hold) until
 * cfs__index_close().  Returns 0 and *out, -ENOENT (ep left the view) or
 * -ENOMEM.  Any thread.
 */
int cfs__index_open(struct cfs_epochs *s, struct cfs_epoch *ep, struct cfs__index **out);

/*
 * Copies up to size bytes of the index text from offset off into buf;
 * *got bytes (fewer only at the end).  Sequential reads cost the lines they
 * return; a read before the text made so far starts again from the first
 * line.  Returns 0 or -ENOMEM.  Concurrent calls on one index are serialised.
 */
int cfs__index_read(struct cfs__index *x, uint64_t off, char *buf, size_t size, size_t *got);

/* Frees x and lets its epoch go.  NULL is ignored. */
void cfs__index_close(struct cfs__index *x);

#endif
