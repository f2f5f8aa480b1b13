/*
 * samplers.c - the daemon's sampler thread: ONE long-lived sampler/ run
 * that follows the source's sampling plan across epochs.
 *
 * Owns the thread and the sampler's life (smp_sampler_new/run/free); does
 * not fetch, plan or write anything itself (sampler/ does).  The plan's
 * cursor goes on from one epoch to the next (DESIGN "Sampling"): a
 * boundary pauses the sampler (it seals the shard it was filling, so those
 * records are in the boundary's snapshot, saves the plan and holds its
 * transfers and shuffle buffer) and new_epoch resumes it in the new epoch;
 * nothing in flight is thrown away.  The sampler is created once, so the
 * source is listed only every `relist` epochs and index sidecars are
 * fetched once.
 *
 * Locking: w->mu protects the fields marked so; it is a leaf (the
 * sampler's pause/resume/stop/stats are thread-safe and never call back).
 */
#include "daemon/samplers.h"

#include "cachefs/catalog.h"
#include "common/log.h"
#include "sampler/sampler.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAUSE_TIMEOUT_MS 30000

struct dmn_samplers {
	const struct cmn_config *cfg;
	struct cfs_store *store;
	struct smp_sampler *s; /* set at start; its run loop is the thread's */
	pthread_t thread;
	pthread_mutex_t mu;
	uint32_t epoch;	 /* protected by mu: the epoch the run started in */
	bool ended;	 /* protected by mu: the run returned (stopped or failed) */
	bool started;	 /* the thread was created (set before it runs) */
	char error[512]; /* protected by mu: why the run failed, or "" */
};

static void add_stats(struct dmn_sampler_stats *o, const struct smp_stats *st)
{
#define C(f) o->f += SMP_STAT_GET(st, f)
	C(requests);
	C(retries);
	C(http_4xx);
	C(http_408_429);
	C(http_5xx);
	C(timeouts);
	C(net_errors);
	C(truncated);
	C(records_recovered);
	C(records_lost);
	C(records_resident_skipped);
	C(resumed_bytes);
	C(failed_objects);
	C(objects_partial);
	C(enospc);
	C(objects_done);
	C(bytes_fetched);
	C(records_admitted);
	C(bytes_admitted);
	C(budget_waits);
	C(partial_bytes);
	C(listed_objects);
#undef C
}

static void *sampler_main(void *arg)
{
	struct dmn_samplers *w = arg;
	char err[512];
	pthread_mutex_lock(&w->mu);
	uint32_t epoch = w->epoch;
	pthread_mutex_unlock(&w->mu);
	int rc = smp_sampler_run(w->s, epoch, err, sizeof(err));
	if (rc != 0)
		cmn_log(CMN_LOG_ERROR, "samplers stopped: %s", err);
	pthread_mutex_lock(&w->mu);
	if (rc != 0)
		snprintf(w->error, sizeof(w->error), "%s", err);
	w->ended = true;
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

int dmn__samplers_open(struct dmn_samplers **out, const struct cmn_config *cfg,
		       struct cfs_store *store, uint32_t epoch, char *err, size_t errlen)
{
	char why[512];
	struct dmn_samplers *w = calloc(1, sizeof(*w));
	if (!w) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	w->cfg = cfg;
	w->store = store;
	w->epoch = epoch;
	pthread_mutex_init(&w->mu, NULL);
	/* a new cache: a small first shard, which is the mount's first epoch (epochs.c) */
	struct cfs_resident r = {0};
	bool empty = cfs_catalog_resident(cfs_store_catalog(store), &r) == 0 && r.files == 0;
	struct smp_sampler_opts so = {
	    .cfg = cfg,
	    .store = store,
	    .seed = 1, /* a new plan's seed; an existing plan (ingest) keeps its own */
	    .stop_when_full = false,
	    .follow = true,
	    .room_wait_ms = 10, /* bounded waits: a boundary's pause is seen at once */
	    .first_shard = empty ? cfg->first_epoch : 0,
	};
	int rc = smp_sampler_new(&w->s, &so, why, sizeof(why)); /* bad URL, credentials */
	if (rc != 0) {
		snprintf(err, errlen, "source %s%s%s", strstr(why, cfg->url) ? "" : cfg->url,
			 strstr(why, cfg->url) ? "" : ": ", why);
		if (rc == -EACCES) /* a credentials file others may read: fix the config */
			rc = -EINVAL;
		goto fail;
	}
	rc = smp_sampler_list(w->s, epoch, why, sizeof(why)); /* new: reachable, listable */
	if (rc != 0) {
		snprintf(err, errlen, "cannot list the source %s%s%s",
			 strstr(why, cfg->url) ? "" : cfg->url, strstr(why, cfg->url) ? "" : ": ",
			 why);
		smp_sampler_free(w->s);
		/* the source opened: whatever the listing says is not a usage error */
		if (rc == -EINVAL || rc == -ENOTSUP)
			rc = -EIO;
		goto fail;
	}
	*out = w;
	return 0;
fail:
	pthread_mutex_destroy(&w->mu);
	free(w);
	return rc;
}

int dmn__samplers_start(struct dmn_samplers *w, char *err, size_t errlen)
{
	int rc = pthread_create(&w->thread, NULL, sampler_main, w);
	if (rc != 0) {
		snprintf(err, errlen, "cannot start the sampler thread: %s", strerror(rc));
		return -rc;
	}
	w->started = true;
	return 0;
}

void dmn__samplers_pause(struct dmn_samplers *w)
{
	if (smp_sampler_pause(w->s, PAUSE_TIMEOUT_MS) != 0)
		cmn_log(CMN_LOG_WARN, "samplers: not paused within %d s of the boundary",
			PAUSE_TIMEOUT_MS / 1000);
}

void dmn__samplers_new_epoch(struct dmn_samplers *w, uint32_t epoch)
{
	smp_sampler_resume(w->s, epoch);
}

void dmn__samplers_set_epoch(struct dmn_samplers *w, uint32_t epoch)
{
	smp_sampler_set_epoch(w->s, epoch);
}

uint64_t dmn__samplers_wanted(struct dmn_samplers *w)
{
	return w && w->s ? smp_sampler_wanted_bytes(w->s) : UINT64_MAX;
}

uint64_t dmn__samplers_wanted_fresh(struct dmn_samplers *w, uint64_t timeout_ms)
{
	return w && w->s ? smp_sampler_wanted_fresh(w->s, timeout_ms) : UINT64_MAX;
}

void dmn__samplers_stats(struct dmn_samplers *w, struct dmn_sampler_stats *o)
{
	memset(o, 0, sizeof(*o));
	if (!w)
		return;
	add_stats(o, smp_sampler_stats(w->s));
	pthread_mutex_lock(&w->mu);
	bool ended = w->ended;
	o->stopped = ended && w->error[0];
	snprintf(o->error, sizeof(o->error), "%s", w->error);
	pthread_mutex_unlock(&w->mu);
	o->present = true;
	char why[sizeof(o->state) - 16];
	o->waiting = !ended && smp_sampler_waiting(w->s, why, sizeof(why));
	o->idle = !o->waiting && (ended || smp_sampler_idle(w->s));
	if (o->stopped)
		snprintf(o->state, sizeof(o->state), "stopped: %s", o->error);
	else if (o->waiting)
		snprintf(o->state, sizeof(o->state), "waiting: %s", why);
	else
		snprintf(o->state, sizeof(o->state), "%s", o->idle ? "idle" : "running");
}

void dmn__samplers_stop(struct dmn_samplers *w)
{
	if (!w)
		return;
	smp_sampler_stop(w->s);
	if (w->started)
		pthread_join(w->thread, NULL);
	smp_sampler_free(w->s);
	pthread_mutex_destroy(&w->mu);
	free(w);
}
