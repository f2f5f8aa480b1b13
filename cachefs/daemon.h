/*
 * daemon.h - the mount daemon: store + epochs + FUSE view + samplers in one
 * process (`rollcache mount`).
 *
 * cfs_daemon_run() opens the cache directory, publishes the first epoch
 * from what the cache already holds (a re-mount serves it at once), mounts
 * the view, calls on_ready, starts the workers (samplers), and serves until
 * unmounted or signalled (SIGINT/SIGTERM/SIGHUP).  Then it stops the
 * workers, flushes read statistics, unmounts and closes the store, leaving
 * the cache reusable.  Daemonizing (fork, setsid, the readiness pipe) is the
 * caller's (cli/cmd_mount.c), which must fork before calling this: it starts
 * threads.
 *
 * The samplers live in sampler/, which is built after cachefs/, so they are
 * plugged in through struct cfs_daemon_workers.
 */
#ifndef RC_CACHEFS_DAEMON_H
#define RC_CACHEFS_DAEMON_H

#include "cachefs/stats.h"
#include "common/config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cfs_store;

/* Background workers that fill the cache (samplers).  All optional. */
struct cfs_daemon_workers {
	/* Starts filling `store` for `epoch`.  0 or -errno with a message. */
	int (*start)(void *ctx, struct cfs_store *store, uint32_t epoch, char *err, size_t errlen);
	/*
	 * A boundary begins: end the running pass and return once its files are
	 * sealed (bounded wait), so that what it admitted under the old epoch's
	 * budget is counted there and no byte of the next budget is taken by it.
	 */
	void (*pause)(void *ctx);
	/* Epoch `epoch` began (new admit budget): start its pass. */
	void (*new_epoch)(void *ctx, uint32_t epoch);
	/* Copies the counters. */
	void (*stats)(void *ctx, struct cfs_worker_stats *out);
	/* Stops and joins the workers. */
	void (*stop)(void *ctx);
};

struct cfs_daemon_opts {
	const struct cmn_config *cfg; /* finished config; borrowed */
	const char *mountpoint;	      /* absolute */
	const char *source;	      /* shown as fsname and in stats */
	bool debug;		      /* -d: libfuse tracing, foreground */
	bool splice_read;	      /* serve reads by splice (see docs/bench-fuse.md) */
	bool passthrough;	      /* FUSE passthrough for files served once (fs.c) */
	uint32_t readahead_kib;	      /* kernel readahead of the mount; 0: 4096 */
	const char *fuse_opts;	      /* pass-through mount options (allow_other, ...) or NULL */
	uint64_t wait_timeout_ms;     /* bound of `next wait`; 0: 10 minutes */
	const struct cfs_daemon_workers *workers; /* NULL: serve what the cache holds */
	void *workers_ctx;
	/* Called once the mount is up (daemonizing callers report success here). */
	void (*on_ready)(void *ctx);
	void *on_ready_ctx;
};

/*
 * Runs the daemon until unmount or a signal.  Returns 0 after a clean
 * shutdown, or -errno with a one-line message in err (then nothing is left
 * mounted and the store is closed).
 */
int cfs_daemon_run(const struct cfs_daemon_opts *o, char *err, size_t errlen);

#endif
