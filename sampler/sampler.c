/*
 * sampler.c - the sampler: its life (new, stop, pause, resume, free) and
 * the run loop (smp_sampler_run), which calls the other files in turn:
 * relist.c (when due), plan.c (the next job, checkpoints), dispatch.c,
 * drain.c, seal.c, progress.c.
 *
 * The run loop, in one paragraph: take the plan's next job; reserve its
 * bytes in the budget (no fetch without room, DESIGN 4 and 8; with no room
 * the job waits, or an ingest ends); hand it to the fetcher; step the
 * transfers.  At the end of a pass (the walk is done and nothing is in
 * flight) the shuffle buffer is drained, a checkpoint saves the plan and
 * the next pass begins (a mount), or the run ends (ingest, one pass).
 * Before an ingest's pass ends, the whole objects its transfers gave up on
 * faults that may pass are fetched again, each resuming where it stopped,
 * in up to SMP_ROUNDS rounds after a back-off (step_round; plan.c holds
 * them); one still given up then is left partial for a new run.  A
 * pause (the mount's epoch boundary) seals the partial shard, saves the
 * plan and holds everything - transfers, shuffle buffer - until resume
 * names the new epoch.
 *
 * Healing, in one paragraph: a mount's run (follow) does not end on a full
 * disk (ENOSPC, EDQUOT) or on a listing that fails (the source is gone
 * for a while): heal() drops everything that is not committed - transfers,
 * the shuffle buffer, the shard being filled, shards queued behind the one
 * that failed - and the plan in memory, waits (a back-off of
 * SMP_HEAL_FIRST_MS doubling to SMP_HEAL_MAX_MS, pauses honoured, the
 * cause shown by smp_sampler_waiting()), then reloads the plan from the
 * catalog and lists the source again, exactly as a remount would: what
 * was committed stays, what was not is fetched again (DESIGN 8).  On a
 * full disk a try begins only once statvfs shows room for a shard's
 * first chunk.  Other local failures (EIO, EROFS) still end the run.
 *
 * Owns struct smp_sampler and the order of the run.  Does not speak HTTP
 * (fetch.c, source.c) and does not touch SQL or the disk directly
 * (cachefs/shard_writer.h, catalog.h).
 *
 * Invariants: DESIGN 4 (every byte reserved before it is written: drain.c
 * and reader.c reserve, seal.c keeps queued reservations counted), DESIGN 5
 * (only records whose CRC passed reach the shard writer: reader.c),
 * DESIGN 7 (keys go to the catalog and the display-name sanitizer, never
 * into a path).
 * Threads and locks: see sampler_i.h.  smp_sampler_stop() and
 * smp_sampler_stats() may be called from any thread; the rest from the
 * thread that runs the sampler.
 */
#include "sampler/sampler_i.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>

#include "cachefs/budget.h"
#include "cachefs/catalog.h"
#include "cachefs/shard_writer.h"
#include "cachefs/store.h"
#include "common/clock.h"
#include "common/log.h"

int smp__fail_local(struct smp_sampler *s, int rc, const char *what)
{
	if (rc == -ENOSPC)
		SMP_STAT_ADD(&s->stats, enospc, 1); /* counted; a mount waits it out (heal) */
	if (!s->fatal) {
		s->fatal = rc;
		snprintf(s->fatal_msg, sizeof(s->fatal_msg), "%s: %s", what, strerror(-rc));
	}
	return rc;
}

bool smp__pause_wanted(struct smp_sampler *s)
{
	pthread_mutex_lock(&s->ctl_mu);
	bool v = s->pause_req || s->resume_req;
	pthread_mutex_unlock(&s->ctl_mu);
	return v;
}

int smp_sampler_new(struct smp_sampler **out, const struct smp_sampler_opts *o, char *err,
		    size_t errlen)
{
	struct smp_sampler *s = calloc(1, sizeof(*s));
	int rc;
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	atomic_init(&s->wanted, UINT64_MAX);
	s->cfg = o->cfg;
	s->cstore = o->store;
	s->cat = cfs_store_catalog(o->store);
	s->seed = o->seed;
	s->stop_when_full = o->stop_when_full;
	s->follow = o->follow;
	s->room_wait_ms = o->room_wait_ms ? o->room_wait_ms : 60000;
	s->progress = o->progress;
	s->progress_ctx = o->progress_ctx;
	pthread_mutex_init(&s->ctl_mu, NULL);
	pthread_cond_init(&s->ctl_cv, NULL);
	struct smp_source_opts so = {
	    .url = o->cfg->url,
	    .endpoint = o->cfg->endpoint,
	    .region = o->cfg->region,
	    .profile = o->cfg->profile,
	    .s3_addressing = (int)o->cfg->s3_addressing,
	    .credentials_file = o->credentials_file,
	    .timeout_ms = o->cfg->timeout_ms,
	    .retries = o->cfg->retries,
	    .stats = &s->stats,
	    .rank = o->cfg->rank,
	    .world_size = o->cfg->world_size,
	};
	rc = smp_source_open(&s->source, &so, err, errlen);
	if (rc)
		goto fail;
	rc = smp_fetch_new(&s->fetch, s->source, o->cfg->connections, o->cfg->retries, o->seed, err,
			   errlen);
	if (rc)
		goto fail;
	rc = cfs_catalog_source(s->cat, o->cfg->url, &s->source_id);
	if (rc) {
		snprintf(err, errlen, "recording the source in the catalog: %s", strerror(-rc));
		goto fail;
	}
	rc = cfs_store_catalog_reader(o->store, &s->keys, err, errlen);
	if (rc)
		goto fail;
	s->shard_cap = o->cfg->shard_size;
	if (o->first_shard && o->first_shard < s->shard_cap) {
		s->shard_cap = o->first_shard; /* drain.c ends it with the first shard */
		s->first_shard = true;
	}
	size_t shuf_cap =
	    s->shard_cap < SMP_SHUFFLE_MAX_BYTES ? (size_t)s->shard_cap : SMP_SHUFFLE_MAX_BYTES;
	rc = smp_shuffle_new(&s->shuf, shuf_cap, o->seed ^ 0x2545f4914f6cdd1dull);
	if (rc) {
		snprintf(err, errlen, "out of memory for the shuffle buffer");
		goto fail;
	}
	rc = smp__sealer_start(s, err, errlen);
	if (rc)
		goto fail;
	*out = s;
	return 0;
fail:
	smp_shuffle_free(s->shuf);
	cfs_catalog_close(s->keys);
	smp_fetch_free(s->fetch);
	smp_source_free(s->source);
	pthread_cond_destroy(&s->ctl_cv);
	pthread_mutex_destroy(&s->ctl_mu);
	free(s);
	return rc;
}

void smp_sampler_free(struct smp_sampler *s)
{
	if (!s)
		return;
	smp_fetch_free(s->fetch); /* cancels what is left: jobs end (units unsettled) */
	s->fetch = NULL;
	if (s->w) {
		cfs_shard_writer_abort(s->w);
		s->w = NULL;
	}
	smp__sealer_stop(s);
	smp_shuffle_free(s->shuf); /* after the writers: they give blocks back */
	s->shuf = NULL;
	while (s->jobs) { /* records of them were in the buffer: give their room back */
		struct smp__job *j = s->jobs;
		s->jobs = j->next;
		smp__job_free(s, j);
	}
	smp__job_free(s, s->waiting);
	smp_source_free(s->source);
	smp__plan_unload(s);
	cfs_catalog_close(s->keys);
	pthread_cond_destroy(&s->ctl_cv);
	pthread_mutex_destroy(&s->ctl_mu);
	free(s);
}

void smp_sampler_stop(struct smp_sampler *s)
{
	atomic_store(&s->stop, true);
	pthread_mutex_lock(&s->ctl_mu);
	pthread_cond_broadcast(&s->ctl_cv);
	pthread_mutex_unlock(&s->ctl_mu);
	smp_fetch_wakeup(s->fetch);
}

const struct smp_stats *smp_sampler_stats(const struct smp_sampler *s)
{
	return &s->stats;
}

/* The CLOCK_REALTIME instant ms from now: ctl_cv's clock (the default). */
static void ctl_deadline(struct timespec *ts, uint64_t ms)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_sec += (time_t)(ms / 1000);
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

uint64_t smp_sampler_wanted_bytes(struct smp_sampler *s)
{
	return atomic_load(&s->wanted);
}

uint64_t smp_sampler_wanted_fresh(struct smp_sampler *s, uint64_t timeout_ms)
{
	struct timespec ts;
	int rc = 0;
	ctl_deadline(&ts, timeout_ms);
	pthread_mutex_lock(&s->ctl_mu);
	uint64_t req = atomic_fetch_add(&s->refresh_req, 1) + 1;
	pthread_cond_broadcast(&s->ctl_cv); /* idle_wait() sleeps on it */
	if (s->fetch)
		smp_fetch_wakeup(s->fetch);
	while (s->refresh_done < req && atomic_load(&s->running) && !s->paused &&
	       !atomic_load(&s->stop) && rc == 0)
		rc = pthread_cond_timedwait(&s->ctl_cv, &s->ctl_mu, &ts);
	pthread_mutex_unlock(&s->ctl_mu);
	return atomic_load(&s->wanted);
}

bool smp_sampler_idle(struct smp_sampler *s)
{
	return atomic_load(&s->idle) || !atomic_load(&s->running);
}

bool smp_sampler_waiting(struct smp_sampler *s, char *why, size_t len)
{
	pthread_mutex_lock(&s->ctl_mu);
	bool waiting = s->heal_why[0] != '\0';
	if (waiting) {
		uint64_t now = cmn_mono_ms();
		uint64_t left = s->heal_retry_ms > now ? s->heal_retry_ms - now : 0;
		snprintf(why, len, "%s, retry in %llu s", s->heal_why,
			 (unsigned long long)((left + 999) / 1000));
	} else if (len) {
		why[0] = '\0';
	}
	pthread_mutex_unlock(&s->ctl_mu);
	return waiting;
}

int smp_sampler_pause(struct smp_sampler *s, uint64_t timeout_ms)
{
	struct timespec ts;
	int rc = 0;
	ctl_deadline(&ts, timeout_ms);
	pthread_mutex_lock(&s->ctl_mu);
	s->pause_req = true;
	pthread_cond_broadcast(&s->ctl_cv); /* idle_wait() sleeps on it */
	smp_fetch_wakeup(s->fetch);
	while (!s->paused && atomic_load(&s->running) && !atomic_load(&s->stop) && rc == 0)
		rc = pthread_cond_timedwait(&s->ctl_cv, &s->ctl_mu, &ts);
	bool ok = s->paused || !atomic_load(&s->running);
	pthread_mutex_unlock(&s->ctl_mu);
	return ok ? 0 : -ETIMEDOUT;
}

void smp_sampler_resume(struct smp_sampler *s, uint32_t epoch)
{
	pthread_mutex_lock(&s->ctl_mu);
	s->pause_req = false;
	s->resume_req = true;
	s->next_epoch = epoch;
	pthread_cond_broadcast(&s->ctl_cv);
	pthread_mutex_unlock(&s->ctl_mu);
	smp_fetch_wakeup(s->fetch);
}

void smp_sampler_set_epoch(struct smp_sampler *s, uint32_t epoch)
{
	pthread_mutex_lock(&s->ctl_mu);
	s->relabel = true;
	s->set_epoch = epoch;
	pthread_mutex_unlock(&s->ctl_mu);
	smp_fetch_wakeup(s->fetch);
}

/* The run loop takes an epoch from smp_sampler_set_epoch(); no pause. */
static void take_relabel(struct smp_sampler *s)
{
	pthread_mutex_lock(&s->ctl_mu);
	if (s->relabel) {
		s->epoch = s->set_epoch;
		s->relabel = false;
	}
	pthread_mutex_unlock(&s->ctl_mu);
}

/*
 * A fresh count of the resident units and wanted bytes was asked for
 * (smp_sampler_wanted_fresh): files dropped or retired since the last
 * refresh are seen.  Run loop only.
 */
static void take_refresh(struct smp_sampler *s)
{
	uint64_t req = atomic_load(&s->refresh_req);
	if (req == s->refresh_seen)
		return;
	s->refresh_seen = req;
	/*
	 * A unit whose file still waits in the sealer's queue reads as not
	 * resident here (its count is then on the safe side: wanted); the roll
	 * to a new pass reads residency again after its checkpoint, so such a
	 * unit is not fetched twice.  No plan: a heal dropped it.
	 */
	int rc = s->plan ? smp__plan_refresh_resident(s) : 0;
	if (rc)
		smp__fail_local(s, rc, "reading resident units");
	pthread_mutex_lock(&s->ctl_mu);
	s->refresh_done = req;
	pthread_cond_broadcast(&s->ctl_cv);
	pthread_mutex_unlock(&s->ctl_mu);
}

/*
 * Lists the source when it was never listed (or a heal dropped the plan),
 * or when `relist` epochs have passed (0: never again) and a slow listing's
 * pace allows (SMP_RELIST_PACE); saves the plan if it grew.
 */
static int relist_if_due(struct smp_sampler *s, char *err, size_t errlen)
{
	if (s->listed) {
		uint32_t every = s->cfg->relist;
		if (every == 0 || s->epoch < s->listed_epoch + every)
			return 0;
		if (s->list_cost_ms >= SMP_RELIST_SLOW_MS &&
		    cmn_mono_ms() - s->listed_end_ms < SMP_RELIST_PACE * s->list_cost_ms)
			return 0;
	}
	int rc = smp__relist(s, s->epoch, err, errlen);
	if (rc == 0)
		rc = smp__plan_checkpoint(s);
	if (rc == 0)
		rc = smp__plan_refresh_resident(s);
	if (rc && !err[0])
		snprintf(err, errlen, "%s", s->fatal_msg);
	s->prog.objects_total = cmn_plan_units(s->plan);
	return rc;
}

/*
 * Under ctl_mu: says the run loop holds (paused), waits while a pause is
 * asked (a stop ends it), then takes the new epoch of a resume.  Run loop
 * only, at a point where nothing is left to seal.
 */
static void hold_paused(struct smp_sampler *s)
{
	s->paused = true;
	pthread_cond_broadcast(&s->ctl_cv);
	while (s->pause_req && !atomic_load(&s->stop)) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		pthread_cond_timedwait(&s->ctl_cv, &s->ctl_mu, &ts);
	}
	if (s->resume_req) {
		s->epoch = s->next_epoch;
		s->resume_req = false;
	}
	s->paused = false;
}

/*
 * A pause or an epoch change: write the shuffle buffer out, seal the
 * partial shard and save the plan,
 * tell the pauser, wait for the new epoch (or stop), then re-read which
 * units are resident (the boundary evicted some) and relist when due.
 */
static int pause_point(struct smp_sampler *s, char *err, size_t errlen)
{
	/*
	 * The shuffle buffer's records go into shards first (their room was
	 * reserved with their jobs), so they reach the boundary's snapshot
	 * instead of holding their reservation, and the next epoch's admit,
	 * for a whole epoch.
	 */
	if (smp_shuffle_count(s->shuf))
		smp__drain(s);
	int rc = smp__plan_checkpoint(s);
	if (rc == 0)
		rc = smp__plan_partial_low(s); /* every file handed to the sealer is committed */
	pthread_mutex_lock(&s->ctl_mu);
	hold_paused(s);
	pthread_mutex_unlock(&s->ctl_mu);
	if (rc || atomic_load(&s->stop))
		return rc;
	atomic_store(&s->idle, false);
	rc = smp__plan_refresh_resident(s);
	if (rc)
		return smp__fail_local(s, rc, "reading resident units");
	return relist_if_due(s, err, errlen);
}

/* Waits up to 1 s for a pause, a resume or a stop (idle in follow mode). */
static void idle_wait(struct smp_sampler *s)
{
	struct timespec ts;
	atomic_store(&s->idle, true);
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 1;
	pthread_mutex_lock(&s->ctl_mu);
	if (!s->pause_req && !s->resume_req && !atomic_load(&s->stop) &&
	    atomic_load(&s->refresh_req) == s->refresh_seen)
		pthread_cond_timedwait(&s->ctl_cv, &s->ctl_mu, &ts);
	pthread_mutex_unlock(&s->ctl_mu);
}

/* Settles a job that can never be fetched (larger than the limit). */
static void skip_job(struct smp_sampler *s, struct smp__job *j)
{
	cmn_log(CMN_LOG_WARN, "%s: %llu bytes can never fit the cache limit: skipped", j->key,
		(unsigned long long)j->bytes);
	SMP_STAT_ADD(&s->stats, failed_objects, 1); /* not read: ingest says so */
	for (uint32_t i = 0; i < j->nunits; i++)
		cmn_plan_done(s->plan, j->unit + i);
	smp__job_free(s, j);
}

/*
 * The room a job needs before its first byte is fetched.  ingest
 * (stop_when_full) reserves the whole unit: it ends when the next unit does
 * not fit, having fetched nothing it cannot keep.  A mount reserves what
 * the budget has, at least the unit's first SMP_FIRST_ROOM bytes, so that
 * an object larger than one epoch's admit still comes in (its transfer is
 * held when the room runs out and goes on in the next epoch, DESIGN
 * "Epochs"); with no room at all - policy none, frozen - nothing is
 * fetched.
 */
static uint64_t first_room(const struct smp__job *j)
{
	uint64_t want = j->bytes - j->reserve;
	if (want > SMP_FIRST_ROOM) { /* ends at a record's end (smp__job_room_end) */
		uint64_t from = j->off + j->reserve;
		want = smp__job_room_end(j, from, from + SMP_FIRST_ROOM) - from;
	}
	return want;
}

/* What stopped fill_window(): one value, one meaning. */
enum fill_rc {
	FILL_FULL,	/* the window is full, or the run must stop (s->fatal, stop, pause) */
	FILL_ROOM,	/* s->waiting holds a job that waits for room in the budget */
	FILL_PLAN_WAIT, /* the plan's walk is at its end; units are in flight */
	FILL_PLAN_END,	/* the pass is over */
};

/*
 * Takes jobs from the plan while the window has room, each with its bytes
 * reserved first.  Returns what stopped it (enum fill_rc).
 */
static enum fill_rc fill_window_(struct smp_sampler *s)
{
	struct cfs_budget *b = cfs_store_budget(s->cstore);
	unsigned window = 2 * (s->cfg->connections ? s->cfg->connections : 1);
	while (s->inflight < window && !s->full && !s->fatal && !atomic_load(&s->stop) &&
	       !smp__pause_wanted(s)) {
		if (!s->waiting) {
			int rc = smp__plan_next_job(s, &s->waiting);
			if (rc < 0) {
				smp__fail_local(s, rc, "planning");
				return FILL_FULL;
			}
			if (rc == CMN_PLAN_WAIT)
				return FILL_PLAN_WAIT;
			if (rc == CMN_PLAN_END)
				return FILL_PLAN_END;
		}
		struct smp__job *j = s->waiting;
		if (j->reserve < j->bytes) {
			uint64_t want = j->bytes - j->reserve, take = want;
			if (s->follow && s->cfg->format != CMN_FORMAT_RAW) {
				/*
				 * TFRecord: only the first room before the fetch; the
				 * rest is reserved record by record as it arrives
				 * (drain.c), so that bytes reserved for transfers in
				 * flight stay small and a boundary's snapshot holds
				 * nearly the whole limit (retire = read).  Once:
				 * a job that slept for it (step_no_room) holds it,
				 * and goes (another first room on top would hold
				 * room that no transfer fills, a quarter of a small
				 * cache for four jobs, until the next boundary).
				 */
				take = j->reserve ? 0 : first_room(j);
			} else if (s->follow) { /* raw: see first_room() */
				uint64_t avail = smp__budget_avail(b);
				take = avail < want ? avail : want;
				if (take < first_room(j))
					take = want; /* fails below: wait */
			}
			int rc = cfs_budget_try_reserve(b, take);
			if (rc == -EFBIG) {
				s->waiting = NULL;
				skip_job(s, j);
				continue;
			}
			if (rc) {
				if (s->stop_when_full)
					s->full = true;
				return FILL_ROOM;
			}
			j->reserve += take;
		}
		s->waiting = NULL;
		atomic_store(&s->idle, false);
		smp__dispatch_job(s, j);
	}
	return FILL_FULL;
}

/* fill_window_, the keys of its jobs read in one snapshot (plan.c, job_key). */
static enum fill_rc fill_window(struct smp_sampler *s)
{
	enum fill_rc rc = fill_window_(s);
	smp__plan_keys_end(s);
	return rc;
}

/*
 * The run.  Ends when stopped, on a local failure, when the budget is full
 * (stop_when_full: the jobs in flight finish first), or - unless follow -
 * at the end of a pass that fetched something.
 */
/* Loads the plan (first run) and reads which of its units are resident. */
static int load_plan(struct smp_sampler *s, char *err, size_t errlen)
{
	if (s->plan)
		return 0;
	int rc = smp__plan_load(s, err, errlen);
	if (rc)
		return rc;
	rc = smp__plan_refresh_resident(s);
	if (rc)
		snprintf(err, errlen, "reading resident units: %s", strerror(-rc));
	return rc;
}

/* ---- healing (see the file comment) ------------------------------------- */

/* Whether a following run waits failure rc out instead of ending. */
static bool healable(const struct smp_sampler *s, int rc)
{
	if (!s->follow || atomic_load(&s->stop) || rc == 0 || rc == -ECANCELED)
		return false;
	return rc == -ENOSPC || rc == -EDQUOT || (s->list_failed && rc != -ENOMEM);
}

/* The cause of failure rc for people ("disk full (ENOSPC) on DIR"). */
static void heal_cause(struct smp_sampler *s, int rc, const char *msg, char *out, size_t len)
{
	if (rc == -ENOSPC)
		snprintf(out, len, "disk full (ENOSPC) on %s", cfs_store_dir(s->cstore));
	else if (rc == -EDQUOT)
		snprintf(out, len, "disk quota exceeded (EDQUOT) on %s", cfs_store_dir(s->cstore));
	else
		snprintf(out, len, "the source cannot be listed: %.500s",
			 msg && msg[0] ? msg : strerror(-rc));
}

/* A shuffle-buffer sink that drops the record: its job lets it go. */
static int discard_record(const struct smp_rec *r, void *ctx)
{
	struct smp_sampler *s = ctx;
	struct smp__job *j = r->job;
	if (j) {
		j->refs--;
		j->cancelled = true; /* its units are not settled: the plan is reloaded */
		smp__job_maybe_end(s, j);
	}
	return 0;
}

/*
 * Drops everything the catalog has not committed - transfers, buffered
 * records, the shard being filled, the job waiting for room, the plan in
 * memory - and gives back every byte they reserved, so that the next try
 * starts from the catalog as a remount would.
 */
static void heal_reset(struct smp_sampler *s)
{
	smp_fetch_cancel_all(s->fetch); /* readers end: jobs cancelled, units unsettled */
	smp_shuffle_drain(s->shuf, discard_record, s);
	s->need_room = false;
	smp_fetch_hold(s->fetch, false);
	if (s->w) {
		cfs_shard_writer_abort(s->w);
		s->w = NULL;
	}
	smp__seal_reset(s);
	smp__job_free(s, s->waiting);
	s->waiting = NULL;
	while (s->jobs) { /* none is left by now; a bound on what could be */
		struct smp__job *j = s->jobs;
		s->jobs = j->next;
		smp__job_free(s, j);
	}
	smp__plan_unload(s);
	s->listed = false; /* the reloaded plan learns which objects are live from a listing */
	s->full = false;
	s->fatal = 0;
	s->fatal_msg[0] = '\0';
}

/*
 * Whether the disk under the cache has room for a shard's first chunk again,
 * and SMP_CATALOG_ROOM beside it: samplers that went on as soon as a chunk
 * fitted would fill the disk again at once, and the catalog on the same
 * file system (a boundary's transaction, a sync point) would race them for
 * the last bytes.
 */
static bool disk_has_room(struct smp_sampler *s)
{
	struct statvfs v;
	if (statvfs(cfs_store_dir(s->cstore), &v) != 0)
		return true; /* cannot tell: try */
	uint64_t want = s->shard_cap < SMP_RESERVE_CHUNK ? s->shard_cap : SMP_RESERVE_CHUNK;
	return (uint64_t)v.f_bavail * v.f_frsize >= want + SMP_CATALOG_ROOM;
}

/*
 * Sleeps until `until` (cmn_mono_ms) or a stop, holding still through a
 * pause as pause_point() does (nothing is left to seal or save).  Returns
 * false when stopped.
 */
static bool heal_sleep(struct smp_sampler *s, uint64_t until)
{
	for (;;) {
		take_relabel(s);
		pthread_mutex_lock(&s->ctl_mu);
		if (s->pause_req || s->resume_req)
			hold_paused(s);
		uint64_t now = cmn_mono_ms();
		bool stop = atomic_load(&s->stop);
		if (!stop && now < until) {
			uint64_t ms = until - now < 1000 ? until - now : 1000;
			struct timespec ts;
			ctl_deadline(&ts, ms);
			if (!s->pause_req && !s->resume_req)
				pthread_cond_timedwait(&s->ctl_cv, &s->ctl_mu, &ts);
		}
		pthread_mutex_unlock(&s->ctl_mu);
		if (stop)
			return false;
		if (now >= until)
			return true;
	}
}

static void set_heal_why(struct smp_sampler *s, const char *why, uint64_t retry_ms)
{
	pthread_mutex_lock(&s->ctl_mu);
	snprintf(s->heal_why, sizeof(s->heal_why), "%s", why);
	s->heal_retry_ms = retry_ms;
	pthread_mutex_unlock(&s->ctl_mu);
}

/*
 * Waits out failure rc (healable(); msg: its message) as the file comment
 * says, trying again after each back-off until a try gets the run going
 * (the plan reloaded, the source listed).  Returns 0 then, -ECANCELED when
 * stopped, or the -errno of a try that failed for a cause that does not
 * heal (with its message in err).
 */
static int heal(struct smp_sampler *s, int rc, const char *msg, char *err, size_t errlen)
{
	uint64_t admitted = SMP_STAT_GET(&s->stats, records_admitted);
	/* a cause that comes back before anything was admitted waits longer */
	if (s->heal_delay_ms == 0 || admitted != s->heal_admitted)
		s->heal_delay_ms = SMP_HEAL_FIRST_MS;
	else if (s->heal_delay_ms < SMP_HEAL_MAX_MS)
		s->heal_delay_ms =
		    2 * s->heal_delay_ms < SMP_HEAL_MAX_MS ? 2 * s->heal_delay_ms : SMP_HEAL_MAX_MS;
	s->heal_admitted = admitted;
	char why[640];
	heal_cause(s, rc, msg, why, sizeof(why));
	if (msg && msg[0] && (rc == -ENOSPC || rc == -EDQUOT)) /* what failed, once */
		cmn_log(CMN_LOG_ERROR, "samplers: %s", msg);
	if (rc == -ENOSPC) /* the catalog's room on the full disk (cachefs/store.h) */
		cfs_store_ballast(s->cstore, false);
	heal_reset(s);
	atomic_store(&s->idle, false); /* data may come yet: not "the pass is over" */
	for (;;) {
		uint64_t until = cmn_mono_ms() + s->heal_delay_ms;
		set_heal_why(s, why, until);
		cmn_log(CMN_LOG_WARN, "samplers waiting: %s; retry in %.1f s", why,
			(double)s->heal_delay_ms / 1000.0);
		if (!heal_sleep(s, until)) {
			set_heal_why(s, "", 0);
			return -ECANCELED;
		}
		bool tried = rc != -ENOSPC || disk_has_room(s);
		if (tried && rc == -ENOSPC)
			(void)cfs_store_ballast(s->cstore, true);
		if (tried) {
			err[0] = '\0';
			rc = load_plan(s, err, errlen);
			if (rc == 0)
				rc = relist_if_due(s, err, errlen);
			if (rc == 0) {
				set_heal_why(s, "", 0);
				cmn_log(CMN_LOG_INFO, "samplers resume: %s is over", why);
				return 0;
			}
			if (!healable(s, rc)) {
				set_heal_why(s, "", 0);
				return rc;
			}
			heal_cause(s, rc, err, why, sizeof(why));
			heal_reset(s);
		}
		if (s->heal_delay_ms < SMP_HEAL_MAX_MS)
			s->heal_delay_ms = 2 * s->heal_delay_ms < SMP_HEAL_MAX_MS
					       ? 2 * s->heal_delay_ms
					       : SMP_HEAL_MAX_MS;
	}
}

int smp_sampler_list(struct smp_sampler *s, uint32_t epoch, char *err, size_t errlen)
{
	err[0] = '\0';
	s->epoch = epoch;
	s->fatal = 0;
	s->fatal_msg[0] = '\0';
	int rc = load_plan(s, err, errlen);
	/*
	 * A plan with objects (a warm cache) is listed by the run, in the
	 * background: the mount serves what the cache holds at once instead of
	 * waiting for a listing of the whole source (minutes at 10^8 keys,
	 * docs/scale.md), and a source that cannot be listed then shows as the
	 * run's wait (heal), not as a failed mount.
	 */
	if (rc == 0 && s->npobj == 0)
		rc = relist_if_due(s, err, errlen);
	return rc;
}

/* What a step of the run loop tells the loop to do. */
enum run_step {
	STEP_ON,    /* go on with this iteration */
	STEP_AGAIN, /* next iteration */
	STEP_STOP,  /* leave the loop */
};

/*
 * The plan has nothing more to hand out and nothing is in flight: the end
 * of a pass.  Either everything is resident (or failed) and the sampler
 * idles until the next epoch, or the plan rolls to a new pass.
 */
static enum run_step step_pass_end(struct smp_sampler *s)
{
	uint64_t fetched = cmn_plan_fetched_in_pass(s->plan);
	uint64_t admitted = SMP_STAT_GET(&s->stats, records_admitted);
	/*
	 * Nothing fetched since a roll in this epoch: everything is
	 * resident.  Following, nothing admitted either: what was
	 * fetched failed (counted once each); it is tried again in
	 * the next epoch, not pass after pass in this one.
	 */
	bool none_in = (fetched == 0 && s->rolled) ||
		       (s->follow && s->has_rolled && admitted == s->admitted_at_roll);
	if (none_in && s->rolled_epoch == s->epoch) {
		if (smp__plan_checkpoint(s) || !s->follow)
			return STEP_STOP;
		idle_wait(s);
		return STEP_AGAIN;
	}
	/*
	 * Residency read again once everything completed is committed
	 * (the checkpoint): a refresh earlier in the pass (a boundary's
	 * fresh count) may have read a unit whose file waited in the
	 * sealer's queue as not resident, and the new pass would fetch
	 * it twice.
	 */
	if (smp__plan_checkpoint(s) || smp__plan_refresh_resident(s) || smp__plan_roll(s))
		return STEP_STOP;
	s->rolled_epoch = s->epoch;
	s->admitted_at_roll = admitted;
	s->has_rolled = true;
	if (!s->follow && fetched > 0)
		return STEP_STOP; /* one pass (ingest) */
	return STEP_AGAIN;
}

/*
 * What came in goes out before the sampler sleeps on the budget: the
 * shuffle buffer drained, a partial shard sealed (so that it is in the next
 * snapshot).  STEP_AGAIN when there was something to do.
 */
static enum run_step step_flush_before_sleep(struct smp_sampler *s)
{
	if (smp_shuffle_count(s->shuf)) {
		smp__drain(s);
		return STEP_AGAIN;
	}
	if (s->w && cfs_shard_writer_records(s->w) > 0) {
		smp__plan_checkpoint(s); /* in the next snapshot, not with us */
		return STEP_AGAIN;
	}
	return STEP_ON;
}

/* Nothing in flight and the waiting job has no room: sleep on the budget. */
static enum run_step step_no_room(struct smp_sampler *s)
{
	struct smp__job *j = s->waiting;
	if (step_flush_before_sleep(s) == STEP_AGAIN)
		return STEP_AGAIN;
	/* a TFRecord job of a mount sleeps once for its first room (fill_window) */
	assert(!s->follow || s->cfg->format == CMN_FORMAT_RAW || j->reserve == 0);
	atomic_store(&s->idle, true);
	SMP_STAT_ADD(&s->stats, budget_waits, 1);
	uint64_t need = s->follow ? first_room(j) : j->bytes - j->reserve;
	/* in room_wait_ms slices (the mount: short) so a pause is seen soon */
	int br = cfs_budget_reserve(cfs_store_budget(s->cstore), need,
				    s->room_wait_ms < 250 ? s->room_wait_ms : 250);
	if (br == 0)
		j->reserve += need;
	else if (br == -ECANCELED)
		return STEP_STOP;
	return STEP_AGAIN;
}

/*
 * Every transfer waits for room (fetch.h, grant): what came in goes into a
 * sealed shard now, then sleep on the budget (which the daemon sees as the
 * samplers blocked) until some room comes back; the next step's grants
 * take it.
 */
static enum run_step step_all_ungranted(struct smp_sampler *s)
{
	if (step_flush_before_sleep(s) == STEP_AGAIN)
		return STEP_AGAIN;
	struct cfs_budget *b = cfs_store_budget(s->cstore);
	int br = cfs_budget_reserve(b, SMP_RANGE_MIN, 250);
	if (br == -ECANCELED)
		return STEP_STOP;
	if (br != 0)
		return STEP_AGAIN; /* still no room: wait again (or pause, stop) */
	cfs_budget_release(b, SMP_RANGE_MIN);
	return STEP_ON;
}

/* A job reserved part of its room and waits for the rest. */
static enum run_step step_need_room(struct smp_sampler *s)
{
	int wr = smp__wait_for_room(s);
	if (wr == -ECANCELED)
		return STEP_STOP;
	if (wr && wr != -EWOULDBLOCK) {
		smp__fail_local(s, wr, "waiting for room in the cache");
		return STEP_STOP;
	}
	return STEP_AGAIN;
}

/*
 * ingest: the pass's transfers are over and whole objects were given up on
 * faults that may pass (held by plan.c).  What they delivered is committed
 * first, with their lows, so that a round skips it and a new run would
 * resume where they stopped.  Then the next round begins after its
 * back-off (SMP_ROUND_FIRST_MS, doubling), or, SMP_ROUNDS spent, they are
 * given up for this run (failed_objects, objects_partial).
 */
static enum run_step step_round(struct smp_sampler *s)
{
	if (smp__plan_checkpoint(s))
		return STEP_STOP;
	int rc = smp__plan_partial_low(s);
	if (rc) {
		smp__fail_local(s, rc, "recording partial objects");
		return STEP_STOP;
	}
	size_t n = smp__plan_held(s);
	if (s->round >= SMP_ROUNDS) {
		cmn_log(CMN_LOG_WARN,
			"%zu object%s still given up after %u more rounds: left partial", n,
			n == 1 ? "" : "s", SMP_ROUNDS);
		smp__plan_settle_held(s);
		return STEP_AGAIN;
	}
	uint64_t wait = (uint64_t)SMP_ROUND_FIRST_MS << s->round;
	cmn_log(CMN_LOG_WARN,
		"%zu object%s given up on faults that may pass: round %u of %u in %.1f s, "
		"resuming where they stopped",
		n, n == 1 ? "" : "s", s->round + 1, SMP_ROUNDS, (double)wait / 1000.0);
	if (!heal_sleep(s, cmn_mono_ms() + wait))
		return STEP_STOP;
	smp__plan_round_begin(s);
	return STEP_AGAIN;
}

/* One iteration of the run loop after the window was filled. */
static enum run_step run_step(struct smp_sampler *s, enum fill_rc fw)
{
	if ((fw == FILL_PLAN_WAIT || fw == FILL_PLAN_END) && s->inflight == 0 &&
	    smp_shuffle_count(s->shuf)) {
		smp__drain(s); /* the rest of the pass waits in the buffer */
		return STEP_AGAIN;
	}
	if (fw == FILL_PLAN_WAIT && s->inflight == 0 && s->again)
		return step_round(s);
	if (fw == FILL_PLAN_END && s->inflight == 0)
		return step_pass_end(s);
	if (s->full && s->inflight == 0)
		return STEP_STOP;
	if (s->need_room)
		return step_need_room(s);
	if (fw == FILL_ROOM && !s->full && smp_fetch_pending(s->fetch) == 0)
		return step_no_room(s);
	/*
	 * Every request waits for its grant: none runs, and the last step found
	 * each queued one ungranted.  A request queued since (a new job with its
	 * first room) or waiting for a retry is not: the step below starts it.
	 */
	if (!smp_fetch_running(s->fetch) && smp_fetch_ungranted(s->fetch) &&
	    smp_fetch_ungranted(s->fetch) == smp_fetch_pending(s->fetch)) {
		enum run_step st = step_all_ungranted(s);
		if (st != STEP_ON)
			return st;
	}
	if (smp_fetch_pending(s->fetch)) {
		int fr = smp_fetch_step(s->fetch, 250);
		if (fr) {
			smp__fail_local(s, fr, "transfer engine");
			return STEP_STOP;
		}
	} else if (fw == FILL_PLAN_WAIT) {
		idle_wait(s); /* not reached: WAIT means transfers or buffered records */
	}
	return STEP_ON;
}

/*
 * The loop of a run: fill the window of transfers, step them, roll passes,
 * until stopped, fatal, or (ingest) done.  Returns a pause point's error,
 * else 0 (s->fatal says whether a step failed).
 */
static int run_loop(struct smp_sampler *s, char *err, size_t errlen)
{
	s->prog.objects_total = cmn_plan_units(s->plan);
	uint64_t every = cmn_plan_units(s->plan) / 256;
	if (every < SMP_SAVE_EVERY)
		every = SMP_SAVE_EVERY;
	while (!atomic_load(&s->stop) && !s->fatal) {
		take_relabel(s);
		take_refresh(s);
		if (smp__pause_wanted(s)) {
			int rc = pause_point(s, err, errlen);
			if (rc)
				return rc;
			continue;
		}
		enum fill_rc fw = fill_window(s);
		if (s->fatal)
			break;
		enum run_step st = run_step(s, fw);
		if (st == STEP_STOP)
			break;
		if (st == STEP_AGAIN)
			continue;
		if (s->marks_since_save >= every)
			smp__plan_checkpoint(s);
		smp__report(s, false);
	}
	return 0;
}

/* The start of a run: the plan loaded, the source listed if due. */
static int run_begin(struct smp_sampler *s, uint32_t epoch, char *err, size_t errlen)
{
	err[0] = '\0';
	s->epoch = epoch;
	s->full = false;
	s->fatal = 0;
	s->fatal_msg[0] = '\0';
	atomic_store(&s->running, true);
	smp__progress_begin(s);
	int rc = load_plan(s, err, errlen);
	if (rc == 0)
		rc = relist_if_due(s, err, errlen);
	while (healable(s, rc))
		rc = heal(s, rc, err, err, errlen);
	if (rc == -ECANCELED && atomic_load(&s->stop))
		rc = 0;
	return rc;
}

/* The end of the loop: the buffered records go out, the plan is saved. */
static void run_wind_down(struct smp_sampler *s)
{
	smp__drain(s);
	if (!s->fatal && s->plan && smp__plan_checkpoint(s) == 0)
		smp__plan_partial_low(s); /* a restart resumes the objects in flight */
	smp_fetch_cancel_all(s->fetch);
	smp__drain(s);
	smp__plan_settle_held(s); /* ingest's objects held for a round: given up for this run */
	if (!s->fatal && s->plan) /* no plan: stopped while a heal had dropped it */
		smp__plan_checkpoint(s);
	if (s->w) {
		cfs_shard_writer_abort(s->w);
		s->w = NULL;
	}
	smp__seal_flush(s);
}

/* The last report; waiters on `running` woken; the run's result. */
static int run_end(struct smp_sampler *s, int rc, char *err, size_t errlen)
{
	s->prog.records = SMP_STAT_GET(&s->stats, records_admitted) - s->records0;
	s->prog.bytes = SMP_STAT_GET(&s->stats, bytes_admitted) - s->bytes0;
	smp__report(s, true);
	pthread_mutex_lock(&s->ctl_mu);
	atomic_store(&s->running, false);
	pthread_cond_broadcast(&s->ctl_cv);
	pthread_mutex_unlock(&s->ctl_mu);
	if (rc && !err[0])
		snprintf(err, errlen, "%s", s->fatal_msg);
	if (!rc && s->fatal) {
		snprintf(err, errlen, "%s", s->fatal_msg);
		rc = s->fatal;
	}
	return rc;
}

int smp_sampler_run(struct smp_sampler *s, uint32_t epoch, char *err, size_t errlen)
{
	int rc = run_begin(s, epoch, err, errlen);
	if (rc || atomic_load(&s->stop))
		return run_end(s, rc, err, errlen);
	for (;;) {
		rc = run_loop(s, err, errlen);
		/* a mount waits out a full disk or a source that cannot be listed */
		int cause = rc ? rc : s->fatal;
		if (!healable(s, cause))
			break;
		rc = heal(s, cause, rc ? err : s->fatal_msg, err, errlen);
		if (rc == -ECANCELED)
			rc = 0; /* stopped */
		if (rc || atomic_load(&s->stop) || s->fatal)
			break;
	}
	run_wind_down(s);
	return run_end(s, rc, err, errlen);
}
