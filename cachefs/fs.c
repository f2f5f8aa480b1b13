/*
 * fs.c - the read-only FUSE filesystem over epoch snapshots (libfuse3
 * low-level API, multithreaded loop): the session.
 *
 * Owns the session: mount options, INIT, the lowlevel ops table, the loop,
 * the control ioctl, the answers to every call that would change something,
 * the notifications the daemon sends the kernel, and unmount.  The handlers
 * live with their job (fs_i.h lists the files): names and attributes in
 * fs_node.c, open/read/release in fs_read.c, the xattr and the index files
 * in fs_meta.c, the handle table in fs_handle.c.
 *
 * Does not own the snapshots (epoch.c), the catalog or the stats text:
 * what only the daemon can answer (a stats text, an advance) is posted to
 * its queue of requests (requests.h), which the daemon serves; the view
 * never calls up.  Lookups and reads never query SQLite.
 *
 * Read-only: the mount is `ro`, so the kernel refuses writes before they
 * reach us, and every call that would change something answers EROFS here
 * too.  Commands (`next`) arrive as an ioctl on .rollcache/control opened
 * read-only (include/rollcache/control.h, fs_ioctl()).  Sealed files never
 * change (DESIGN invariant 1), hence long entry/attr timeouts and keep_cache.
 *
 * Limits: xattrs are read-only (one name, on files; set/remove EROFS); no
 * locks (the kernel's local locks apply).
 *
 * Locking: the order is written once, in fs_i.h.  Every handler replies
 * exactly once, through one exit label where it has more than one way out.
 */
#define FUSE_USE_VERSION 314

#include "cachefs/fs.h"

#include "cachefs/fs_i.h"
#include "common/log.h"
#include "rollcache/control.h"

#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- mutations: all EROFS ------------------------------------------- */

static void fs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		       struct fuse_file_info *fi)
{
	fuse_reply_err(req, EROFS);
}

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
	struct cfs_fs *fs = cfs__fs_of(req);
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
    .lookup = cfs__fs_lookup,
    .forget = cfs__fs_forget,
    .forget_multi = cfs__fs_forget_multi,
    .getattr = cfs__fs_getattr,
    .setattr = fs_setattr,
    .readlink = cfs__fs_readlink,
    .mknod = fs_mknod,
    .mkdir = fs_mkdir,
    .unlink = fs_unlink,
    .rmdir = fs_unlink,
    .symlink = fs_symlink,
    .rename = fs_rename,
    .link = fs_link,
    .open = cfs__fs_open,
    .read = cfs__fs_read,
    .ioctl = fs_ioctl,
    .release = cfs__fs_release,
    .opendir = cfs__fs_opendir,
    .readdir = cfs__fs_readdir,
    .releasedir = cfs__fs_releasedir,
    .statfs = cfs__fs_statfs,
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
 * The -o string of the session into o (len bytes): fsname, subtype, ro,
 * max_read and the caller's extra options.  Returns 0 or -E2BIG (o then
 * holds a prefix).
 */
static int mount_options(const struct cfs_fs_opts *opts, char *o, size_t len)
{
	char esc[1024];
	char kv[1100];
	escape_opt(opts->fsname ? opts->fsname : "rollcache", esc, sizeof(esc));
	snprintf(kv, sizeof(kv), "fsname=%s", esc);
	int rc = opt_add(o, len, kv);
	if (rc == 0)
		rc = opt_add(o, len, "subtype=rollcache");
	if (rc == 0) /* `ro` in /proc/mounts: the kernel refuses every write */
		rc = opt_add(o, len, "ro");
	if (rc == 0 && opts->max_io) {
		snprintf(kv, sizeof(kv), "max_read=%" PRIu32, opts->max_io);
		rc = opt_add(o, len, kv);
	}
	if (rc == 0 && opts->extra_opts && opts->extra_opts[0])
		rc = opt_add(o, len, opts->extra_opts);
	return rc;
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

	rc = mount_options(&fs->opts, o, sizeof(o));
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

bool cfs_fs_exited(struct cfs_fs *fs)
{
	return fuse_session_exited(fs->se) != 0;
}

void cfs_fs_passthrough(const struct cfs_fs *fs, struct cfs_fs_pt_stats *st)
{
	st->enabled = cfs__pt_usable(fs);
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
	cfs__handles_free(fs);
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
