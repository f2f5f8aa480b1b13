/*
 * fs_i.h - internals of the FUSE view, shared by its files:
 *
 *   fs.c         the session: mount, INIT, the lowlevel ops table, the
 *                loop, the control ioctl, the read-only refusals, unmount
 *   fs_handle.c  the table of open handles (fi->fh)
 *   fs_node.c    names and attributes: the fixed nodes' table, lookup,
 *                forget, getattr, readlink, directories, statfs
 *   fs_read.c    the read path: open, read, release, passthrough's io mode
 *   fs_meta.c    what the view says about its files without reading them:
 *                the records xattr and the epochs' index files
 *
 * Locking, the order written once: a file handle's mu and an index's mu
 * come before epoch.c's set->mu (cfs_efile_account() and
 * cfs_epoch_shown_files() are called under them); fs->hmu (the handle
 * table) and fs->iomu (io modes) are leaves, never held together nor while
 * calling epoch.c, whose set->mu is taken inside its calls.
 */
#ifndef RC_CACHEFS_FS_I_H
#define RC_CACHEFS_FS_I_H

#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 314
#endif

#include "cachefs/epoch.h"
#include "cachefs/fs.h"
#include "cachefs/passthrough.h"
#include "cachefs/requests.h"

#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

/*
 * The fixed inodes of the mount; every other inode number is the address
 * of a node of epoch.h (struct cfs_efile, cfs_epoch, cfs_edir, cfs_eindex),
 * whose first field says which.  Their names, parents and modes are the
 * table `fixed` of fs_node.c, which lookup, getattr, readdir and opendir read.
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

/* ---- the session (fs.c) ---------------------------------------------- */

struct cfs__hslot; /* fs_handle.c */

struct cfs_fs {
	struct fuse_session *se;
	pthread_mutex_t hmu;	  /* protects the handle table below */
	struct cfs__hslot *slots; /* protected by hmu */
	uint32_t nslots;	  /* protected by hmu */
	uint32_t free_head;	  /* protected by hmu: slot + 1, 0 = none */
	struct cfs_epochs *set;
	struct cfs_budget *budget; /* statfs figures */
	int dirfd;
	struct cfs_requests rq; /* to the daemon: stats texts, control commands */
	struct cfs_fs_opts opts;
	bool mounted;
	bool signals;
	bool accounting;    /* false while tearing down: no statistics from forced releases */
	struct timespec t0; /* times shown on every node */
	uid_t uid;
	gid_t gid;
	struct cfs_pt *pt;	     /* NULL: -o no_passthrough */
	int devfd;		     /* the session's /dev/fuse fd; -1 once it is closed */
	pthread_mutex_t iomu;	     /* protects the io_* and pt_* fields of every efile */
	_Atomic bool pt_broken;	     /* backing ids refused for good: stop trying */
	_Atomic uint64_t pt_opens;   /* handles passed through */
	_Atomic uint64_t pt_refused; /* backing files the kernel refused */
};

static inline struct cfs_fs *cfs__fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* ---- open handles (fs_handle.c) ---------------------------------------- */

/* What a handle is; each kind is made and freed by one file. */
enum cfs__hkind {
	CFS_HK_FILE = 1,  /* struct cfs__file, fs_read.c */
	CFS_HK_TEXT = 2,  /* struct cfs__text, fs_read.c */
	CFS_HK_DIR = 3,	  /* struct cfs__dir, fs_node.c */
	CFS_HK_INDEX = 4, /* struct cfs__index, fs_meta.c */
};

/*
 * Registers h (ownership passes to the table: the last cfs__handle_put()
 * frees it with its kind's close).  Returns its fh, or 0 when out of
 * memory (h is then still the caller's).  Any thread.
 */
uint64_t cfs__handle_add(struct cfs_fs *fs, enum cfs__hkind kind, void *h);

/* The handle of fh with a reference taken, or NULL (released, wrong kind). */
void *cfs__handle_get(struct cfs_fs *fs, uint64_t fh, enum cfs__hkind kind);

/* Drops a reference; with `release`, the open's own (once).  May free the handle. */
void cfs__handle_put(struct cfs_fs *fs, uint64_t fh, bool release);

/* Frees h of `kind` at once, whatever its references (a handle never added, or unmount). */
void cfs__handle_destroy(struct cfs_fs *fs, enum cfs__hkind kind, void *h);

/* At unmount: frees every handle the kernel never released, and the table. */
void cfs__handles_free(struct cfs_fs *fs);

/* ---- names and attributes (fs_node.c) ---------------------------------- */

void cfs__fs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void cfs__fs_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void cfs__fs_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets);
void cfs__fs_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void cfs__fs_readlink(fuse_req_t req, fuse_ino_t ino);
void cfs__fs_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void cfs__fs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		     struct fuse_file_info *fi);
void cfs__fs_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void cfs__fs_statfs(fuse_req_t req, fuse_ino_t ino);

/* An open directory (CFS_HK_DIR). */
struct cfs__dir;

/* Frees an open directory and lets its epoch go. */
void cfs__dir_close(struct cfs_fs *fs, struct cfs__dir *d);

/* ---- the read path (fs_read.c) ----------------------------------------- */

void cfs__fs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void cfs__fs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		  struct fuse_file_info *fi);
void cfs__fs_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);

/* An open sealed file (CFS_HK_FILE) and an open stats or metrics text (CFS_HK_TEXT). */
struct cfs__file;
struct cfs__text;

/*
 * Frees an open file: counts a handle never read as served from the page
 * cache, leaves its io mode, and may complete an eviction or retire the
 * file (then drops the kernel's entry of its name).  Any worker thread, or
 * unmount (fs->accounting false: nothing counted, no entry dropped).
 */
void cfs__file_close(struct cfs_fs *fs, struct cfs__file *h);

/* Frees an open text. */
void cfs__text_close(struct cfs__text *t);

/* Whether new opens may be passed through at all.  Any thread. */
bool cfs__pt_usable(const struct cfs_fs *fs);

/* ---- metadata without a read (fs_meta.c) ------------------------------ */

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
