/*
 * fs.c - the read-only FUSE filesystem over epoch snapshots (libfuse3
 * low-level API, multithreaded loop).
 *
 * Owns the inode space of the mount and the request handlers.  Does not own
 * the snapshots (epoch.c), the catalog or the stats text: what only the
 * daemon can answer (a stats text, an advance) is posted to its queue of
 * requests (requests.h), which the daemon serves; fs.c never calls up.  Lookups and reads never
 * query SQLite: names resolve in the immutable sorted trees of struct cfs_epoch and reads go to an
 * fd opened on the backing file at the handle's first read (a warm open, served from the kernel's
 * page cache, costs no syscall beyond its reply).
 *
 * Inodes: 1..8 are the fixed nodes (fs_i.h); every other inode number is the
 * address of a struct cfs_efile, cfs_epoch, cfs_edir or cfs_eindex, whose
 * first field says which (as passthrough_ll.c uses struct lo_inode
 * addresses).  Lookup counts are kept by epoch.c so an inode the kernel
 * still knows is never freed.  Generation numbers are 0: addresses are reused only after the
 * kernel forgot the inode.  One inode per file across epochs: a shard read
 * in epoch E is still in the page cache when epoch E+1 reads it.
 *
 * Handles: fi->fh indexes a table (generation | slot), never a pointer, so a
 * request racing a release cannot touch freed memory; each request holds a
 * reference on its handle.
 *
 * Statistics: the read path only bumps atomics in the efile (epoch.c);
 * the daemon batches them into the catalog from another thread.
 *
 * Read-only: the mount is `ro`, so the kernel refuses writes before they
 * reach us, and every call that would change something answers EROFS here
 * too.  Commands (`next`) arrive as an ioctl on .rollcache/control opened
 * read-only (include/rollcache/control.h, fs_ioctl()).  Sealed files never
 * change (DESIGN invariant 1), hence long entry/attr timeouts and keep_cache.
 *
 * Backing reads: each file handle classifies its reads as sequential or
 * random (pattern_note()); sequential handles read the backing file ahead
 * with readahead(2) after replying, random ones switch it to
 * POSIX_FADV_RANDOM.  No allocation on the read path (one buffer per worker
 * thread).
 *
 * Passthrough (passthrough.c, kernel >= 6.9, CAP_SYS_ADMIN): once the daemon
 * has served a file to its last byte, later opens hand its reads to the
 * kernel, which serves them from the backing file (io_mode_enter()).  The
 * first pass of a file in a mount's life still crosses the daemon, so the
 * read statistics see it; a passthrough handle is counted as a cached one.
 *
 * Integrity (verify.c, issue 14): before the daemon serves a byte of a
 * TFRecord file it checks the CRCs of every record the read covers, up to
 * the end of the last one (cfs_verify_read); a read that reaches a corrupt
 * record gets EIO and the file is queued for the daemon to drop.  A file
 * is passed through only once all of it passed (cfs_verify_done).
 *
 * Metadata without a read (fs_meta.c): every file answers the xattr
 * user.rollcache.records (its record count), and .rollcache/epochs/<E> is
 * the index of epoch E (a line "name bytes records" per file it lists).
 * Neither counts as a read of the files.
 *
 * Retired files (retire = read): the release that retires a file (epoch.c)
 * also drops the kernel's cached entry of its name (drop_entry()), so the
 * next lookup of it reaches the daemon and gets ENOENT; readdir leaves it
 * out from then on.
 *
 * Limits: xattrs are read-only (one name, on files; set/remove EROFS); no
 * locks (the kernel's local locks apply); splice_read is capped to what
 * fits a pipe (docs/bench-fuse.md, "splice vs pread").
 *
 * Locking: fs->hmu protects the handle table and is a leaf; epoch.c's
 * set->mu is taken inside its calls, never while holding hmu.
 * Every handler replies exactly once, through one exit label where it has
 * more than one way out.
 */
#define FUSE_USE_VERSION 314

#include "cachefs/fs.h"

#include "cachefs/fs_i.h"
#include "cachefs/names.h"
#include "cachefs/passthrough.h"
#include "cachefs/verify.h"
#include "common/log.h"
#include "rollcache/control.h"

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

/*
 * Open handles live in a table and fi->fh is (generation << 32 | slot + 1),
 * never a pointer: a request that arrives for a handle already released
 * (an interrupted request the kernel stopped waiting for) finds nothing
 * instead of freed memory.  Each request holds a reference for its duration;
 * the last reference destroys the handle.
 */
enum hkind { HK_FILE = 1, HK_TEXT = 2, HK_DIR = 3, HK_INDEX = 4 };

struct hslot {
	void *h; /* NULL when free */
	enum hkind kind;
	uint32_t gen;
	uint32_t refs; /* 1 for the open + 1 per request in progress */
	bool closing;  /* released: destroyed when refs reaches 0 */
	uint32_t next_free;
};

struct cfs_fs {
	struct fuse_session *se;
	pthread_mutex_t hmu; /* protects the handle table below */
	struct hslot *slots; /* protected by hmu */
	uint32_t nslots;     /* protected by hmu */
	uint32_t free_head;  /* protected by hmu: slot + 1, 0 = none */
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

/*
 * Backing-file access hints (docs/bench-fuse.md).  A read is "near" when it
 * starts within RA_NEAR of where the handle's previous read ended (the
 * kernel's async readahead requests may arrive slightly out of order);
 * SEQ_STREAK near reads in a row make a handle sequential, RAND_STREAK far
 * ones random.  A sequential handle keeps the backing file's page cache
 * filled up to RA_WINDOW past its reads (readahead(2) in RA_CHUNK calls: the
 * kernel caps one call at the device's max I/O size), so the disk works
 * while the FUSE round trips go on; a random one gets POSIX_FADV_RANDOM so
 * that 4 KiB requests read 4 KiB from the disk.
 */
#define RA_NEAR	    ((uint64_t)2 << 20)
#define RA_WINDOW   ((uint64_t)8 << 20)
#define RA_CHUNK    ((uint64_t)1 << 20)
#define SEQ_STREAK  4
#define RAND_STREAK 3

/* An open sealed file. */
struct fs_handle {
	struct cfs_efile *f;
	_Atomic int fd;		/* backing fd; -1 until the first read (warm opens never need it) */
	_Atomic bool read_once; /* first read counted */
	bool end_done;		/* a read to the end was counted (races are benign: counted once) */
	uint32_t epoch1;	/* the epoch current at open, + 1: its reads count there */
	pthread_mutex_t mu;	/* protects end_done and the opening of fd */
	/* access pattern: hints updated by concurrent reads without a lock */
	_Atomic uint64_t next_off; /* end of the latest read */
	_Atomic uint64_t ra_end;   /* backing readahead issued up to here */
	_Atomic int streak;	   /* > 0: near reads in a row; < 0: far reads in a row */
	_Atomic bool random;	   /* POSIX_FADV_RANDOM is in force on fd */
	bool pt;		   /* protected by fs->iomu: reads passed through (io_mode_enter) */
};

/* An open stats or metrics text. */
struct fs_text {
	char *buf;
	size_t len;
};

/* An open directory: a snapshot of its entries (epochs/) or an epoch. */
struct fs_dir {
	struct cfs_epoch *ep; /* epoch of an epoch dir or a dir inside one, or NULL */
	struct cfs_edir *dir; /* that directory */
	uint32_t *numbers;    /* epochs/: listed epoch numbers at opendir */
	size_t nnumbers;
};

static struct cfs_fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static void handle_destroy(struct cfs_fs *fs, enum hkind kind, void *h);

/* Registers h; returns its fh, or 0 when out of memory. */
static uint64_t handle_add(struct cfs_fs *fs, enum hkind kind, void *h)
{
	uint64_t fh = 0;
	pthread_mutex_lock(&fs->hmu);
	if (!fs->free_head) {
		uint32_t n = fs->nslots ? fs->nslots * 2 : 64;
		struct hslot *v = realloc(fs->slots, (size_t)n * sizeof(*v));
		if (!v)
			goto out;
		memset(v + fs->nslots, 0, (size_t)(n - fs->nslots) * sizeof(*v));
		for (uint32_t i = fs->nslots; i < n; i++)
			v[i].next_free = i + 1 < n ? i + 2 : 0;
		fs->free_head = fs->nslots + 1;
		fs->slots = v;
		fs->nslots = n;
	}
	uint32_t i = fs->free_head - 1;
	struct hslot *sl = &fs->slots[i];
	fs->free_head = sl->next_free;
	sl->h = h;
	sl->kind = kind;
	sl->gen++;
	sl->refs = 1;
	sl->closing = false;
	fh = ((uint64_t)sl->gen << 32) | (i + 1);
out:
	pthread_mutex_unlock(&fs->hmu);
	return fh;
}

/* The handle of fh with a reference taken, or NULL (released, wrong kind). */
static void *handle_get(struct cfs_fs *fs, uint64_t fh, enum hkind kind)
{
	uint32_t i = (uint32_t)fh - 1;
	void *h = NULL;
	pthread_mutex_lock(&fs->hmu);
	if ((uint32_t)fh && i < fs->nslots && fs->slots[i].h && fs->slots[i].kind == kind &&
	    fs->slots[i].gen == (uint32_t)(fh >> 32) && !fs->slots[i].closing) {
		fs->slots[i].refs++;
		h = fs->slots[i].h;
	}
	pthread_mutex_unlock(&fs->hmu);
	return h;
}

/* Drops a reference; with `release`, the open's own (once).  May destroy. */
static void handle_put(struct cfs_fs *fs, uint64_t fh, bool release)
{
	uint32_t i = (uint32_t)fh - 1;
	void *h = NULL;
	enum hkind kind = HK_FILE;
	pthread_mutex_lock(&fs->hmu);
	if ((uint32_t)fh && i < fs->nslots && fs->slots[i].h &&
	    fs->slots[i].gen == (uint32_t)(fh >> 32)) {
		struct hslot *sl = &fs->slots[i];
		if (release) {
			if (sl->closing)
				goto out; /* released twice: ignore */
			sl->closing = true;
		}
		if (--sl->refs == 0) {
			h = sl->h;
			kind = sl->kind;
			sl->h = NULL;
			sl->next_free = fs->free_head;
			fs->free_head = i + 1;
		}
	}
out:
	pthread_mutex_unlock(&fs->hmu);
	if (h)
		handle_destroy(fs, kind, h);
}

/* The directory (inside an epoch) that ino is, or NULL. */
static struct cfs_edir *edir_of(fuse_ino_t ino)
{
	if (!cfs__is_node(ino))
		return NULL;
	if (cfs__node_type(ino) == CFS_NODE_EPOCH)
		return &((struct cfs_epoch *)(uintptr_t)ino)->root;
	if (cfs__node_type(ino) == CFS_NODE_DIR)
		return (struct cfs_edir *)(uintptr_t)ino;
	return NULL;
}

static void fill_common(struct cfs_fs *fs, struct stat *st, fuse_ino_t ino)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_uid = fs->uid;
	st->st_gid = fs->gid;
	st->st_atim = fs->t0;
	st->st_mtim = fs->t0;
	st->st_ctim = fs->t0;
	st->st_blksize = 1 << 20;
}

static int current_target(struct cfs_fs *fs, char *buf, size_t len)
{
	bool have;
	uint32_t n = cfs_epochs_current_number(fs->set, &have);
	if (!have)
		return -ENOENT;
	snprintf(buf, len, "epochs/%" PRIu32, n);
	return 0;
}

/* Fills st for ino; returns 0 or -ENOENT.  The attr timeout goes to *timeout. */
static int fs_stat(struct cfs_fs *fs, fuse_ino_t ino, struct stat *st, double *timeout)
{
	char target[32];
	fill_common(fs, st, ino);
	*timeout = fs->opts.timeout;
	switch (ino) {
	case INO_ROOT:
	case INO_EPOCHS:
	case INO_META:
	case INO_META_EPOCHS:
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 2;
		return 0;
	case INO_CURRENT:
		if (current_target(fs, target, sizeof(target)) != 0)
			return -ENOENT;
		st->st_mode = S_IFLNK | 0444;
		st->st_nlink = 1;
		st->st_size = (off_t)strlen(target);
		*timeout = 0;
		return 0;
	case INO_STATS:
	case INO_METRICS:
		st->st_mode = S_IFREG | 0444; /* size 0, read like /proc: until EOF */
		st->st_nlink = 1;
		*timeout = 0;
		return 0;
	case INO_CONTROL:
		st->st_mode = S_IFREG | 0400; /* opened read-only for the ioctl */
		st->st_nlink = 1;
		*timeout = 0;
		return 0;
	default:
		break;
	}
	if (!cfs__is_node(ino))
		return -ENOENT;
	if (cfs__node_type(ino) == CFS_NODE_EPOCH || cfs__node_type(ino) == CFS_NODE_DIR) {
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 2;
		return 0;
	}
	if (cfs__node_type(ino) == CFS_NODE_INDEX) {
		st->st_mode = S_IFREG | 0444; /* size 0, read until EOF (fs_meta.c) */
		st->st_nlink = 1;
		*timeout = 0;
		return 0;
	}
	struct cfs_efile *f = (struct cfs_efile *)(uintptr_t)ino;
	st->st_mode = S_IFREG | 0444;
	st->st_nlink = 1;
	st->st_size = (off_t)f->bytes;
	st->st_blocks = (blkcnt_t)((f->bytes + 511) / 512);
	return 0;
}

static void reply_entry(fuse_req_t req, struct cfs_fs *fs, fuse_ino_t ino, double entry_timeout)
{
	struct fuse_entry_param e;
	memset(&e, 0, sizeof(e));
	e.ino = ino;
	e.generation = 0;
	if (fs_stat(fs, ino, &e.attr, &e.attr_timeout) != 0) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	e.entry_timeout = entry_timeout;
	fuse_reply_entry(req, &e);
}

/* Strict decimal epoch number: no sign, no leading zero, fits 32 bits. */
static int parse_epoch_name(const char *name, uint32_t *out)
{
	uint64_t v = 0;
	if (!name[0] || (name[0] == '0' && name[1]))
		return -ENOENT;
	for (const char *p = name; *p; p++) {
		if (*p < '0' || *p > '9')
			return -ENOENT;
		v = v * 10 + (uint64_t)(*p - '0');
		if (v > UINT32_MAX)
			return -ENOENT;
	}
	*out = (uint32_t)v;
	return 0;
}

static void fs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct cfs_fs *fs = fs_of(req);
	double tmo = fs->opts.timeout;

	switch (parent) {
	case INO_ROOT:
		if (strcmp(name, "current") == 0) {
			reply_entry(req, fs, INO_CURRENT, tmo);
			return;
		}
		if (strcmp(name, "epochs") == 0) {
			reply_entry(req, fs, INO_EPOCHS, tmo);
			return;
		}
		if (strcmp(name, ".rollcache") == 0) {
			reply_entry(req, fs, INO_META, tmo);
			return;
		}
		break;
	case INO_META:
		if (strcmp(name, "stats") == 0) {
			reply_entry(req, fs, INO_STATS, tmo);
			return;
		}
		if (strcmp(name, "metrics") == 0) {
			reply_entry(req, fs, INO_METRICS, tmo);
			return;
		}
		if (strcmp(name, "control") == 0) {
			reply_entry(req, fs, INO_CONTROL, tmo);
			return;
		}
		if (strcmp(name, "epochs") == 0) {
			reply_entry(req, fs, INO_META_EPOCHS, tmo);
			return;
		}
		break;
	case INO_EPOCHS:
	case INO_META_EPOCHS: {
		uint32_t n;
		if (parse_epoch_name(name, &n) != 0)
			break;
		struct cfs_epoch *ep = cfs_epochs_lookup(fs->set, n); /* counts the index too */
		if (!ep)
			break;
		reply_entry(req, fs,
			    parent == INO_EPOCHS ? (fuse_ino_t)(uintptr_t)ep
						 : (fuse_ino_t)(uintptr_t)&ep->index,
			    tmo);
		return;
	}
	default: {
		struct cfs_edir *dir = edir_of(parent);
		if (dir) {
			struct cfs_dent e;
			if (cfs_edir_lookup(fs->set, dir, name, &e) != 0)
				break;
			reply_entry(req, fs,
				    e.f ? (fuse_ino_t)(uintptr_t)e.f : (fuse_ino_t)(uintptr_t)e.d,
				    tmo);
			return;
		}
		if (cfs__is_node(parent)) {
			fuse_reply_err(req, ENOTDIR);
			return;
		}
		break;
	}
	}
	fuse_reply_err(req, ENOENT);
}

static void forget_one(struct cfs_fs *fs, fuse_ino_t ino, uint64_t n)
{
	if (!cfs__is_node(ino))
		return;
	if (cfs__node_type(ino) == CFS_NODE_EPOCH)
		cfs_epoch_forget(fs->set, (struct cfs_epoch *)(uintptr_t)ino, n);
	else if (cfs__node_type(ino) == CFS_NODE_DIR) /* counted on its epoch */
		cfs_epoch_forget(fs->set, ((struct cfs_edir *)(uintptr_t)ino)->ep, n);
	else if (cfs__node_type(ino) == CFS_NODE_INDEX) /* counted on its epoch */
		cfs_epoch_forget(fs->set, ((struct cfs_eindex *)(uintptr_t)ino)->ep, n);
	else
		cfs_efile_forget(fs->set, (struct cfs_efile *)(uintptr_t)ino, n);
}

static void fs_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	forget_one(fs_of(req), ino, nlookup);
	fuse_reply_none(req);
}

static void fs_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	struct cfs_fs *fs = fs_of(req);
	for (size_t i = 0; i < count; i++)
		forget_one(fs, forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void fs_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	double tmo;
	int rc = fs_stat(fs_of(req), ino, &st, &tmo);
	if (rc != 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_attr(req, &st, tmo);
}

static void fs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	fuse_reply_err(req, EROFS);
}

static void fs_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char target[32];
	if (ino != INO_CURRENT) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (current_target(fs_of(req), target, sizeof(target)) != 0) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	fuse_reply_readlink(req, target);
}

/* ---- mutations: all EROFS ------------------------------------------- */

static void fs_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	fuse_reply_err(req, EROFS);
}

static void fs_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	fuse_reply_err(req, EROFS);
}

static void fs_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, EROFS);
}

static void fs_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, EROFS);
}

static void fs_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	fuse_reply_err(req, EROFS);
}

static void fs_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	fuse_reply_err(req, EROFS);
}

static void fs_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	fuse_reply_err(req, EROFS);
}

static void fs_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			size_t size, int flags)
{
	fuse_reply_err(req, EROFS);
}

static void fs_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	fuse_reply_err(req, EROFS);
}

static void fs_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
			 struct fuse_file_info *fi)
{
	fuse_reply_err(req, EROFS);
}

static void fs_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	if (mask & W_OK)
		fuse_reply_err(req, EROFS);
	else
		fuse_reply_err(req, 0);
}

/* ---- files ------------------------------------------------------------ */

/* Whether new opens may be passed through at all. */
static bool pt_usable(const struct cfs_fs *fs)
{
	return cfs_pt_enabled(fs->pt) &&
	       !atomic_load_explicit(&fs->pt_broken, memory_order_relaxed);
}

/* Logs why a backing file was refused; stops trying when it will never work. */
static void pt_refused(struct cfs_fs *fs, const struct cfs_efile *f, int rc)
{
	atomic_fetch_add_explicit(&fs->pt_refused, 1, memory_order_relaxed);
	if (rc == -EPERM || rc == -ENOTTY || rc == -EOPNOTSUPP || rc == -EINVAL) {
		atomic_store_explicit(&fs->pt_broken, true, memory_order_relaxed);
		cmn_log(CMN_LOG_WARN,
			"FUSE passthrough refused (%s%s): the daemon serves every read; "
			"-o no_passthrough silences this",
			strerror(-rc), rc == -EPERM ? ", it needs CAP_SYS_ADMIN" : "");
	} else {
		cmn_log(CMN_LOG_INFO, "FUSE passthrough refused for %s (%s): the daemon serves it",
			f->relpath, strerror(-rc));
	}
}

/*
 * Chooses who serves the new handle's reads and counts it in the inode's io
 * mode.  Passthrough when the kernel accepted it at INIT, the daemon has
 * served the file to its last byte before (so the statistics saw a full
 * read; a passthrough handle then counts as a handle served from the page
 * cache does, handle_destroy()) and no daemon-served handle of the file is
 * open: the kernel keeps one io mode per inode and fails an open that
 * mixes them with EIO.  Returns the backing id (> 0) to put in the OPEN
 * reply, or 0: the daemon serves it.
 */
static int io_mode_enter(struct cfs_fs *fs, struct fs_handle *h)
{
	struct cfs_efile *f = h->f;
	int id = 0;
	pthread_mutex_lock(&fs->iomu);
	bool pt = f->io_pt > 0 || (pt_usable(fs) && f->io_daemon == 0 &&
				   atomic_load_explicit(&f->served_full, memory_order_relaxed) &&
				   (!fs->opts.verifier || cfs_verify_done(f)));
	if (pt && f->io_pt == 0) {
		int fd = openat(fs->dirfd, f->relpath, O_RDONLY | O_CLOEXEC);
		int rc = fd < 0 ? -errno : cfs_pt_backing_open(fs->pt, fs->devfd, fd);
		if (rc > 0) {
			f->pt_fd = fd;
			f->pt_id = rc;
		} else {
			if (fd >= 0)
				close(fd);
			pt_refused(fs, f, rc);
			pt = false;
		}
	}
	if (pt) {
		f->io_pt++;
		h->pt = true;
		id = f->pt_id;
	} else {
		f->io_daemon++;
	}
	pthread_mutex_unlock(&fs->iomu);
	return id;
}

/* Drops a passthrough count; the last one gives the backing id and fd back.  iomu held. */
static void io_pt_put(struct cfs_fs *fs, struct cfs_efile *f)
{
	if (--f->io_pt > 0)
		return;
	if (fs->devfd >= 0) /* else the ids died with the connection */
		cfs_pt_backing_close(fs->devfd, f->pt_id);
	close(f->pt_fd);
	f->pt_fd = -1;
	f->pt_id = 0;
}

/* The handle's OPEN reply left without passthrough: count it as daemon-served. */
static void io_mode_demote(struct cfs_fs *fs, struct fs_handle *h)
{
	pthread_mutex_lock(&fs->iomu);
	if (h->pt) {
		io_pt_put(fs, h->f);
		h->pt = false;
		h->f->io_daemon++;
	}
	pthread_mutex_unlock(&fs->iomu);
}

/* The handle was released: the kernel has already left its io mode. */
static void io_mode_leave(struct cfs_fs *fs, struct fs_handle *h)
{
	pthread_mutex_lock(&fs->iomu);
	if (h->pt)
		io_pt_put(fs, h->f);
	else
		h->f->io_daemon--;
	pthread_mutex_unlock(&fs->iomu);
}

static void fs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct cfs_fs *fs = fs_of(req);
	int acc = fi->flags & O_ACCMODE;
	int err = 0;

	if (ino == INO_CONTROL) {
		if (acc != O_RDONLY) {
			err = EROFS;
			goto out;
		}
		fi->direct_io = 1;
		fi->nonseekable = 1;
		fi->fh = 0;
		fuse_reply_open(req, fi);
		return;
	}
	if (acc != O_RDONLY || (fi->flags & O_TRUNC)) {
		err = EROFS;
		goto out;
	}
	if (ino == INO_STATS || ino == INO_METRICS) {
		struct fs_text *t = calloc(1, sizeof(*t));
		if (!t) {
			err = ENOMEM;
			goto out;
		}
		struct cfs_req r = {.kind =
					ino == INO_STATS ? CFS_REQ_STATS_JSON : CFS_REQ_METRICS};
		int rc = cfs_requests_call(&fs->rq, &r);
		if (rc != 0) {
			free(r.buf);
			free(t);
			err = -rc;
			goto out;
		}
		t->buf = r.buf;
		t->len = r.len;
		fi->fh = handle_add(fs, HK_TEXT, t);
		if (!fi->fh) {
			free(t->buf);
			free(t);
			err = ENOMEM;
			goto out;
		}
		fi->direct_io = 1; /* size is known only now */
		if (fuse_reply_open(req, fi) == -ENOENT)
			handle_put(fs, fi->fh, true); /* interrupted: no release will come */
		return;
	}
	if (!cfs__is_node(ino)) {
		err = EISDIR;
		goto out;
	}
	if (cfs__node_type(ino) == CFS_NODE_INDEX) {
		struct cfs__index *x;
		int rc = cfs__index_open(fs->set, ((struct cfs_eindex *)(uintptr_t)ino)->ep, &x);
		if (rc != 0) {
			err = -rc;
			goto out;
		}
		fi->fh = handle_add(fs, HK_INDEX, x);
		if (!fi->fh) {
			cfs__index_close(x);
			err = ENOMEM;
			goto out;
		}
		fi->direct_io = 1; /* size 0: read until EOF */
		if (fuse_reply_open(req, fi) == -ENOENT)
			handle_put(fs, fi->fh, true); /* interrupted: no release will come */
		return;
	}
	if (cfs__node_type(ino) != CFS_NODE_FILE) {
		err = EISDIR;
		goto out;
	}
	struct cfs_efile *f = (struct cfs_efile *)(uintptr_t)ino;
	int rc = cfs_efile_open(fs->set, f); /* the pin of invariant 3 */
	if (rc != 0) {
		err = -rc;
		goto out;
	}
	/*
	 * The backing file is opened at the first read that reaches the daemon:
	 * with keep_cache a warm open is served from the page cache and never
	 * needs it.  The pin above keeps the file on disk until release.
	 */
	struct fs_handle *h = calloc(1, sizeof(*h));
	if (!h) {
		err = ENOMEM;
		cfs_efile_release(fs->set, f);
		goto out;
	}
	h->f = f;
	h->epoch1 = cfs_epochs_current1(fs->set);
	atomic_init(&h->fd, -1);
	pthread_mutex_init(&h->mu, NULL);
	int id = io_mode_enter(fs, h); /* undone by handle_destroy() */
	fi->fh = handle_add(fs, HK_FILE, h);
	if (!fi->fh) {
		handle_destroy(fs, HK_FILE, h);
		err = ENOMEM;
		goto out;
	}
	/*
	 * Sealed files never change (invariant 1): the page cache is never
	 * stale.  The kernel refuses keep_cache with passthrough (there is no
	 * FUSE page cache to keep; the open drops what it held).
	 */
	fi->keep_cache = id == 0;
	fi->noflush = 1;
	if (id > 0) {
		handle_get(fs, fi->fh, HK_FILE); /* h outlives a release racing the reply */
		/* counted before the reply: the opener may read the stats at once */
		atomic_fetch_add_explicit(&fs->pt_opens, 1, memory_order_relaxed);
		cfs_pt_arm(id, fi->fh);
	}
	int sent = fuse_reply_open(req, fi);
	if (id > 0) {
		if (!cfs_pt_disarm()) { /* sent without passthrough, or not at all */
			atomic_fetch_sub_explicit(&fs->pt_opens, 1, memory_order_relaxed);
			io_mode_demote(fs, h);
		}
		handle_put(fs, fi->fh, false);
	}
	if (sent == -ENOENT) /* the open was interrupted: no release will come */
		handle_put(fs, fi->fh, true);
	return;
out:
	fuse_reply_err(req, err);
}

/*
 * The worker thread's read buffer (max_io bytes, allocated once per thread,
 * freed at thread exit): a malloc/free of 1 MiB per read would fault its
 * pages in again on every request.  NULL when out of memory.
 */
static pthread_key_t read_buf_key;
static pthread_once_t read_buf_once = PTHREAD_ONCE_INIT;

static void read_buf_key_init(void)
{
	if (pthread_key_create(&read_buf_key, free) != 0)
		abort(); /* only at the first read; no way to serve reads without it */
}

static char *read_buffer(struct cfs_fs *fs, size_t len)
{
	size_t cap = fs->opts.max_io ? fs->opts.max_io : (1u << 20);
	if (len > cap)
		return NULL; /* the kernel never asks for more than max_read */
	pthread_once(&read_buf_once, read_buf_key_init);
	char *buf = pthread_getspecific(read_buf_key);
	if (!buf) {
		buf = malloc(cap);
		if (buf && pthread_setspecific(read_buf_key, buf) != 0) {
			free(buf);
			buf = NULL;
		}
	}
	return buf;
}

/*
 * The handle's backing fd, opened on first use (POSIX_FADV_SEQUENTIAL:
 * shards are read front to back).  Returns the fd or -errno; any thread.
 */
static int backing_fd(struct cfs_fs *fs, struct fs_handle *h)
{
	int fd = atomic_load_explicit(&h->fd, memory_order_acquire);
	if (fd >= 0)
		return fd;
	pthread_mutex_lock(&h->mu);
	fd = atomic_load_explicit(&h->fd, memory_order_relaxed);
	if (fd < 0) {
		fd = openat(fs->dirfd, h->f->relpath, O_RDONLY | O_CLOEXEC | O_NOATIME);
		if (fd < 0 && errno == EPERM)
			fd = openat(fs->dirfd, h->f->relpath, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			fd = -errno;
			cmn_log(CMN_LOG_ERROR, "open %s: %s", h->f->relpath, strerror(-fd));
		} else {
			posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
			atomic_store_explicit(&h->fd, fd, memory_order_release);
		}
	}
	pthread_mutex_unlock(&h->mu);
	return fd;
}

/*
 * Notes a read of [off, off + len) in the handle's access pattern, switches
 * the backing fd's advice when the pattern changed, and returns in *ra_off,
 * *ra_len the backing range to read ahead after the reply (*ra_len 0: none).
 * Costs a few relaxed atomics; a syscall only on a change of pattern.
 */
static void pattern_note(struct fs_handle *h, int fd, uint64_t off, uint64_t len, uint64_t *ra_off,
			 uint64_t *ra_len)
{
	uint64_t prev = atomic_exchange_explicit(&h->next_off, off + len, memory_order_relaxed);
	bool near = off + RA_NEAR >= prev && off <= prev + RA_NEAR;
	int st = atomic_load_explicit(&h->streak, memory_order_relaxed);
	st = near ? (st > 0 ? st + 1 : 1) : (st < 0 ? st - 1 : -1);
	if (st > 1000 || st < -1000)
		st /= 2;
	atomic_store_explicit(&h->streak, st, memory_order_relaxed);
	*ra_len = 0;
	bool random = atomic_load_explicit(&h->random, memory_order_relaxed);
	if (st <= -RAND_STREAK && !random) {
		atomic_store_explicit(&h->random, true, memory_order_relaxed);
		posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
	} else if (st >= SEQ_STREAK && random) {
		atomic_store_explicit(&h->random, false, memory_order_relaxed);
		posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	}
	if (st < SEQ_STREAK)
		return;
	uint64_t end = off + len, bytes = h->f->bytes;
	uint64_t ra = atomic_load_explicit(&h->ra_end, memory_order_relaxed);
	if (end + RA_WINDOW / 2 <= ra || ra >= bytes)
		return; /* still far enough ahead */
	uint64_t from = ra > end ? ra : end;
	uint64_t to = end + RA_WINDOW < bytes ? end + RA_WINDOW : bytes;
	if (to <= from || !atomic_compare_exchange_strong_explicit(
			      &h->ra_end, &ra, to, memory_order_relaxed, memory_order_relaxed))
		return; /* another read of this handle took it */
	*ra_off = from;
	*ra_len = to - from;
}

/* Asks the kernel to read [off, off + len) of fd into the page cache. */
static void backing_readahead(int fd, uint64_t off, uint64_t len)
{
	for (uint64_t o = off; o < off + len; o += RA_CHUNK) {
		uint64_t n = off + len - o < RA_CHUNK ? off + len - o : RA_CHUNK;
		if (readahead(fd, (off_t)o, (size_t)n) != 0)
			return;
	}
}

/* A read of an index file (fs_meta.c): text made from the snapshot, no read accounting. */
static void fs_read_index(fuse_req_t req, struct cfs_fs *fs, size_t size, off_t off,
			  struct fuse_file_info *fi)
{
	struct cfs__index *x = handle_get(fs, fi->fh, HK_INDEX);
	char *buf = x ? read_buffer(fs, size) : NULL;
	size_t got = 0;
	int rc = x ? -ENOMEM : -EBADF;
	if (buf)
		rc = cfs__index_read(x, (uint64_t)off, buf, size, &got);
	if (rc != 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_buf(req, buf, got);
	if (x)
		handle_put(fs, fi->fh, false);
}

static void fs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct cfs_fs *fs = fs_of(req);
	char *buf = NULL;
	int err = 0;

	if (ino == INO_CONTROL) { /* commands come by ioctl; reading it is empty */
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (ino == INO_STATS || ino == INO_METRICS) {
		struct fs_text *t = handle_get(fs, fi->fh, HK_TEXT);
		if (!t) {
			fuse_reply_err(req, EBADF);
			return;
		}
		size_t o = (size_t)off < t->len ? (size_t)off : t->len;
		size_t n = t->len - o < size ? t->len - o : size;
		fuse_reply_buf(req, t->buf + o, n);
		handle_put(fs, fi->fh, false);
		return;
	}
	if (cfs__is_node(ino) && cfs__node_type(ino) == CFS_NODE_INDEX) {
		fs_read_index(req, fs, size, off, fi);
		return;
	}
	struct fs_handle *h = handle_get(fs, fi->fh, HK_FILE);
	if (!h) {
		fuse_reply_err(req, EBADF);
		return;
	}
	struct cfs_efile *f = h->f;
	uint64_t len = 0;
	if ((uint64_t)off < f->bytes)
		len = f->bytes - (uint64_t)off < size ? f->bytes - (uint64_t)off : size;
	int fd = backing_fd(fs, h);
	if (fd < 0) {
		err = -fd;
		goto out;
	}
	int vrc = cfs_verify_read(fs->opts.verifier, f, fd, (uint64_t)off, len);
	if (vrc != 0) { /* a corrupt record is never returned (verify.c V1) */
		err = -vrc;
		goto out;
	}
	bool first = !atomic_exchange_explicit(&h->read_once, true, memory_order_relaxed);
	uint64_t ra_off = 0, ra_len = 0;
	if (len)
		pattern_note(h, fd, (uint64_t)off, len, &ra_off, &ra_len);

	if (fs->opts.splice_read) {
		struct fuse_bufvec bv = FUSE_BUFVEC_INIT(len);
		bv.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
		bv.buf[0].fd = fd;
		bv.buf[0].pos = off;
		pthread_mutex_lock(&h->mu);
		cfs_efile_account(fs->set, f, (uint64_t)off, len, first, &h->end_done, h->epoch1);
		pthread_mutex_unlock(&h->mu);
		int rc = fuse_reply_data(req, &bv, FUSE_BUF_SPLICE_MOVE);
		if (rc != 0 && rc != -ENOENT) /* -ENOENT: the request was interrupted */
			cmn_log(CMN_LOG_WARN, "read %s: reply: %s", f->relpath, strerror(-rc));
		goto done;
	}
	buf = read_buffer(fs, len);
	if (!buf) {
		err = ENOMEM;
		goto out;
	}
	size_t got = 0;
	while (got < len) {
		ssize_t r = pread(fd, buf + got, len - got, off + (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			err = errno;
			goto out;
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	pthread_mutex_lock(&h->mu);
	cfs_efile_account(fs->set, f, (uint64_t)off, got, first, &h->end_done, h->epoch1);
	pthread_mutex_unlock(&h->mu);
	fuse_reply_buf(req, buf, got);
done:
	/* after the reply: the reader goes on while the disk reads ahead */
	if (ra_len)
		backing_readahead(fd, ra_off, ra_len);
	handle_put(fs, fi->fh, false);
	return;
out:
	handle_put(fs, fi->fh, false);
	fuse_reply_err(req, err);
}

/*
 * The control channel: RC_CONTROL_IOC on .rollcache/control carries one
 * command (include/rollcache/control.h) to the daemon's control thread and
 * returns its answer; the FUSE worker sleeps meanwhile (a `next wait` up to
 * wait_timeout).  Any other ioctl, or one on another node, is ENOTTY.
 */
static void fs_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg,
		     struct fuse_file_info *fi, unsigned flags, const void *in_buf, size_t in_bufsz,
		     size_t out_bufsz)
{
	struct cfs_fs *fs = fs_of(req);
	char text[RC_CONTROL_CMD_MAX];
	int err = 0;

	(void)arg;
	(void)fi;
	(void)out_bufsz;
	if (ino != INO_CONTROL || cmd != RC_CONTROL_IOC || (flags & FUSE_IOCTL_COMPAT)) {
		err = ENOTTY;
		goto out;
	}
	if (in_bufsz != sizeof(struct rc_control)) {
		err = EINVAL;
		goto out;
	}
	memcpy(text, in_buf, sizeof(text));
	if (!memchr(text, '\0', sizeof(text))) {
		err = EINVAL;
		goto out;
	}
	size_t n = strlen(text);
	while (n && (text[n - 1] == '\n' || text[n - 1] == ' ' || text[n - 1] == '\r'))
		text[--n] = '\0';
	struct cfs_req r = {.kind = CFS_REQ_CONTROL, .cmd = text};
	int rc = cfs_requests_call(&fs->rq, &r);
	if (rc != 0) {
		err = -rc;
		goto out;
	}
	fuse_reply_ioctl(req, 0, NULL, 0);
	return;
out:
	fuse_reply_err(req, err);
}

/*
 * Tells the kernel to forget the cached entry `name` of directory parent,
 * so that a lookup of it reaches the daemon again (which answers ENOENT for
 * a retired file).  The requests that may destroy a file handle (release,
 * read, an interrupted open) are none of the operations on the parent or
 * the file that libfuse's fuse_lowlevel_notify_inval_entry() says may
 * deadlock with it; the kernel takes the parent's lock, which a lookup or
 * readdir in it holds only until another worker thread answers.
 */
static void drop_entry(struct cfs_fs *fs, fuse_ino_t parent, const char *name)
{
	int rc = fuse_lowlevel_notify_inval_entry(fs->se, parent, name, strlen(name));
	if (rc != 0 && rc != -ENOENT) /* -ENOENT: the kernel holds no such entry */
		cmn_log(CMN_LOG_DEBUG, "dropping the kernel's entry of retired %s: %s", name,
			strerror(-rc));
}

static void handle_destroy(struct cfs_fs *fs, enum hkind kind, void *p)
{
	if (kind == HK_TEXT) {
		struct fs_text *t = p;
		free(t->buf);
		free(t);
	} else if (kind == HK_FILE) {
		struct fs_handle *h = p;
		struct cfs_efile *f = h->f;
		if (!atomic_load(&h->read_once) && fs->accounting)
			cfs_efile_account_cached(fs->set, f,
						 h->epoch1); /* page cache or passthrough */
		int fd = atomic_load(&h->fd);
		if (fd >= 0)
			close(fd);
		io_mode_leave(fs, h);
		pthread_mutex_destroy(&h->mu);
		free(h);
		/* may complete an eviction (invariant 3), or retire f (retire = read) */
		const void *parent;
		char name[CFS_NAME_MAX + 1];
		if (cfs_efile_release_retired(fs->set, f, &parent, name, sizeof(name)) &&
		    fs->accounting)
			drop_entry(fs, (fuse_ino_t)(uintptr_t)parent, name);
	} else if (kind == HK_INDEX) {
		cfs__index_close(p);
	} else {
		struct fs_dir *d = p;
		if (d->ep)
			cfs_epoch_releasedir(fs->set, d->ep);
		free(d->numbers);
		free(d);
	}
}

static void fs_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct cfs_fs *fs = fs_of(req);
	if (ino != INO_CONTROL && fi->fh)
		handle_put(fs, fi->fh, true); /* the last put destroys it */
	fuse_reply_err(req, 0);
}

static void fs_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct cfs_fs *fs = fs_of(req);
	struct statvfs sv;
	struct cfs_budget_stat bs;
	cfs_budget_get(fs->budget, &bs);
	uint64_t limit = bs.limit, used = bs.sealed + bs.reserved + bs.draining;
	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = 4096;
	sv.f_frsize = 4096;
	sv.f_blocks = limit / 4096;
	sv.f_bfree = used < limit ? (limit - used) / 4096 : 0;
	sv.f_bavail = sv.f_bfree;
	struct cfs_epochs_stat es;
	cfs_epochs_stat(fs->set, &es);
	sv.f_files = es.files_alive + INO_FIXED_MAX;
	sv.f_namemax = 255;
	fuse_reply_statfs(req, &sv);
}

/* ---- directories ------------------------------------------------------ */

static void fs_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct cfs_fs *fs = fs_of(req);
	struct fs_dir *d = NULL;
	int err = 0;

	if (cfs__is_node(ino) && !edir_of(ino)) {
		err = ENOTDIR;
		goto out;
	}
	if (!cfs__is_node(ino) && ino != INO_ROOT && ino != INO_EPOCHS && ino != INO_META &&
	    ino != INO_META_EPOCHS) {
		err = ENOTDIR;
		goto out;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		err = EROFS;
		goto out;
	}
	d = calloc(1, sizeof(*d));
	if (!d) {
		err = ENOMEM;
		goto out;
	}
	if (ino == INO_EPOCHS || ino == INO_META_EPOCHS) {
		int rc = cfs_epochs_list_numbers(fs->set, &d->numbers, &d->nnumbers);
		if (rc != 0) {
			err = -rc;
			goto out;
		}
	} else if (cfs__is_node(ino)) {
		d->dir = edir_of(ino);
		d->ep = d->dir->ep;
		cfs_epoch_opendir(fs->set, d->ep); /* holds the epoch and its tree */
	}
	fi->fh = handle_add(fs, HK_DIR, d);
	if (!fi->fh) {
		handle_destroy(fs, HK_DIR, d);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fi->cache_readdir = 0;
	fuse_reply_open(req, fi);
	return;
out:
	free(d);
	fuse_reply_err(req, err);
}

/* One directory entry by index: 0 ".", 1 "..", then the children. */
static bool dir_entry(struct cfs_fs *fs, fuse_ino_t ino, struct fs_dir *d, size_t i,
		      const char **name, char *namebuf, size_t namelen, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	if (i == 0) {
		*name = ".";
		st->st_ino = ino;
		st->st_mode = S_IFDIR;
		return true;
	}
	if (i == 1) {
		*name = "..";
		if (ino == INO_ROOT || ino == INO_EPOCHS || ino == INO_META)
			st->st_ino = INO_ROOT;
		else if (ino == INO_META_EPOCHS)
			st->st_ino = INO_META;
		else if (d->dir && d->dir != &d->ep->root)
			st->st_ino = d->dir->parent ? (ino_t)(uintptr_t)d->dir->parent
						    : (ino_t)(uintptr_t)d->ep;
		else
			st->st_ino = INO_EPOCHS;
		st->st_mode = S_IFDIR;
		return true;
	}
	i -= 2;
	if (ino == INO_ROOT) {
		static const char *const names[] = {"current", "epochs", ".rollcache"};
		static const fuse_ino_t inos[] = {INO_CURRENT, INO_EPOCHS, INO_META};
		static const mode_t modes[] = {S_IFLNK, S_IFDIR, S_IFDIR};
		if (i >= 3)
			return false;
		*name = names[i];
		st->st_ino = inos[i];
		st->st_mode = modes[i];
		return true;
	}
	if (ino == INO_META) {
		static const char *const names[] = {"control", "epochs", "metrics", "stats"};
		static const fuse_ino_t inos[] = {INO_CONTROL, INO_META_EPOCHS, INO_METRICS,
						  INO_STATS};
		static const mode_t modes[] = {S_IFREG, S_IFDIR, S_IFREG, S_IFREG};
		if (i >= 4)
			return false;
		*name = names[i];
		st->st_ino = inos[i];
		st->st_mode = modes[i];
		return true;
	}
	if (ino == INO_EPOCHS || ino == INO_META_EPOCHS) {
		if (i >= d->nnumbers)
			return false;
		snprintf(namebuf, namelen, "%" PRIu32, d->numbers[i]);
		*name = namebuf;
		st->st_ino = ino; /* placeholder: readdir inode numbers are hints */
		st->st_mode = ino == INO_EPOCHS ? S_IFDIR : S_IFREG;
		return true;
	}
	/* the tree is immutable and held by the open handle (nopendir) */
	if (!d->dir || !d->ep->listed || i >= d->dir->nents)
		return false;
	const struct cfs_dent *e = &d->dir->ents[i];
	*name = e->f && cfs_efile_deleted(fs->set, e->f) ? NULL : e->name; /* retired: skip */
	st->st_ino = e->f ? (ino_t)(uintptr_t)e->f : (ino_t)(uintptr_t)e->d;
	st->st_mode = e->f ? S_IFREG : S_IFDIR;
	return true;
}

static void fs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct cfs_fs *fs = fs_of(req);
	struct fs_dir *d = handle_get(fs, fi->fh, HK_DIR);
	char *buf = d ? malloc(size) : NULL;
	size_t used = 0;
	char namebuf[32];

	if (!buf) {
		fuse_reply_err(req, d ? ENOMEM : EBADF);
		if (d)
			handle_put(fs, fi->fh, false);
		return;
	}
	for (size_t i = (size_t)off;; i++) {
		const char *name;
		struct stat st;
		if (!dir_entry(fs, ino, d, i, &name, namebuf, sizeof(namebuf), &st))
			break;
		if (!name)
			continue;
		size_t need =
		    fuse_add_direntry(req, buf + used, size - used, name, &st, (off_t)(i + 1));
		if (need > size - used)
			break;
		used += need;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
	handle_put(fs, fi->fh, false);
}

static void fs_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	handle_put(fs_of(req), fi->fh, true);
	fuse_reply_err(req, 0);
}

/* ---- session ------------------------------------------------------------ */

static void fs_init(void *userdata, struct fuse_conn_info *conn)
{
	struct cfs_fs *fs = userdata;
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	if (fs->opts.splice_read && (conn->capable & FUSE_CAP_SPLICE_WRITE))
		conn->want |= FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE;
	if (conn->capable & FUSE_CAP_ASYNC_READ)
		conn->want |= FUSE_CAP_ASYNC_READ;
	/*
	 * `current` is read at every open through it: let the kernel keep its
	 * text (one READLINK round trip less per open); the daemon drops it at
	 * each switch (cfs_fs_current_changed()).
	 */
	if (conn->capable & FUSE_CAP_CACHE_SYMLINKS)
		conn->want |= FUSE_CAP_CACHE_SYMLINKS;
	conn->want &= ~(unsigned)FUSE_CAP_WRITEBACK_CACHE;
	/* sealed files never change (invariant 1): no size checks before cached reads */
	conn->want &= ~(unsigned)FUSE_CAP_AUTO_INVAL_DATA;
	if (fs->opts.max_io) {
		conn->max_write = fs->opts.max_io; /* also sets max_pages */
		conn->max_read = fs->opts.max_io;  /* must equal -o max_read */
	}
	if (fs->opts.max_readahead)
		conn->max_readahead = fs->opts.max_readahead;
	conn->time_gran = 1;
}

static const struct fuse_lowlevel_ops fs_ops = {
    .init = fs_init,
    .lookup = fs_lookup,
    .forget = fs_forget,
    .forget_multi = fs_forget_multi,
    .getattr = fs_getattr,
    .setattr = fs_setattr,
    .readlink = fs_readlink,
    .mknod = fs_mknod,
    .mkdir = fs_mkdir,
    .unlink = fs_unlink,
    .rmdir = fs_unlink,
    .symlink = fs_symlink,
    .rename = fs_rename,
    .link = fs_link,
    .open = fs_open,
    .read = fs_read,
    .ioctl = fs_ioctl,
    .release = fs_release,
    .opendir = fs_opendir,
    .readdir = fs_readdir,
    .releasedir = fs_releasedir,
    .statfs = fs_statfs,
    .setxattr = fs_setxattr,
    .getxattr = cfs__fs_getxattr,
    .listxattr = cfs__fs_listxattr,
    .removexattr = fs_removexattr,
    .access = fs_access,
    .create = fs_create,
    .fallocate = fs_fallocate,
};

__attribute__((format(printf, 2, 0))) static void fuse_log_to_cmn(enum fuse_log_level level,
								  const char *fmt, va_list ap)
{
	enum cmn_log_level l = level <= FUSE_LOG_ERR	   ? CMN_LOG_ERROR
			       : level <= FUSE_LOG_WARNING ? CMN_LOG_WARN
			       : level <= FUSE_LOG_INFO	   ? CMN_LOG_INFO
							   : CMN_LOG_DEBUG;
	char line[1024];
	vsnprintf(line, sizeof(line), fmt, ap);
	size_t n = strlen(line);
	while (n && line[n - 1] == '\n')
		line[--n] = '\0';
	cmn_log(l, "%s%s", strncmp(line, "fuse:", 5) == 0 ? "" : "fuse: ", line);
}

void cfs_fs_route_log(void)
{
	fuse_set_log_func(fuse_log_to_cmn);
}

/* Appends ",k" or "k" to a bounded option string; -E2BIG when it does not fit. */
static int opt_add(char *buf, size_t len, const char *opt)
{
	size_t used = strlen(buf);
	int n = snprintf(buf + used, len - used, "%s%s", used ? "," : "", opt);
	return n < 0 || (size_t)n >= len - used ? -E2BIG : 0;
}

/* fsname may hold ',' or '\\', which -o parsing treats specially: escape them. */
static void escape_opt(const char *in, char *out, size_t len)
{
	size_t o = 0;
	for (; *in && o + 3 < len; in++) {
		if (*in == ',' || *in == '\\')
			out[o++] = '\\';
		out[o++] = *in;
	}
	out[o] = '\0';
}

/*
 * The largest request (bytes, whole pages) that libfuse 3.14 can answer by
 * splice: fuse_send_data_iov() needs a pipe of the reply plus three pages
 * and falls back to a copy through a fresh buffer when F_SETPIPE_SZ refuses
 * that, i.e. above /proc/sys/fs/pipe-max-size without CAP_SYS_RESOURCE.
 * Returns `want` when it fits.
 */
static uint32_t splice_max_io(uint32_t want)
{
	long page = sysconf(_SC_PAGESIZE);
	unsigned long pipe_max = 1u << 20;
	FILE *f = fopen("/proc/sys/fs/pipe-max-size", "re");
	if (f) {
		if (fscanf(f, "%lu", &pipe_max) != 1)
			pipe_max = 1u << 20;
		fclose(f);
	}
	if (page <= 0)
		page = 4096;
	unsigned long cap =
	    pipe_max > 4ul * (unsigned long)page ? pipe_max - 4ul * (unsigned long)page : 0;
	cap -= cap % (unsigned long)page;
	if (cap < 64ul * 1024)
		cap = 64ul * 1024;
	return !want || want <= cap ? want : (uint32_t)cap;
}

/* libfuse's custom I/O (fuse_session_custom_io): passthrough.c sees every message. */
static ssize_t fs_io_read(int fd, void *buf, size_t len, void *userdata)
{
	struct cfs_fs *fs = userdata;
	return cfs_pt_read(fs->pt, fd, buf, len);
}

static ssize_t fs_io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	struct cfs_fs *fs = userdata;
	return cfs_pt_writev(fs->pt, fd, iov, count);
}

static const struct fuse_custom_io fs_io = {.read = fs_io_read, .writev = fs_io_writev};

int cfs_fs_mount(struct cfs_fs **out, const char *mountpoint, struct cfs_epochs *set,
		 struct cfs_budget *budget, int cache_dirfd, const struct cfs_fs_opts *opts,
		 char *err, size_t errlen)
{
	struct cfs_fs *fs = calloc(1, sizeof(*fs));
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	char o[4096] = "";
	char esc[1024];
	int rc = -ENOMEM;

	if (!fs)
		goto fail;
	pthread_mutex_init(&fs->hmu, NULL);
	pthread_mutex_init(&fs->iomu, NULL);
	fs->devfd = -1;
	cfs_requests_init(&fs->rq);
	fs->set = set;
	fs->budget = budget;
	fs->dirfd = cache_dirfd;
	fs->opts = *opts;
	if (opts->splice_read)
		fs->opts.max_io = splice_max_io(opts->max_io);
	fs->uid = getuid();
	fs->gid = getgid();
	clock_gettime(CLOCK_REALTIME, &fs->t0);
	cfs_fs_route_log();

	escape_opt(opts->fsname ? opts->fsname : "rollcache", esc, sizeof(esc));
	char kv[1100];
	snprintf(kv, sizeof(kv), "fsname=%s", esc);
	rc = opt_add(o, sizeof(o), kv);
	if (rc == 0)
		rc = opt_add(o, sizeof(o), "subtype=rollcache");
	if (rc == 0) /* `ro` in /proc/mounts: the kernel refuses every write */
		rc = opt_add(o, sizeof(o), "ro");
	if (rc == 0 && fs->opts.max_io) {
		snprintf(kv, sizeof(kv), "max_read=%" PRIu32, fs->opts.max_io);
		rc = opt_add(o, sizeof(o), kv);
	}
	if (rc == 0 && opts->extra_opts && opts->extra_opts[0])
		rc = opt_add(o, sizeof(o), opts->extra_opts);
	if (rc != 0) {
		snprintf(err, errlen, "mount options too long");
		goto fail;
	}
	rc = -ENOMEM;
	if (fuse_opt_add_arg(&args, "rollcache") || fuse_opt_add_arg(&args, "-o") ||
	    fuse_opt_add_arg(&args, o))
		goto fail_msg;
	if (opts->debug && fuse_opt_add_arg(&args, "-d"))
		goto fail_msg;

	fs->se = fuse_session_new(&args, &fs_ops, sizeof(fs_ops), fs);
	if (!fs->se) {
		rc = -EINVAL;
		snprintf(err, errlen, "cannot start a FUSE session with options '%s' (see the log)",
			 o);
		goto fail;
	}
	if (fuse_session_mount(fs->se, mountpoint) != 0) {
		rc = -EIO;
		snprintf(
		    err, errlen,
		    "cannot mount on %s: is it an existing empty directory, is /dev/fuse there, "
		    "and is it not mounted already?",
		    mountpoint);
		goto fail;
	}
	fs->mounted = true;
	fs->devfd = fuse_session_fd(fs->se);
	if (opts->passthrough) {
		/* the same fd, read and written through passthrough.c from now on */
		fs->pt = cfs_pt_new();
		if (!fs->pt || fuse_session_custom_io(fs->se, &fs_io, fs->devfd) != 0) {
			rc = -ENOMEM;
			snprintf(err, errlen, "cannot set up FUSE passthrough (out of memory)");
			goto fail;
		}
	}
	fs->accounting = true;
	fuse_opt_free_args(&args);
	*out = fs;
	return 0;

fail_msg:
	snprintf(err, errlen, "out of memory");
fail:
	fuse_opt_free_args(&args);
	if (fs && fs->mounted)
		fuse_session_unmount(fs->se);
	if (fs && fs->se)
		fuse_session_destroy(fs->se);
	if (fs) {
		pthread_mutex_destroy(&fs->hmu);
		pthread_mutex_destroy(&fs->iomu);
		cfs_pt_free(fs->pt);
	}
	free(fs);
	return rc;
}

int cfs_fs_loop(struct cfs_fs *fs)
{
	/*
	 * libfuse leaves a signal alone when it is ignored, and a shell starts
	 * background jobs with SIGINT ignored: SIGINT and SIGTERM must unmount
	 * cleanly however we were started (SIGHUP stays ignored under nohup).
	 */
	struct sigaction dfl;
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigemptyset(&dfl.sa_mask);
	sigaction(SIGINT, &dfl, NULL);
	sigaction(SIGTERM, &dfl, NULL);
	if (fuse_set_signal_handlers(fs->se) == 0)
		fs->signals = true;
	struct fuse_loop_config *cfg = fuse_loop_cfg_create();
	if (!cfg)
		return -ENOMEM;
	fuse_loop_cfg_set_clone_fd(cfg, 0);
	if (fs->opts.threads)
		fuse_loop_cfg_set_max_threads(cfg, fs->opts.threads);
	fuse_loop_cfg_set_idle_threads(cfg, 4);
	int rc = fuse_session_loop_mt(fs->se, cfg);
	fuse_loop_cfg_destroy(cfg);
	if (fs->signals) {
		fuse_remove_signal_handlers(fs->se);
		fs->signals = false;
	}
	return rc < 0 ? rc : 0;
}

void cfs_fs_exit(struct cfs_fs *fs)
{
	fuse_session_exit(fs->se);
}

bool cfs_fs_exited(struct cfs_fs *fs)
{
	return fuse_session_exited(fs->se) != 0;
}

void cfs_fs_passthrough(const struct cfs_fs *fs, struct cfs_fs_pt_stats *st)
{
	st->enabled = pt_usable(fs);
	st->opens = atomic_load_explicit(&fs->pt_opens, memory_order_relaxed);
	st->refused = atomic_load_explicit(&fs->pt_refused, memory_order_relaxed);
}

void cfs_fs_current_changed(struct cfs_fs *fs)
{
	int rc = fuse_lowlevel_notify_inval_inode(fs->se, INO_CURRENT, 0, 0);
	if (rc != 0 && rc != -ENOENT) /* -ENOENT: the kernel has not looked it up */
		cmn_log(CMN_LOG_WARN, "dropping the kernel's cached 'current' link: %s",
			strerror(-rc));
}

void cfs_fs_epoch_retired(struct cfs_fs *fs, uint32_t number)
{
	char name[16];
	snprintf(name, sizeof(name), "%" PRIu32, number);
	int rc = fuse_lowlevel_notify_inval_entry(fs->se, INO_EPOCHS, name, strlen(name));
	if (rc != 0 && rc != -ENOENT)
		cmn_log(CMN_LOG_DEBUG, "invalidate epochs/%s: %s", name, strerror(-rc));
	rc = fuse_lowlevel_notify_inval_entry(fs->se, INO_META_EPOCHS, name, strlen(name));
	if (rc != 0 && rc != -ENOENT)
		cmn_log(CMN_LOG_DEBUG, "invalidate .rollcache/epochs/%s: %s", name, strerror(-rc));
}

/* Undoes mountinfo's octal escapes (\040 for a space) in place. */
static void unescape_mountinfo(char *s)
{
	char *o = s;
	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*o++ = *s;
		}
	}
	*o = '\0';
}

int cfs_fs_set_readahead(const char *mountpoint, uint32_t kib)
{
	FILE *mi = fopen("/proc/self/mountinfo", "re");
	char line[4096], dev[64] = "";
	if (!mi)
		return -errno;
	while (fgets(line, sizeof(line), mi)) {
		char id[32], majmin[64], root[1024], mp[1024];
		if (sscanf(line, "%31s %*s %63s %1023s %1023s", id, majmin, root, mp) != 4)
			continue;
		unescape_mountinfo(mp);
		if (strcmp(mp, mountpoint) == 0)
			snprintf(dev, sizeof(dev), "%s", majmin); /* the last one is on top */
	}
	fclose(mi);
	if (!dev[0])
		return -ENOENT;
	char path[128];
	snprintf(path, sizeof(path), "/sys/class/bdi/%s/read_ahead_kb", dev);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	char v[16];
	int n = snprintf(v, sizeof(v), "%" PRIu32, kib);
	ssize_t w = write(fd, v, (size_t)n);
	int rc = w == n ? 0 : -errno;
	close(fd);
	return rc;
}

void cfs_fs_free(struct cfs_fs *fs)
{
	if (!fs)
		return;
	if (fs->mounted)
		fuse_session_unmount(fs->se);
	fuse_session_destroy(fs->se);
	fs->devfd = -1;
	/* handles the kernel never released (unmount with files open) */
	fs->accounting = false;
	for (uint32_t i = 0; i < fs->nslots; i++)
		if (fs->slots[i].h)
			handle_destroy(fs, fs->slots[i].kind, fs->slots[i].h);
	free(fs->slots);
	pthread_mutex_destroy(&fs->hmu);
	pthread_mutex_destroy(&fs->iomu);
	cfs_requests_close(&fs->rq);
	cfs_requests_destroy(&fs->rq);
	cfs_pt_free(fs->pt);
	free(fs);
}

struct cfs_requests *cfs_fs_requests(struct cfs_fs *fs)
{
	return &fs->rq;
}
