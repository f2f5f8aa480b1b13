/*
 * daemon.c - the mount daemon's lifecycle: start-up in order, shutdown in
 * reverse (see daemon.h for its threads and lock order).
 *
 * Start-up: schedule, store (start-up reconciliation, invariant 6), epoch
 * set, the first boundary (a re-mount publishes what the cache holds),
 * the source opened and, for a new cache, listed (a source that cannot be
 * listed fails the start here, before anything is mounted, with its
 * reason: docs/reliability.md; a warm cache's sampler thread lists it),
 * the FUSE mount, the sampler thread, the scrub
 * thread (scrub.c), the epoch and control threads.  Shutdown, once the
 * FUSE loop returns: stop and join the epoch thread, cancel waiting control
 * commands, close the request queue and join the control thread, stop the
 * samplers and the scrub thread, flush read statistics, unmount, close the
 * store.
 * Every step undoes only what succeeded (one ladder, run_out).
 */
#include "daemon/daemon_i.h"

#include "common/clock.h"
#include "common/log.h"
#include "daemon/metrics_http.h"
#include "rc_config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if RC_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

static void block_signals(sigset_t *old)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, old);
}

/* Opens the store and the epoch set and publishes the first epoch. */
static int open_cache(struct dmn *d, uint32_t *first, char *err, size_t errlen)
{
	int rc = evc_schedule_build(d->cfg->epochs, d->cfg->n_epochs, d->cfg->limit, d->cfg->path,
				    &d->sch, err, errlen);
	if (rc != 0)
		return rc;
	d->have_sch = true;
	struct cfs_store_opts so = {.dir = d->cfg->cache_dir,
				    .limit = d->cfg->limit,
				    .keep_retiring = d->cfg->retire == CMN_RETIRE_READ,
				    .verity = d->cfg->verity,
				    .keep_start_rows = true}; /* the start-up boundary's list */
	rc = cfs_store_open(&d->store, &so, err, errlen);
	if (rc != 0)
		return rc;
	d->cat = cfs_store_catalog(d->store);
	d->budget = cfs_store_budget(d->store);
	d->dirfd = open(cfs_store_dir(d->store), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d->dirfd < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", cfs_store_dir(d->store), strerror(errno));
		return rc;
	}
	rc = cfs_epochs_init(&d->set, d->store, &d->ev);
	if (rc != 0) {
		snprintf(err, errlen, "out of memory");
		return rc;
	}
	d->have_set = true;
	d->bd.store = d->store;
	d->bd.set = &d->set;
	d->bd.retire_read = d->cfg->retire == CMN_RETIRE_READ;
	d->set.retire_read = d->bd.retire_read;
	d->retire_read = d->bd.retire_read;
	d->retire_want = -1;
	/* retire = read: the last boundary's victims a restart kept retire in the first view */
	d->bd.retiring_carry = cfs_store_reconcile_report(d->store)->retiring_epoch;
	/* The first epoch: 0 for a new cache, else one past the last recorded. */
	uint32_t last = 0;
	*first = cfs_catalog_current_epoch(d->cat, &last) == 0 ? last + 1 : 0;
	return dmn__boundary(d, false, true, *first, err, errlen);
}

static int mount_view(struct dmn *d, char *err, size_t errlen)
{
	const struct dmn_opts *o = d->o;
	struct cfs_fs_opts fo = {
	    .splice_read = o->splice_read,
	    .passthrough = o->passthrough,
	    .timeout = 86400.0,
	    .max_io = 1u << 20,
	    .max_readahead = 1u << 20,
	    .debug = o->debug,
	    .fsname = o->source,
	    .extra_opts = o->fuse_opts,
	    .verifier = dmn__scrub_verifier(d->scrub),
	};
	int rc =
	    cfs_fs_mount(&d->fs, o->mountpoint, &d->set, d->budget, d->dirfd, &fo, err, errlen);
	if (rc != 0)
		return rc;
	d->bd.fs = d->fs;
	uint32_t ra = o->readahead_kib ? o->readahead_kib : 4096;
	int rrc = cfs_fs_set_readahead(o->mountpoint, ra);
	if (rrc != 0)
		cmn_log(CMN_LOG_INFO, "readahead of %s stays at the kernel default (%s)",
			o->mountpoint, strerror(-rrc));
	return 0;
}

/* The sampler thread, epoch thread, control thread; none of them takes SIGINT/SIGTERM/SIGHUP. */
static int start_threads(struct dmn *d, char *err, size_t errlen)
{
	sigset_t old;
	char werr[512];
	block_signals(&old);
	int rc = dmn__samplers_start(d->smp, werr, sizeof(werr));
	if (rc != 0) {
		snprintf(err, errlen, "samplers: %s", werr);
		goto out;
	}
	rc = dmn__scrub_start(d->scrub);
	if (rc != 0) {
		snprintf(err, errlen, "cannot start the scrub thread: %s", strerror(-rc));
		goto out;
	}
	rc = cfs_epochs_start_reaper(&d->set); /* boundaries and releases stop unlinking */
	if (rc != 0) {
		snprintf(err, errlen, "cannot start the reaper thread: %s", strerror(-rc));
		goto out;
	}
	rc = pthread_create(&d->epoch_thread, NULL, dmn__epoch_main, d);
	if (rc != 0) {
		snprintf(err, errlen, "cannot start the epoch thread: %s", strerror(rc));
		rc = -rc;
		goto out;
	}
	d->have_epoch_thread = true;
	rc = pthread_create(&d->control_thread, NULL, dmn__control_main, d);
	if (rc != 0) {
		snprintf(err, errlen, "cannot start the control thread: %s", strerror(rc));
		rc = -rc;
		goto out;
	}
	d->have_control_thread = true;
out:
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

static void stop_threads(struct dmn *d)
{
	pthread_mutex_lock(&d->mu);
	d->stop = true;
	pthread_mutex_unlock(&d->mu);
	cmn_events_post(&d->ev, DMN_EV_STOP);
	if (d->have_epoch_thread)
		pthread_join(d->epoch_thread, NULL);
	d->have_epoch_thread = false;
	if (d->fs) {
		dmn__cancel_pending(d);
		cfs_requests_close(cfs_fs_requests(d->fs));
	}
	if (d->have_control_thread)
		pthread_join(d->control_thread, NULL);
	d->have_control_thread = false;
	dmn__samplers_stop(d->smp);
	d->smp = NULL;
	dmn__scrub_stop(d->scrub);
}

/* The daemon itself, in this process.  report_fd: the detached child's pipe, or -1. */
static int run(const struct dmn_opts *o, int *report_fd, char *err, size_t errlen)
{
	struct dmn *d = calloc(1, sizeof(*d));
	struct dmn_metrics_http *metrics = NULL;
	uint32_t first = 0;
	int rc;
	if (!d) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	d->o = o;
	d->cfg = o->cfg;
	d->dirfd = -1;
	d->t0_ms = d->rate_t_ms = cmn_mono_ms();
	pthread_mutex_init(&d->mu, NULL);
	pthread_mutex_init(&d->boundary_mu, NULL);
	cmn_events_init(&d->ev);
	dmn_boundary_init(&d->bd);

	rc = open_cache(d, &first, err, errlen);
	if (rc == 0) /* a new cache's source is listed here: an unusable one fails the mount */
		rc = dmn__samplers_open(&d->smp, d->cfg, d->store, first, err, errlen);
	if (rc == 0) {
		rc = dmn__scrub_new(&d->scrub, d, d->cfg->scrub_rate);
		if (rc != 0)
			snprintf(err, errlen, "out of memory");
	}
	if (rc == 0)
		rc = mount_view(d, err, errlen);
	if (rc == 0) {
		cmn_log(CMN_LOG_INFO, "mounted %s on %s (cache %s, epoch %" PRIu32 ")", o->source,
			o->mountpoint, cfs_store_dir(d->store), first);
		rc = start_threads(d, err, errlen);
	}
	if (rc == 0 && d->cfg->metrics_listen)
		rc = dmn__metrics_start(&metrics, d, d->cfg->metrics_listen, err, errlen);
	if (rc == 0) {
		/* Up, samplers included: a failure above reached the caller as an error. */
		dmn__report_ready(report_fd, d->cfg->log_file);
#if RC_HAVE_SYSTEMD
		/* Type=notify units (docs/rollcache@.service): the mount is up */
		sd_notifyf(0, "READY=1\nSTATUS=serving %s on %s", o->source, o->mountpoint);
#endif
		rc = cfs_fs_loop(d->fs);
		if (rc != 0)
			snprintf(err, errlen, "FUSE loop: %s", strerror(-rc));
		cmn_log(CMN_LOG_INFO, "unmounting %s", o->mountpoint);
#if RC_HAVE_SYSTEMD
		sd_notify(0, "STOPPING=1");
#endif
	}

	dmn__metrics_stop(metrics); /* it renders through the threads stopped below */
	stop_threads(d);
	if (d->have_set && d->cat)
		dmn_boundary_flush_reads(&d->bd);
	cfs_fs_free(d->fs);
	dmn__scrub_free(d->scrub); /* after the view: reads use its verifier */
	if (d->have_set)
		cfs_epochs_destroy(&d->set);
	dmn_boundary_destroy(&d->bd);
	if (d->dirfd >= 0)
		close(d->dirfd);
	if (d->store)
		cfs_store_close(d->store);
	if (d->have_sch)
		evc_schedule_free(&d->sch);
	cmn_events_destroy(&d->ev);
	pthread_mutex_destroy(&d->mu);
	pthread_mutex_destroy(&d->boundary_mu);
	free(d->pending);
	free(d);
	return rc;
}

int dmn_run(const struct dmn_opts *o, char *err, size_t errlen)
{
	int report_fd = -1;
	if (o->detach) {
		bool child = false;
		int rc = dmn__fork(&child, &report_fd, err, errlen);
		if (!child)
			return rc;
	}
	/*
	 * The file and stderr from the start, so that start-up lines (a file
	 * dropped by reconciliation) are in the file too; once detached
	 * (dmn__report_ready) the file alone, or syslog when it cannot be opened.
	 */
	if (o->cfg->log_file) {
		int lrc = cmn_log_open_file(o->cfg->log_file, true);
		if (lrc != 0 && !o->detach) {
			snprintf(err, errlen, "log_file %s: %s", o->cfg->log_file, strerror(-lrc));
			return lrc;
		}
	}
	int rc = run(o, &report_fd, err, errlen);
	if (!o->detach) {
		/* the caller prints err on stderr: once there, and in the log file */
		if (rc != 0 && o->cfg->log_file && cmn_log_open_file(o->cfg->log_file, false) == 0)
			cmn_log(CMN_LOG_ERROR, "%s", err);
		cmn_log_close_file();
		return rc;
	}
	if (rc != 0 && report_fd >= 0) {
		/* the parent prints it on stderr; the log file has it too */
		if (o->cfg->log_file && cmn_log_open_file(o->cfg->log_file, false) == 0)
			cmn_log(CMN_LOG_ERROR, "%s", err);
		dmn__report_error(&report_fd, rc, err);
	} else if (rc != 0)
		cmn_log(CMN_LOG_ERROR, "%s", err); /* detached: syslog */
	_exit(rc == 0 ? 0 : 1);
}
