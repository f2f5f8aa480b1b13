/*
 * fs_read.c - the read path of the FUSE view: open, read and release of
 * the sealed files, the stats and metrics texts, the epochs' index files
 * and .rollcache/control.
 *
 * Owns the open-file handles (struct cfs__file, cfs__text) and the io mode
 * of each inode (daemon-served or passed through).  Does not own names or
 * attributes (fs_node.c), the index text (fs_meta.c) or the handle table
 * (fs_handle.c).  Reads never query SQLite: they go to an fd opened on the
 * backing file at the handle's first read (a warm open, served from the
 * kernel's page cache, costs no syscall beyond its reply).
 *
 * Statistics: the read path only bumps atomics in the efile (epoch.c); the
 * daemon batches them into the catalog from another thread.  A handle never
 * read by the daemon is counted as served from the page cache at release.
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
 * Integrity (verify.c): before the daemon serves any byte of a file it
 * checks the whole file once (cfs_verify_read, V2); a file that fails
 * answers EIO to every read and is queued for the daemon to drop.  A file is passed through
 * only once all of it passed (cfs_verify_done).
 *
 * Retired files (retire = read): the release that retires a file (epoch.c)
 * takes it out of the listing; the kernel holds no entry of it to drop, since
 * a file that may retire is looked up with entry timeout 0 (fs_node.c), so
 * the next lookup of it reaches the daemon and gets ENOENT.
 *
 * Limits: splice_read is capped to what fits a pipe (fs.c splice_max_io;
 * docs/bench-fuse.md, "splice vs pread").  Locking: fs_i.h.  Every handler
 * replies exactly once, through one exit label where it has more than one
 * way out.
 */
#include "cachefs/fs_i.h"

#include "cachefs/names.h"
#include "cachefs/verify.h"
#include "common/log.h"
#include "common/thread_buf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
struct cfs__file {
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
struct cfs__text {
	char *buf;
	size_t len;
};

/* ---- io mode: who serves a handle's reads ------------------------------ */

bool cfs__pt_usable(const struct cfs_fs *fs)
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
		char rel[CFS_RELPATH_MAX];
		cmn_log(CMN_LOG_INFO, "FUSE passthrough refused for %s (%s): the daemon serves it",
			cfs_efile_relpath(f, rel), strerror(-rc));
	}
}

/*
 * Chooses who serves the new handle's reads and counts it in the inode's io
 * mode.  Passthrough when the kernel accepted it at INIT, the daemon has
 * served the file to its last byte before (so the statistics saw a full
 * read; a passthrough handle then counts as a handle served from the page
 * cache does, cfs__file_close()) and no daemon-served handle of the file is
 * open: the kernel keeps one io mode per inode and fails an open that
 * mixes them with EIO.  Returns the backing id (> 0) to put in the OPEN
 * reply, or 0: the daemon serves it.
 */
static int io_mode_enter(struct cfs_fs *fs, struct cfs__file *h)
{
	struct cfs_efile *f = h->f;
	int id = 0;
	pthread_mutex_lock(&fs->iomu);
	bool pt = f->io_pt > 0 || (cfs__pt_usable(fs) && f->io_daemon == 0 &&
				   atomic_load_explicit(&f->served_full, memory_order_relaxed) &&
				   (!fs->opts.verifier || cfs_verify_done(f)));
	if (pt && f->io_pt == 0) {
		char rel[CFS_RELPATH_MAX];
		int fd = openat(fs->dirfd, cfs_efile_relpath(f, rel), O_RDONLY | O_CLOEXEC);
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
static void io_mode_demote(struct cfs_fs *fs, struct cfs__file *h)
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
static void io_mode_leave(struct cfs_fs *fs, struct cfs__file *h)
{
	pthread_mutex_lock(&fs->iomu);
	if (h->pt)
		io_pt_put(fs, h->f);
	else
		h->f->io_daemon--;
	pthread_mutex_unlock(&fs->iomu);
}

/* ---- open --------------------------------------------------------------- */

/*
 * The open* functions below reply to the open and return 0, or return
 * -errno without replying: cfs__fs_open() replies that error.
 */

/* .rollcache/control, read-only: a handle for the ioctl, no state (fh 0). */
static int open_control(fuse_req_t req, struct fuse_file_info *fi)
{
	fi->direct_io = 1;
	fi->nonseekable = 1;
	fi->fh = 0;
	fuse_reply_open(req, fi);
	return 0;
}

/* Replies to an open whose handle is in fi->fh; an interrupted open drops it at once. */
static void reply_open_handle(fuse_req_t req, struct cfs_fs *fs, struct fuse_file_info *fi)
{
	if (fuse_reply_open(req, fi) == -ENOENT)
		cfs__handle_put(fs, fi->fh, true); /* interrupted: no release will come */
}

/* stats or metrics: the daemon renders the text at open; the handle keeps it. */
static int open_text(fuse_req_t req, struct cfs_fs *fs, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct cfs__text *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	struct cfs_req r = {.kind = ino == INO_STATS ? CFS_REQ_STATS_JSON : CFS_REQ_METRICS};
	int rc = cfs_requests_call(&fs->rq, &r);
	if (rc != 0) {
		free(r.buf);
		free(t);
		return rc;
	}
	t->buf = r.buf;
	t->len = r.len;
	fi->fh = cfs__handle_add(fs, CFS_HK_TEXT, t);
	if (!fi->fh) {
		cfs__text_close(t);
		return -ENOMEM;
	}
	fi->direct_io = 1; /* size is known only now */
	reply_open_handle(req, fs, fi);
	return 0;
}

void cfs__text_close(struct cfs__text *t)
{
	free(t->buf);
	free(t);
}

/* .rollcache/epochs/<E>: an index made as it is read (fs_meta.c). */
static int open_index(fuse_req_t req, struct cfs_fs *fs, struct cfs_eindex *ix,
		      struct fuse_file_info *fi)
{
	struct cfs__index *x;
	int rc = cfs__index_open(fs->set, ix->ep, &x);
	if (rc != 0)
		return rc;
	fi->fh = cfs__handle_add(fs, CFS_HK_INDEX, x);
	if (!fi->fh) {
		cfs__index_close(x);
		return -ENOMEM;
	}
	fi->direct_io = 1; /* size 0: read until EOF */
	reply_open_handle(req, fs, fi);
	return 0;
}

/*
 * A new handle on f, pinned (cfs_efile_open, the pin of invariant 3) and
 * counted in f's io mode; *id is its backing id (0: the daemon serves it).
 * Returns 0 and *out, or -errno with nothing held.
 */
static int file_handle_new(struct cfs_fs *fs, struct cfs_efile *f, struct cfs__file **out, int *id)
{
	int rc = cfs_efile_open(fs->set, f);
	if (rc != 0)
		return rc;
	/*
	 * The backing file is opened at the first read that reaches the daemon:
	 * with keep_cache a warm open is served from the page cache and never
	 * needs it.  The pin above keeps the file on disk until release.
	 */
	struct cfs__file *h = calloc(1, sizeof(*h));
	if (!h) {
		cfs_efile_release(fs->set, f);
		return -ENOMEM;
	}
	h->f = f;
	h->epoch1 = cfs_epochs_current1(fs->set);
	atomic_init(&h->fd, -1);
	pthread_mutex_init(&h->mu, NULL);
	*id = io_mode_enter(fs, h); /* undone by cfs__file_close() */
	*out = h;
	return 0;
}

/* A sealed file: pinned until release; passed through when io_mode_enter() says so. */
static int open_file(fuse_req_t req, struct cfs_fs *fs, struct cfs_efile *f,
		     struct fuse_file_info *fi)
{
	struct cfs__file *h;
	int id;
	/* changed on disk since its first open: checked again, not passed through (V5) */
	cfs_verify_open(fs->opts.verifier, f, fs->dirfd);
	int rc = file_handle_new(fs, f, &h, &id);
	if (rc != 0)
		return rc;
	fi->fh = cfs__handle_add(fs, CFS_HK_FILE, h);
	if (!fi->fh) {
		cfs__file_close(fs, h);
		return -ENOMEM;
	}
	/*
	 * Sealed files never change (invariant 1): the page cache is never
	 * stale.  The kernel refuses keep_cache with passthrough (there is no
	 * FUSE page cache to keep; the open drops what it held).
	 */
	fi->keep_cache = id == 0;
	fi->noflush = 1;
	if (id > 0) {
		/* h outlives a release racing the reply */
		cfs__handle_get(fs, fi->fh, CFS_HK_FILE);
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
		cfs__handle_put(fs, fi->fh, false);
	}
	if (sent == -ENOENT) /* the open was interrupted: no release will come */
		cfs__handle_put(fs, fi->fh, true);
	return 0;
}

void cfs__fs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct cfs_fs *fs = cfs__fs_of(req);
	int acc = fi->flags & O_ACCMODE;
	int rc;

	if (ino == INO_CONTROL)
		rc = acc == O_RDONLY ? open_control(req, fi) : -EROFS;
	else if (acc != O_RDONLY || (fi->flags & O_TRUNC))
		rc = -EROFS;
	else if (ino == INO_STATS || ino == INO_METRICS)
		rc = open_text(req, fs, ino, fi);
	else if (!cfs__is_node(ino))
		rc = -EISDIR;
	else if (cfs__node_type(ino) == CFS_NODE_INDEX)
		rc = open_index(req, fs, (struct cfs_eindex *)(uintptr_t)ino, fi);
	else if (cfs__node_type(ino) != CFS_NODE_FILE)
		rc = -EISDIR;
	else
		rc = open_file(req, fs, (struct cfs_efile *)(uintptr_t)ino, fi);
	if (rc != 0)
		fuse_reply_err(req, -rc);
}

/* ---- read --------------------------------------------------------------- */

/*
 * The worker thread's read buffer (max_io bytes, allocated once per thread,
 * freed at thread exit): a malloc/free of 1 MiB per read would fault its
 * pages in again on every request.  NULL when out of memory.
 */
static struct cmn_thread_buf read_buf = CMN_THREAD_BUF_INIT;

static char *read_buffer(struct cfs_fs *fs, size_t len)
{
	size_t cap = fs->opts.max_io ? fs->opts.max_io : (1u << 20);
	if (len > cap)
		return NULL; /* the kernel never asks for more than max_read */
	return cmn_thread_buf(&read_buf, cap);
}

/*
 * The handle's backing fd, opened on first use (POSIX_FADV_SEQUENTIAL:
 * shards are read front to back).  Returns the fd or -errno; any thread.
 */
static int backing_fd(struct cfs_fs *fs, struct cfs__file *h)
{
	int fd = atomic_load_explicit(&h->fd, memory_order_acquire);
	if (fd >= 0)
		return fd;
	pthread_mutex_lock(&h->mu);
	fd = atomic_load_explicit(&h->fd, memory_order_relaxed);
	if (fd < 0) {
		char rel[CFS_RELPATH_MAX];
		cfs_efile_relpath(h->f, rel);
		fd = openat(fs->dirfd, rel, O_RDONLY | O_CLOEXEC | O_NOATIME);
		if (fd < 0 && errno == EPERM)
			fd = openat(fs->dirfd, rel, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			fd = -errno;
			cmn_log(CMN_LOG_ERROR, "open %s: %s", rel, strerror(-fd));
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
static void pattern_note(struct cfs__file *h, int fd, uint64_t off, uint64_t len, uint64_t *ra_off,
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

/* A read of a stats or metrics text: the bytes rendered at open. */
static void read_text(fuse_req_t req, struct cfs_fs *fs, size_t size, off_t off,
		      struct fuse_file_info *fi)
{
	struct cfs__text *t = cfs__handle_get(fs, fi->fh, CFS_HK_TEXT);
	if (!t) {
		fuse_reply_err(req, EBADF);
		return;
	}
	size_t o = (size_t)off < t->len ? (size_t)off : t->len;
	size_t n = t->len - o < size ? t->len - o : size;
	fuse_reply_buf(req, t->buf + o, n);
	cfs__handle_put(fs, fi->fh, false);
}

/* A read of an index file (fs_meta.c): text made from the snapshot, no read accounting. */
static void read_index(fuse_req_t req, struct cfs_fs *fs, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct cfs__index *x = cfs__handle_get(fs, fi->fh, CFS_HK_INDEX);
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
		cfs__handle_put(fs, fi->fh, false);
}

/* Counts a read of [off, off + len) of h's file (first: h's first read). */
static void read_account(struct cfs_fs *fs, struct cfs__file *h, off_t off, uint64_t len,
			 bool first)
{
	pthread_mutex_lock(&h->mu);
	cfs_efile_account(fs->set, h->f, (uint64_t)off, len, first, &h->end_done, h->epoch1);
	pthread_mutex_unlock(&h->mu);
}

/* Replies [off, off + len) of fd by splice (opts.splice_read).  Always replies. */
static void reply_splice(fuse_req_t req, struct cfs_fs *fs, struct cfs__file *h, int fd, off_t off,
			 uint64_t len, bool first)
{
	struct fuse_bufvec bv = FUSE_BUFVEC_INIT(len);
	bv.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	bv.buf[0].fd = fd;
	bv.buf[0].pos = off;
	read_account(fs, h, off, len, first);
	int rc = fuse_reply_data(req, &bv, FUSE_BUF_SPLICE_MOVE);
	char rel[CFS_RELPATH_MAX];
	if (rc != 0 && rc != -ENOENT) /* -ENOENT: the request was interrupted */
		cmn_log(CMN_LOG_WARN, "read %s: reply: %s", cfs_efile_relpath(h->f, rel),
			strerror(-rc));
}

/*
 * Replies [off, off + len) of fd through the thread's buffer (pread; short
 * at the end of the file).  Returns 0 (replied) or -errno (not replied).
 */
static int reply_copy(fuse_req_t req, struct cfs_fs *fs, struct cfs__file *h, int fd, off_t off,
		      uint64_t len, bool first)
{
	char *buf = read_buffer(fs, len);
	if (!buf)
		return -ENOMEM;
	size_t got = 0;
	while (got < len) {
		ssize_t r = pread(fd, buf + got, len - got, off + (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	read_account(fs, h, off, got, first);
	fuse_reply_buf(req, buf, got);
	return 0;
}

/* A read of a sealed file served by the daemon: checked, counted, then read ahead. */
static void read_file(fuse_req_t req, struct cfs_fs *fs, size_t size, off_t off,
		      struct fuse_file_info *fi)
{
	struct cfs__file *h = cfs__handle_get(fs, fi->fh, CFS_HK_FILE);
	if (!h) {
		fuse_reply_err(req, EBADF);
		return;
	}
	struct cfs_efile *f = h->f;
	uint64_t len = 0;
	if ((uint64_t)off < f->bytes)
		len = f->bytes - (uint64_t)off < size ? f->bytes - (uint64_t)off : size;
	int fd = backing_fd(fs, h);
	int rc = fd;
	if (fd < 0)
		goto out;
	rc = cfs_verify_read(fs->opts.verifier, f, fd, (uint64_t)off, len);
	if (rc != 0) /* a corrupt record is never returned (verify.c V1) */
		goto out;
	bool first = !atomic_exchange_explicit(&h->read_once, true, memory_order_relaxed);
	uint64_t ra_off = 0, ra_len = 0;
	if (len)
		pattern_note(h, fd, (uint64_t)off, len, &ra_off, &ra_len);
	if (fs->opts.splice_read)
		reply_splice(req, fs, h, fd, off, len, first);
	else if ((rc = reply_copy(req, fs, h, fd, off, len, first)) != 0)
		goto out;
	/* after the reply: the reader goes on while the disk reads ahead */
	if (ra_len)
		backing_readahead(fd, ra_off, ra_len);
	cfs__handle_put(fs, fi->fh, false);
	return;
out:
	cfs__handle_put(fs, fi->fh, false);
	fuse_reply_err(req, -rc);
}

void cfs__fs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	struct cfs_fs *fs = cfs__fs_of(req);

	if (ino == INO_CONTROL) /* commands come by ioctl; reading it is empty */
		fuse_reply_buf(req, NULL, 0);
	else if (ino == INO_STATS || ino == INO_METRICS)
		read_text(req, fs, size, off, fi);
	else if (cfs__is_node(ino) && cfs__node_type(ino) == CFS_NODE_INDEX)
		read_index(req, fs, size, off, fi);
	else
		read_file(req, fs, size, off, fi);
}

/* ---- release ------------------------------------------------------------ */

void cfs__file_close(struct cfs_fs *fs, struct cfs__file *h)
{
	struct cfs_efile *f = h->f;
	if (!atomic_load(&h->read_once) && fs->accounting)
		cfs_efile_account_cached(fs->set, f, h->epoch1); /* page cache or passthrough */
	int fd = atomic_load(&h->fd);
	if (fd >= 0)
		close(fd);
	io_mode_leave(fs, h);
	pthread_mutex_destroy(&h->mu);
	free(h);
	/* may complete an eviction (invariant 3), or retire f (retire = read) */
	cfs_efile_release(fs->set, f);
}

void cfs__fs_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct cfs_fs *fs = cfs__fs_of(req);
	if (ino != INO_CONTROL && fi->fh)
		cfs__handle_put(fs, fi->fh, true); /* the last put destroys it */
	fuse_reply_err(req, 0);
}
