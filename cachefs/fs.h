/*
 * fs.h - the read-only FUSE view of a cache (DESIGN "The mount").
 *
 *   /current -> epochs/<E>          symlink, re-read on every resolution
 *   /epochs/<E>/<name>              sealed files of epoch E (0444)
 *   /.rollcache/stats               JSON (rendered at open)
 *   /.rollcache/metrics             Prometheus text (rendered at open)
 *   /.rollcache/control             0400: "next [N] [wait]" by ioctl (rollcache/control.h)
 *   /.rollcache/epochs/<E>          index of epoch E: "name bytes records" lines (fs_meta.c)
 *   xattr user.rollcache.records    on every file: its record count (fs_meta.c)
 *
 * The view (fs.c and its parts, fs_i.h) serves lookups and reads from
 * struct cfs_epochs only, and statfs from the budget; what needs the daemon
 * (a stats text, advancing an epoch) is posted to the fs's request queue
 * (requests.h), never on the read path.
 */
#ifndef RC_CACHEFS_FS_H
#define RC_CACHEFS_FS_H

#include "cachefs/budget.h"
#include "cachefs/epoch.h"
#include "cachefs/requests.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cfs_fs;
struct cfs_verifier;

struct cfs_fs_opts {
	bool passthrough; /* hand reads of files served once to the kernel (fs_read.c: io mode) */
	bool splice_read; /* fuse_reply_data from the backing fd (else pread + reply_buf);
			     max_io is then capped to what fits a pipe (fs.c splice_max_io) */
	double timeout;	  /* entry/attr timeout of sealed files and dirs, seconds */
	uint32_t max_io;  /* max_write / max pages per request, bytes */
	uint32_t max_readahead; /* bytes asked of the kernel */
	uint32_t threads;	/* max worker threads (0: libfuse default) */
	bool debug;		/* -d: libfuse request tracing */
	const char *fsname;	/* shown in /proc/mounts, e.g. the source URL */
	const char *extra_opts; /* mount options passed through (allow_other, ...), or NULL */
	struct cfs_verifier *verifier; /* first-pass record checks (cachefs/verify.h), borrowed;
					  NULL: none */
};

/*
 * Creates the session and mounts it at `mountpoint`.  cache_dirfd is an
 * open directory fd of the cache dir (backing files are openat()ed relative
 * to it; the caller keeps it open until cfs_fs_free()).  The epochs set and
 * the budget (statfs) stay the caller's and must outlive the fs.
 * Returns 0 and *out, or -errno with a one-line message in err.
 */
int cfs_fs_mount(struct cfs_fs **out, const char *mountpoint, struct cfs_epochs *set,
		 struct cfs_budget *budget, int cache_dirfd, const struct cfs_fs_opts *opts,
		 char *err, size_t errlen);

/*
 * The queue of requests the view cannot answer itself (stats texts,
 * control commands): the owner serves it with cfs_requests_take/done while
 * the loop runs.  cfs_fs_free() closes it.
 */
struct cfs_requests *cfs_fs_requests(struct cfs_fs *fs);

/*
 * Runs the multithreaded loop until unmount or SIGINT/SIGTERM/SIGHUP
 * (libfuse's signal handlers are installed for the duration).
 * Returns 0 or -errno.
 */
int cfs_fs_loop(struct cfs_fs *fs);

/* Whether the loop was asked to end (signal, unmount). */
bool cfs_fs_exited(struct cfs_fs *fs);

/* FUSE passthrough as it went (fs_read.c io_mode_enter()). */
struct cfs_fs_pt_stats {
	bool enabled;	  /* the kernel accepted it at INIT and has not refused a backing file
			     for good (EPERM: no CAP_SYS_ADMIN) */
	uint64_t opens;	  /* handles passed through so far */
	uint64_t refused; /* backing files the kernel refused */
};

void cfs_fs_passthrough(const struct cfs_fs *fs, struct cfs_fs_pt_stats *st);

/*
 * Tells the kernel that `current` points to another epoch (its cached link
 * text is dropped).  Call after publishing an epoch, from a thread that is
 * not serving a FUSE request.
 */
void cfs_fs_current_changed(struct cfs_fs *fs);

/*
 * Tells the kernel to drop its cached entry epochs/<number> (after the
 * epoch stopped being current), so that the directory leaves once unused.
 * Call from a thread that is not serving a FUSE request, holding no lock.
 */
void cfs_fs_epoch_retired(struct cfs_fs *fs, uint32_t number);

/*
 * Sets the kernel readahead of the mount's backing device info (sysfs
 * read_ahead_kb; libfuse cannot raise it above the kernel's 128 KiB
 * default).  Found through /proc/self/mountinfo, never by touching the
 * mount (that would wait for this very daemon).  Returns 0 or -errno (e.g.
 * -EACCES when not root: the default stays).
 */
int cfs_fs_set_readahead(const char *mountpoint, uint32_t kib);

/* Unmounts (if still mounted) and frees.  NULL is ignored. */
void cfs_fs_free(struct cfs_fs *fs);

/* Routes libfuse's log into cmn_log(). */
void cfs_fs_route_log(void);

#endif
