/*
 * epochs.c - the epoch thread: when a boundary runs and what happens
 * around it (DESIGN "Epochs").
 *
 * Owns the order of a boundary: flush the reads, plan and apply the
 * retirement (boundary.c), pause the samplers so that what they admitted is
 * counted under the old budget, set the new limit and admit budget, wait
 * for min_records when asked (`next wait`), publish the snapshot, and start
 * the samplers' pass for the new epoch.  Also: the first epoch of a new
 * cache (first_epoch, see first_epoch_ready()), advance = auto, the stats
 * flush every second, ingest rates, and dropping retired epochs from the
 * kernel's cache.  The only thread that publishes snapshots once the
 * mount is up (dmn__boundary runs the start-up one before it starts).
 *
 * Wake-ups come through d->ev (CFS_EV_* posted by the epoch set, DMN_EV_*
 * by the control thread and shutdown); nothing below calls up into here.
 * Locking: d->boundary_mu for a whole boundary (run_boundary_as: catalog,
 * budget and sampler calls inside it; the scrub thread withdraws files only
 * between boundaries); d->mu for the fields marked so in daemon_i.h, never
 * held across a catalog, budget, sampler or FUSE call.
 */
#include "daemon/daemon_i.h"

#include "common/clock.h"
#include "common/log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WAIT_TIMEOUT_DEFAULT_MS (10u * 60u * 1000u)

/*
 * While a new cache waits for its first shard, the epoch thread looks at
 * the budget's sealed bytes every FIRST_POLL_MS (a mutex, no SQL), for
 * FIRST_FAST_MS; then every FIRST_SLOW_MS until the shard comes.
 */
#define FIRST_POLL_MS 2u
#define FIRST_FAST_MS 30000u
#define FIRST_SLOW_MS 100u

/*
 * While less than CMN_FILL_PERCENT of the limit is resident, `next --wait`
 * waits past min_records for the epoch's admit, for at most FILL_WAIT_MS
 * (wait_records, filling()): the first fill, and under retire = read the
 * room of the victims read and deleted during the epoch, refilled before
 * the next view.
 */
#define FILL_WAIT_MS 30000u

/*
 * How long the samplers must have waited on the epoch's admit (or, with
 * victims_held, on the limit), with no byte of room reserved anywhere,
 * before wait_records() takes it as spent until the snapshot: two of its
 * 100 ms polls, so that a flag seen once is not enough.
 */
#define ADMIT_SPENT_MS 150u

bool dmn__exiting(struct dmn *d)
{
	pthread_mutex_lock(&d->mu);
	bool stop = d->stop;
	pthread_mutex_unlock(&d->mu);
	return stop || (d->fs && cfs_fs_exited(d->fs));
}

/* Drops the kernel's entries of epochs that left the view (no FUSE request is served here). */
static void inval_retired(struct dmn *d)
{
	uint32_t q[CFS_RETIRED_MAX];
	size_t n = cfs_epochs_take_retired(&d->set, q, CFS_RETIRED_MAX);
	for (size_t i = 0; i < n && d->fs; i++)
		cfs_fs_epoch_retired(d->fs, q[i]);
}

/* Records why the last `next wait` went ahead ("" when min_records were reached). */
static void set_wait_why(struct dmn *d, const char *why)
{
	pthread_mutex_lock(&d->mu);
	snprintf(d->wait_why, sizeof(d->wait_why), "%.*s", (int)sizeof(d->wait_why) - 1, why);
	pthread_mutex_unlock(&d->mu);
}

static void update_rates(struct dmn *d);

/*
 * Whether `next --wait` goes on waiting once min_records are resident: the
 * cache is filling (less than CMN_FILL_PERCENT of the limit resident or
 * retiring: the evicted files the current epoch still lists - the victims
 * of this boundary under retire = boundary, those not read under retire =
 * read - leave only at the snapshot, so their room cannot fill before it)
 * and the
 * samplers are bringing bytes in (running, not blocked on the admit or the
 * limit, a byte received in the last second), for at most FILL_WAIT_MS.  A reader that reads a view
 * faster than the samplers fill it then gets the epoch's admit in its next view, not only what came
 * in while it read (docs/design.md, "Defaults").
 */
static bool filling(struct dmn *d, const struct cfs_resident *r, const struct dmn_sampler_stats *ws,
		    const struct cfs_budget_stat *bs, uint64_t waited_ms, uint64_t quiet_ms)
{
	return ws->present && !ws->stopped && !ws->waiting && !ws->idle && !bs->waiting_admit &&
	       !bs->waiting_limit && quiet_ms < 1000 && waited_ms < FILL_WAIT_MS &&
	       r->bytes + cfs_epochs_retiring_bytes(&d->set) < bs->limit / 100 * CMN_FILL_PERCENT;
}

/* wait_records() goes ahead without min_records: the reason, logged and kept for stats. */
static void went_ahead(struct dmn *d, const struct cfs_resident *r,
		       const struct cfs_budget_stat *bs, const struct dmn_sampler_stats *ws,
		       bool blocked, uint64_t waited_ms, const char *why)
{
	char msg[1024];
	snprintf(msg, sizeof(msg),
		 "%" PRIu64 " of min_records %" PRIu64 " resident after %.1f s: %s "
		 "(admit %" PRIu64 " of %" PRIu64 " bytes used, %" PRIu64 " of limit %" PRIu64
		 " on disk or reserved, %" PRIu64 " reserved; samplers %s)",
		 r->records, d->cfg->min_records, (double)waited_ms / 1000.0, why, bs->admit_used,
		 bs->admit, bs->sealed + bs->reserved + bs->draining, bs->limit, bs->reserved,
		 !ws->present  ? "absent"
		 : ws->stopped ? "stopped"
		 : ws->waiting ? "waiting"
		 : blocked     ? "waiting for room"
		 : ws->idle    ? "idle (pass over)"
			       : "running");
	cmn_log(CMN_LOG_WARN, "next wait: going ahead: %s", msg);
	set_wait_why(d, msg);
}

/*
 * Step 2: waits until min_records records are resident, the samplers have
 * nothing more to give, the bound passes, or the daemon stops.  Samplers
 * that wait out a failure that heals (a full disk, a source that cannot be
 * listed) are waited for, up to the bound: the cause is logged once, and
 * named in the reason when the bound passes.  "Nothing more" is: their
 * pass ended (idle); or they wait on the epoch's admit, or with
 * victims_held (the boundary's victims stay on disk until its snapshot:
 * retire = boundary) on the limit, and no room is reserved (nothing in
 * flight or waiting to be sealed can still bring a record:
 * ADMIT_SPENT_MS); or they have been blocked on the budget (the
 * epoch's admit or the limit is used up) for a second with no new record
 * sealed and no byte received meanwhile (transfers still filling the
 * room they reserved bring records the view should hold); a one-second
 * grace covers the moment right after the boundary when the flags still
 * describe the old pass.  Once min_records are resident it goes on while
 * the cache is filling (filling()).
 * Event bits that arrive meanwhile are added to *deferred.
 * Returns 0, or -ECANCELED when stopping.
 */
static int wait_records(struct dmn *d, bool victims_held, uint32_t *deferred)
{
	uint64_t bound =
	    d->cfg->wait_timeout_ms ? d->cfg->wait_timeout_ms : WAIT_TIMEOUT_DEFAULT_MS;
	uint64_t t0 = cmn_mono_ms(), last_change = t0, blocked_since = 0, last_records = UINT64_MAX;
	uint64_t last_fetched = UINT64_MAX;
	bool said_waiting = false;
	for (;;) {
		struct cfs_resident r = {0};
		uint64_t now = cmn_mono_ms();
		bool have = cfs_catalog_resident(d->cat, &r) == 0;
		if (r.records != last_records) {
			last_records = r.records;
			last_change = now;
		}
		if (dmn__exiting(d))
			return -ECANCELED;
		struct dmn_sampler_stats ws;
		dmn__samplers_stats(d->smp, &ws);
		if (ws.bytes_fetched != last_fetched) {
			last_fetched = ws.bytes_fetched;
			last_change = now;
		}
		struct cfs_budget_stat bs;
		cfs_budget_get(d->budget, &bs);
		if (have && r.records >= d->cfg->min_records &&
		    !filling(d, &r, &ws, &bs, now - t0, now - last_change)) {
			set_wait_why(d, "");
			return 0;
		}
		bool blocked = bs.waiting_admit || bs.waiting_limit;
		if (!blocked)
			blocked_since = 0;
		else if (!blocked_since)
			blocked_since = now;
		const char *why = NULL;
		char stopped[340], heal[420];
		if (ws.waiting &&
		    !said_waiting) { /* said once, then waited out (sampler.c, heal) */
			cmn_log(CMN_LOG_WARN,
				"next wait: cannot admit: samplers %.360s; waiting up to %.0f s",
				ws.state, (double)bound / 1000.0);
			said_waiting = true;
		}
		if (!ws.present) {
			why = "no samplers are running";
		} else if (ws.stopped) {
			snprintf(stopped, sizeof(stopped), "the samplers stopped: %.300s",
				 ws.error);
			why = stopped;
		} else if (ws.waiting) {
			/* a full disk or a missing source heals by itself: wait_timeout bounds it
			 */
			if (now - t0 > bound) {
				snprintf(heal, sizeof(heal),
					 "wait_timeout passed while the samplers were %.240s",
					 ws.state);
				why = heal;
			}
		} else if (bs.waiting_admit && bs.reserved == 0 && blocked_since &&
			   now - blocked_since >= ADMIT_SPENT_MS)
			why = "the epoch's admit budget is used up";
		else if (victims_held && bs.waiting_limit && bs.reserved == 0 && blocked_since &&
			 now - blocked_since >= ADMIT_SPENT_MS)
			why = "the cache is at its limit until this boundary's victims leave "
			      "(retire = boundary: at the snapshot)";
		else if (ws.idle && !blocked && now - t0 >= 1000)
			why = "the source has no more data for this epoch";
		else if (blocked_since && now - blocked_since >= 1000 && now - last_change >= 1000)
			why = bs.waiting_admit
				  ? "the epoch's admit budget is used up"
				  : "the cache is at its limit (nothing left to retire "
				    "before the epoch is read)";
		else if (now - t0 > bound)
			why = "wait_timeout passed";
		if (why) {
			went_ahead(d, &r, &bs, &ws, blocked, now - t0, why);
			return 0;
		}
		/* the rates of the stats go on while the epoch thread waits here */
		update_rates(d);
		/* other wake-ups are kept for the epoch thread's loop */
		*deferred |= cmn_events_wait(&d->ev, 100);
	}
}

/*
 * A boundary cut the epoch's admit to what the plan would fetch (the rest
 * of the dataset was resident); a relist that found new objects since
 * raises it again, up to the schedule's admit, within the epoch (room for
 * them is free or made at the next boundary).  Epoch thread.
 */
static void raise_cut_admit(struct dmn *d)
{
	if (!d->admit_cut)
		return;
	uint64_t wanted = dmn__samplers_wanted(d->smp);
	struct cfs_budget_stat bs;
	cfs_budget_get(d->budget, &bs);
	if (wanted == 0 || bs.admit >= d->admit_cut)
		return;
	uint64_t want = bs.admit_used + wanted;
	if (want > d->admit_cut || wanted == UINT64_MAX)
		want = d->admit_cut;
	if (want > bs.admit) {
		cfs_budget_raise_admit(d->budget, want);
		cmn_log(CMN_LOG_INFO, "admit raised to %" PRIu64 " bytes: the plan has %s to fetch",
			want, wanted == UINT64_MAX ? "data" : "new units");
	}
	if (want >= d->admit_cut)
		d->admit_cut = 0;
}

/* A "retire read|boundary" command applies from this boundary on. */
static void take_retire_want(struct dmn *d)
{
	pthread_mutex_lock(&d->mu);
	int want = d->retire_want;
	if (want >= 0) {
		d->retire_read = want;
		d->retire_want = -1;
		d->bd.retire_read = d->retire_read;
	}
	pthread_mutex_unlock(&d->mu);
	if (want >= 0) /* set->mu is never taken under d->mu (daemon.h) */
		cfs_epochs_set_retire_read(&d->set, want != 0);
}

/*
 * Room only for units the plan will fetch (DESIGN "Epochs" step 2): with
 * the whole dataset resident there are no victims and nothing is downloaded
 * again; a relist that finds new objects raises it again.  Cuts e->admit to
 * what the samplers still want; returns the admit.
 */
static uint64_t cut_admit(struct dmn *d, uint32_t next, struct evc_entry *e)
{
	uint64_t scheduled = e->admit;
	uint64_t wanted = dmn__samplers_wanted(d->smp);
	if (wanted < e->admit) /* files dropped or retired since its last count show now */
		wanted = dmn__samplers_wanted_fresh(d->smp, 2000);
	if (wanted < e->admit) {
		e->admit = wanted;
		cmn_log(CMN_LOG_INFO,
			"epoch %" PRIu32 ": admit cut to %" PRIu64
			" bytes: the rest of the dataset is resident",
			next, wanted);
	}
	d->admit_cut = e->admit < scheduled ? scheduled : 0;
	return e->admit;
}

/* The boundary's plan in force: the budget's new epoch, what status shows. */
static void take_plan(struct dmn *d, const struct evc_entry *entry, const struct evc_plan *plan)
{
	cfs_budget_set_limit(d->budget, entry->limit);
	cfs_budget_new_epoch(d->budget, plan->admit);
	pthread_mutex_lock(&d->mu);
	d->last_plan = *plan;
	d->have_plan = true;
	d->entry = entry;
	evc_entry_describe(entry, d->entry_desc, sizeof(d->entry_desc));
	pthread_mutex_unlock(&d->mu);
}

/*
 * Runs one boundary into current + 1 (or into `first` at start-up).  With
 * `wait`, the samplers start on the new epoch's budget before the snapshot
 * and the snapshot waits for min_records (DESIGN "Epochs" step 3).  With
 * `light` (the first epoch of a new cache: the epoch left is empty, so
 * nothing was read and nothing needs sealing first) the samplers are not
 * paused: the snapshot takes the shards sealed so far, and the samplers
 * go on into the new epoch without draining their shuffle buffer.
 * *deferred collects event bits that arrive meanwhile.
 */
static int boundary_steps(struct dmn *d, bool wait, bool light, bool startup, uint32_t first,
			  uint32_t *deferred, char *err, size_t errlen)
{
	bool have;
	uint32_t cur = cfs_epochs_current_number(&d->set, &have);
	uint32_t next = startup ? first : cur + 1;
	const struct evc_entry *entry = evc_schedule_at(&d->sch, next);
	struct evc_entry e = *entry;
	struct evc_plan plan;
	bool paused = false;

	/*
	 * retire = read: the room of this epoch's victims comes back while the
	 * epoch is read, and the samplers fill it with this epoch's admit.  So
	 * `next --wait` waits for them first (min_records resident, or the
	 * samplers blocked on the admit or the limit) and then publishes at once:
	 * what the epoch admitted is all in the next view, and the next epoch's
	 * admit all in the one after (docs/design.md, "Departures", says why a
	 * wait after the plan would split each admit over two views).  The
	 * view is everything resident, victims included, so it holds
	 * min_records.  (A `retire read` sent before this boundary applies to
	 * it.)
	 */
	pthread_mutex_lock(&d->mu);
	bool retire_read = dmn__retire_read_next(d);
	pthread_mutex_unlock(&d->mu);
	if (wait && !startup && !light && retire_read) {
		int wrc = wait_records(d, false, deferred);
		if (wrc != 0) {
			snprintf(err, errlen, "epoch %" PRIu32 ": shutting down", next);
			return wrc;
		}
		wait = false;
	}
	uint64_t t[6] = {cmn_mono_ms()}; /* the steps' ends, for one debug line */
	if (!startup)
		dmn_boundary_flush_reads(&d->bd); /* the plan sees every read so far */
	t[1] = cmn_mono_ms();
	take_retire_want(d);
	uint64_t admit = cut_admit(d, next, &e);
	if (startup)
		e.admit = 0; /* a (re-)mount evicts only above the limit: serve what is held */
	int rc = dmn_boundary_evict(&d->bd, next, &e, startup, admit, &plan, err, errlen);
	if (rc != 0)
		goto fail;
	t[2] = cmn_mono_ms();
	paused = d->smp != NULL && !light;
	if (paused)
		dmn__samplers_pause(d->smp);
	t[3] = cmn_mono_ms();
	take_plan(d, entry, &plan);
	/*
	 * The samplers start admitting for `next` now when we wait for them,
	 * else right after the snapshot, so that nothing they seal for `next`
	 * slips into its own snapshot: it joins at next + 1.
	 */
	if (wait) {
		if (d->smp)
			dmn__samplers_new_epoch(d->smp, next);
		rc = wait_records(d, !light && !startup, deferred);
		if (rc != 0) {
			snprintf(err, errlen, "epoch %" PRIu32 ": shutting down", next);
			goto fail;
		}
	}
	t[4] = cmn_mono_ms();
	rc = dmn_boundary_publish(&d->bd, next, err, errlen);
	if (rc != 0)
		goto fail;
	t[5] = cmn_mono_ms();
	cmn_log(CMN_LOG_DEBUG,
		"boundary %" PRIu32 ": %" PRIu64 " ms (reads %" PRIu64 ", plan %" PRIu64
		", samplers paused %" PRIu64 ", wait %" PRIu64 ", snapshot %" PRIu64 ")",
		next, t[5] - t[0], t[1] - t[0], t[2] - t[1], t[3] - t[2], t[4] - t[3], t[5] - t[4]);
	if (light && d->smp)
		dmn__samplers_set_epoch(d->smp, next);
	else if (!wait && d->smp)
		dmn__samplers_new_epoch(d->smp, next);
	return 0;
fail:
	if (paused && !wait)
		dmn__samplers_new_epoch(d->smp, next); /* never leave them paused */
	pthread_mutex_lock(&d->mu);
	d->err_boundary++;
	pthread_mutex_unlock(&d->mu);
	cmn_log(CMN_LOG_ERROR, "%s", err);
	return rc;
}

/* boundary_steps() under d->boundary_mu: no file is withdrawn meanwhile (scrub.c). */
static int run_boundary_as(struct dmn *d, bool wait, bool light, bool startup, uint32_t first,
			   uint32_t *deferred, char *err, size_t errlen)
{
	pthread_mutex_lock(&d->boundary_mu);
	int rc = boundary_steps(d, wait, light, startup, first, deferred, err, errlen);
	pthread_mutex_unlock(&d->boundary_mu);
	return rc;
}

static int run_boundary(struct dmn *d, bool wait, bool startup, uint32_t first, uint32_t *deferred,
			char *err, size_t errlen)
{
	return run_boundary_as(d, wait, false, startup, first, deferred, err, errlen);
}

int dmn__boundary(struct dmn *d, bool wait, bool startup, uint32_t first, char *err, size_t errlen)
{
	uint32_t deferred = 0;
	int rc = run_boundary(d, wait, startup, first, &deferred, err, errlen);
	if (deferred)
		cmn_events_post(&d->ev, deferred); /* for the epoch thread's loop */
	return rc;
}

/* ---- the epoch thread -------------------------------------------------- */

static void update_rates(struct dmn *d)
{
	if (!d->smp)
		return;
	struct dmn_sampler_stats ws;
	dmn__samplers_stats(d->smp, &ws);
	uint64_t now = cmn_mono_ms();
	pthread_mutex_lock(&d->mu);
	double dt = (double)(now - d->rate_t_ms) / 1000.0;
	if (dt >= 0.5) {
		double ib = (double)(ws.bytes_admitted - d->rate_bytes) / dt;
		double fb = (double)(ws.bytes_fetched - d->rate_fetched) / dt;
		d->ingest_bps = 0.5 * d->ingest_bps + 0.5 * ib;
		d->fetch_bps = 0.5 * d->fetch_bps + 0.5 * fb;
		d->rate_bytes = ws.bytes_admitted;
		d->rate_fetched = ws.bytes_fetched;
		d->rate_t_ms = now;
	}
	pthread_mutex_unlock(&d->mu);
}

/*
 * advance = auto on an empty epoch (a new cache): "every file read" can
 * never happen, so advance once min_records are resident, or once anything
 * is and the samplers can add no more (pass over, or blocked on the budget).
 */
static bool auto_empty_ready(struct dmn *d)
{
	if (d->cfg->advance != CMN_ADVANCE_AUTO || atomic_load(&d->set.cur_nfiles) != 0)
		return false;
	struct cfs_resident r;
	if (cfs_catalog_resident(d->cat, &r) != 0 || r.records == 0)
		return false;
	if (r.records >= d->cfg->min_records)
		return true;
	struct dmn_sampler_stats ws;
	dmn__samplers_stats(d->smp, &ws);
	struct cfs_budget_stat bs;
	cfs_budget_get(d->budget, &bs);
	return !ws.present || ws.idle || bs.waiting_admit || bs.waiting_limit;
}

/*
 * first_epoch: the mount of a new cache starts on an empty epoch; its
 * samplers seal a small first shard (samplers.c, opts.first_shard), and
 * as soon as one is sealed it is the next epoch, with no `epoch next`, so
 * that a reader of `current` has a record within a fraction of a second
 * (the `first_epoch` setting).  Whether that is due: nothing is in the epoch, and a shard
 * is sealed (the budget's count first, then the catalog: the snapshot
 * lists what the catalog has committed, DESIGN 2).
 */
static bool first_epoch_ready(struct dmn *d)
{
	if (atomic_load(&d->set.cur_nfiles) != 0)
		return false;
	struct cfs_budget_stat bs;
	cfs_budget_get(d->budget, &bs);
	if (bs.sealed == 0)
		return false;
	struct cfs_resident r;
	return cfs_catalog_resident(d->cat, &r) == 0 && r.files > 0;
}

/*
 * Answers the control commands whose boundary is done (d->mu held; called
 * by the epoch thread between boundaries, so the current epoch and
 * adv_done agree here).  A `next N` whose advance is done but whose epoch
 * is not reached yet (control() counted one advance too few, see there)
 * moves to the advance that reaches N, queued if need be; a failed
 * boundary answers it with the failure.
 */
static void answer_done(struct dmn *d)
{
	struct cfs_requests *q = cfs_fs_requests(d->fs);
	bool have;
	uint64_t cur = cfs_epochs_current_number(&d->set, &have);
	size_t k = 0;
	for (size_t i = 0; i < d->npending; i++) {
		struct dmn_pending *p = &d->pending[i];
		if (p->has_epoch && have && cur >= p->epoch) {
			cfs_requests_done(q, p->r, 0, NULL, 0);
			continue;
		}
		if (p->seq > d->adv_done) {
			d->pending[k++] = *p;
			continue;
		}
		if (!p->has_epoch || d->adv_rc != 0) {
			cfs_requests_done(q, p->r, d->adv_rc, NULL, 0);
			continue;
		}
		bool wait = p->seq <= d->adv_wait_upto;
		p->seq = d->adv_done + (p->epoch - cur);
		if (p->seq > d->adv_requested)
			d->adv_requested = p->seq;
		if (wait && p->seq > d->adv_wait_upto)
			d->adv_wait_upto = p->seq;
		d->pending[k++] = *p;
	}
	d->npending = k;
}

/*
 * Before an advance (d->mu held): the requests `next N` whose N another
 * boundary reached meanwhile - the first epoch of a new cache, advance =
 * auto, which run without a request - are answered, the others re-counted
 * from the current epoch, and adv_requested lowered to what the pending
 * requests still need, so that a `next 1` counted while the first epoch's
 * boundary was publishing 1 runs no boundary to 2 (epoch 1, which its
 * asker is about to read, stays listed).
 */
static void settle_reached(struct dmn *d)
{
	struct cfs_requests *q = cfs_fs_requests(d->fs);
	bool have;
	uint64_t cur = cfs_epochs_current_number(&d->set, &have);
	if (!have)
		return;
	uint64_t upto = d->adv_done;
	size_t k = 0;
	for (size_t i = 0; i < d->npending; i++) {
		struct dmn_pending *p = &d->pending[i];
		if (p->has_epoch && cur >= p->epoch) {
			cfs_requests_done(q, p->r, 0, NULL, 0);
			continue;
		}
		if (p->has_epoch)
			p->seq = d->adv_done + (p->epoch - cur);
		if (p->seq > upto)
			upto = p->seq;
		d->pending[k++] = *p;
	}
	d->npending = k;
	d->adv_requested = upto;
	if (d->adv_wait_upto > upto)
		d->adv_wait_upto = upto;
}

void *dmn__epoch_main(void *arg)
{
	struct dmn *d = arg;
	char err[512];
	uint32_t bits = 0;
	uint64_t last_tick = cmn_mono_ms(), t0 = last_tick;
	/*
	 * The mount started on an empty epoch (a new cache: its snapshot held
	 * nothing): the first shard sealed is the next epoch (first_epoch_ready).
	 * Not the catalog here: the samplers may have sealed it already.
	 */
	bool first = d->cfg->first_epoch && d->smp && atomic_load(&d->set.cur_nfiles) == 0;
	for (;;) {
		unsigned wait_ms = !first				? 1000u
				   : cmn_mono_ms() - t0 < FIRST_FAST_MS ? FIRST_POLL_MS
									: FIRST_SLOW_MS;
		bits |= cmn_events_wait(&d->ev, wait_ms);
		uint32_t now_bits = bits;
		bits = 0;
		if (dmn__exiting(d))
			break;
		if (now_bits & CFS_EV_RETIRED)
			inval_retired(d);
		pthread_mutex_lock(&d->mu);
		settle_reached(d);
		bool advance = d->adv_done < d->adv_requested;
		bool wait = advance && d->adv_done + 1 <= d->adv_wait_upto;
		pthread_mutex_unlock(&d->mu);
		if (advance) {
			/* asked for: `next` makes the first epoch */
			first = false;
			int rc = run_boundary(d, wait, false, 0, &bits, err, sizeof(err));
			pthread_mutex_lock(&d->mu);
			d->adv_rc = rc;
			d->adv_done++;
			answer_done(d);
			if (d->adv_done < d->adv_requested)
				bits |= DMN_EV_ADVANCE; /* the next one at once */
			pthread_mutex_unlock(&d->mu);
			continue;
		}
		if (first && first_epoch_ready(d)) {
			cmn_log(CMN_LOG_INFO, "first_epoch: the first shard is sealed");
			int rc = run_boundary_as(d, false, true, false, 0, &bits, err, sizeof(err));
			/* done, or failed (logged): `epoch next` still makes it */
			first = rc == 0 && atomic_load(&d->set.cur_nfiles) == 0;
			continue;
		}
		if ((now_bits & CFS_EV_ALL_READ) && d->cfg->advance == CMN_ADVANCE_AUTO) {
			cmn_log(CMN_LOG_INFO, "advance = auto: every file of the epoch was read");
			run_boundary(d, false, false, 0, &bits, err, sizeof(err));
			continue;
		}
		if (cmn_mono_ms() - last_tick >= 1000) { /* the one-second tick */
			last_tick = cmn_mono_ms();
			dmn_boundary_flush_reads(&d->bd);
			update_rates(d);
			raise_cut_admit(d);
			if (auto_empty_ready(d)) {
				cmn_log(CMN_LOG_INFO,
					"advance = auto: the epoch is empty and data arrived");
				run_boundary(d, false, false, 0, &bits, err, sizeof(err));
			}
		}
	}
	/* nobody runs boundaries now: commands still waiting get -ECANCELED */
	pthread_mutex_lock(&d->mu);
	d->epoch_gone = true;
	pthread_mutex_unlock(&d->mu);
	dmn__cancel_pending(d);
	return NULL;
}
