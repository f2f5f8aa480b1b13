/*
 * samplers.c - the daemon's sampler thread: one sampler/ pass per epoch.
 *
 * Owns the thread and the life of each pass (smp_sampler_new/run/free);
 * does not fetch, plan or write anything itself (sampler/ does).  A
 * boundary stops the running pass (pause) and starts a new one for the new
 * epoch (new_epoch), with a seed per epoch so each pass samples in a new
 * order.  Counters of finished passes are summed into `total`.
 *
 * Locking: w->mu protects the fields marked so; a leaf lock (smp_sampler_stop
 * and smp_sampler_stats are thread-safe and take only the sampler's own).
 */
#include "daemon/samplers.h"

#include "common/log.h"
#include "sampler/sampler.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct dmn_samplers {
	const struct cmn_config *cfg;
	struct cfs_store *store;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct smp_sampler *s;		/* protected by mu: the running pass, or NULL */
	uint32_t epoch;			/* protected by mu: epoch to sample for */
	bool stop;			/* protected by mu */
	bool paused;			/* protected by mu: a boundary is in progress */
	bool busy;			/* protected by mu: a pass is between new and free */
	bool idle;			/* protected by mu: the pass of `epoch` ended */
	struct dmn_sampler_stats total; /* protected by mu: finished passes */
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
	C(bad_records);
	C(failed_objects);
	C(objects_done);
	C(bytes_fetched);
	C(records_admitted);
	C(bytes_admitted);
	C(budget_waits);
#undef C
}

static int new_sampler(struct dmn_samplers *w, uint32_t epoch, struct smp_sampler **out, char *err,
		       size_t errlen)
{
	struct smp_sampler_opts so = {
	    .cfg = w->cfg,
	    .store = w->store,
	    .seed = 1 + (uint64_t)epoch,
	    .stop_when_full = false,
	    .room_wait_ms = 500, /* bounded waits: a boundary's stop is seen soon */
	};
	return smp_sampler_new(out, &so, err, errlen);
}

static void timed_wait_1s(struct dmn_samplers *w)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 1;
	pthread_cond_timedwait(&w->cv, &w->mu, &ts);
}

static void *sampler_main(void *arg)
{
	struct dmn_samplers *w = arg;
	char err[512];
	uint32_t done = UINT32_MAX; /* the epoch whose pass ended */
	pthread_mutex_lock(&w->mu);
	while (!w->stop) {
		if (w->paused || w->epoch == done) {
			timed_wait_1s(w);
			continue;
		}
		uint32_t epoch = w->epoch;
		w->idle = false;
		w->busy = true;
		pthread_mutex_unlock(&w->mu);
		struct smp_sampler *s = NULL;
		int rc = new_sampler(w, epoch, &s, err, sizeof(err));
		if (rc == 0) {
			pthread_mutex_lock(&w->mu);
			w->s = s;
			bool go = !w->stop && !w->paused && w->epoch == epoch;
			pthread_mutex_unlock(&w->mu);
			if (go)
				rc = smp_sampler_run(s, epoch, err, sizeof(err));
			pthread_mutex_lock(&w->mu);
			add_stats(&w->total, smp_sampler_stats(s));
			w->s = NULL;
			pthread_mutex_unlock(&w->mu);
			smp_sampler_free(s); /* seals or discards what it was writing */
		}
		if (rc != 0)
			cmn_log(CMN_LOG_ERROR, "samplers, epoch %" PRIu32 ": %s", epoch, err);
		pthread_mutex_lock(&w->mu);
		w->busy = false;
		done = epoch;
		if (w->epoch == epoch)
			w->idle = true;
		pthread_cond_broadcast(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

int dmn__samplers_start(struct dmn_samplers **out, const struct cmn_config *cfg,
			struct cfs_store *store, uint32_t epoch, char *err, size_t errlen)
{
	struct dmn_samplers *w = calloc(1, sizeof(*w));
	struct smp_sampler *probe = NULL;
	if (!w) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	w->cfg = cfg;
	w->store = store;
	w->epoch = epoch;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	int rc = new_sampler(w, epoch, &probe, err, errlen); /* bad URL, credentials: now */
	if (rc != 0)
		goto fail;
	smp_sampler_free(probe);
	rc = pthread_create(&w->thread, NULL, sampler_main, w);
	if (rc != 0) {
		snprintf(err, errlen, "cannot start the sampler thread: %s", strerror(rc));
		rc = -rc;
		goto fail;
	}
	*out = w;
	return 0;
fail:
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	free(w);
	return rc;
}

void dmn__samplers_pause(struct dmn_samplers *w)
{
	pthread_mutex_lock(&w->mu);
	w->paused = true;
	for (int i = 0; i < 30 && w->busy && !w->stop; i++) {
		if (w->s)
			smp_sampler_stop(w->s);
		timed_wait_1s(w);
	}
	if (w->busy)
		cmn_log(CMN_LOG_WARN, "samplers: the pass did not end within 30 s of the boundary");
	pthread_mutex_unlock(&w->mu);
}

void dmn__samplers_new_epoch(struct dmn_samplers *w, uint32_t epoch)
{
	pthread_mutex_lock(&w->mu);
	w->epoch = epoch;
	w->paused = false;
	if (w->s)
		smp_sampler_stop(w->s);
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

void dmn__samplers_stats(struct dmn_samplers *w, struct dmn_sampler_stats *o)
{
	memset(o, 0, sizeof(*o));
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	*o = w->total;
	if (w->s)
		add_stats(o, smp_sampler_stats(w->s));
	o->present = true;
	o->idle = w->idle;
	pthread_mutex_unlock(&w->mu);
}

void dmn__samplers_stop(struct dmn_samplers *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	w->stop = true;
	if (w->s)
		smp_sampler_stop(w->s);
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->thread, NULL);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	free(w);
}
