/*
 * daemon.h - the mount daemon (`rollcache mount`): the only layer that
 * knows the store, the catalog, the FUSE view, the samplers and the
 * evictor, and the one place where an epoch boundary runs.
 *
 * dmn_run() opens the cache directory, publishes the first epoch from what
 * the cache already holds (a re-mount serves it at once), mounts the view,
 * starts the samplers, the epoch, control, scrub and reaper threads (and
 * the metrics thread with metrics_listen), and serves
 * until unmounted or signalled (SIGINT/SIGTERM/SIGHUP).  Then it stops the
 * threads, flushes read statistics, unmounts and closes the store, leaving
 * the cache reusable.  With `detach` it forks first and the parent returns
 * once the mount is up (or has failed), so that `mount`'s exit status and
 * message are the daemon's.
 *
 * Threads (daemon.c, epochs.c, control.c, samplers.c, scrub.c, metrics_http.c):
 *   main     the FUSE loop (libfuse workers answer requests; a worker that
 *            needs the daemon posts to the view's request queue and waits);
 *   epoch    boundaries (requested or auto), read-statistics flushes every
 *            second, ingest rates, dropping retired epochs from the kernel;
 *            the only thread that publishes snapshots once the mount is
 *            up (the start-up boundary runs on the main thread before it);
 *   control  serves the view's request queue: stats texts, control
 *            commands (an advance is handed to the epoch thread);
 *   sampler  one long-lived sampler that follows the catalog's plan;
 *   scrub    withdraws files found corrupt and the files of objects changed
 *            at the source, re-verifies resident files at scrub_rate
 *            (scrub.c);
 *   metrics  with metrics_listen: the Prometheus text over HTTP
 *            (metrics_http.c);
 *   reaper   the epoch set's (cachefs/epoch.c, cfs_epochs_start_reaper):
 *            deletes the evicted files whose last pin went, so a boundary
 *            that retires an epoch and a FUSE release do not wait for
 *            unlinks; cfs_epochs_destroy() lets it finish.
 * Lock order: d->boundary_mu (held for a whole boundary; the scrub thread
 * only trylocks it), d->mu, then the request queue's mu (cachefs/requests.c);
 * the catalog, the budget and set->mu lock themselves and are never
 * called with d->mu held.
 */
#ifndef RC_DAEMON_DAEMON_H
#define RC_DAEMON_DAEMON_H

#include "common/config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct dmn_opts {
	const struct cmn_config *cfg; /* finished config; borrowed */
	const char *mountpoint;	      /* absolute */
	const char *source;	      /* shown as fsname and in stats */
	bool debug;		      /* -d: libfuse tracing, foreground */
	bool splice_read;	      /* serve reads by splice (see docs/bench-fuse.md) */
	bool passthrough;	/* FUSE passthrough for files served once (cachefs/fs_read.c) */
	uint32_t readahead_kib; /* kernel readahead of the mount; 0: 4096 */
	const char *fuse_opts;	/* pass-through mount options (allow_other, ...) or NULL */
	bool detach; /* fork; the child detaches (setsid, stdio to /dev/null, syslog) once up */
};

/*
 * Runs the daemon.  Returns 0 after a clean shutdown, or -errno with a
 * one-line message in err (then nothing is left mounted and the store is
 * closed); -EINVAL or -ENOTSUP mean the configuration cannot work (a source
 * URL that cannot be one: `mount` exits 2), anything else a runtime failure
 * (a source that cannot be listed, ...).  The source is listed before the
 * mount is up.  With o->detach: the parent returns 0 once the child's mount
 * is up, or the child's -errno with its message in err; the child never
 * returns (it exits 0 after a clean shutdown, 1 otherwise).  Call before
 * starting any thread (it forks).
 */
int dmn_run(const struct dmn_opts *o, char *err, size_t errlen);

#endif
