/*
 * daemon.c - the mount daemon: one store, one epoch set, one FUSE view, the
 * samplers, and the epoch thread that applies boundaries.
 *
 * Owns the order of start-up and shutdown, the epoch boundary as DESIGN
 * "Epochs" steps 1-4 (victims from eviction/evictor.h's pure plan, applied
 * through cachefs/store.h in one catalog transaction), the batching of read
 * statistics into the catalog, and the figures behind .rollcache/stats.
 * Does not choose victims (eviction/), speak SQL (catalog.c), or serve FUSE
 * requests (fs.c).
 *
 * Threads:
 *   main        fuse loop (libfuse workers answer requests; one of them may
 *               block in control_hook() until its boundary is done);
 *   epoch       boundaries (requested or auto), stats flush every second,
 *               ingest rates; the only thread that publishes snapshots;
 *   samplers    started through struct cfs_daemon_workers.
 * Signals SIGINT/SIGTERM/SIGHUP are blocked in every thread but main, so
 * libfuse's handlers run where the loop waits.
 *
 * Invariants: DESIGN 3 (victims held by a snapshot or a handle are deleted
 * only on their last release: cfs_epochs_evict + gone_cb), DESIGN 4 (the
 * budget's limit and admit follow the schedule entry at each boundary).
 * Locking order: d->flush_mu, then d->mu; set->mu is a leaf (epoch.c); the
 * catalog locks itself and is never called with d->mu held.
 */
#include "cachefs/daemon.h"

#include "cachefs/budget.h"
#include "cachefs/catalog.h"
#include "cachefs/epoch.h"
#include "cachefs/fs.h"
#include "cachefs/store.h"
#include "common/log.h"
#include "eviction/evictor.h"
#include "eviction/schedule.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WAIT_TIMEOUT_DEFAULT_MS (10u * 60u * 1000u)

struct daemon {
	const struct cfs_daemon_opts *o;
	const struct cmn_config *cfg;
	struct cfs_store *store;
	struct cfs_catalog *cat;
	struct cfs_budget *budget;
	int dirfd;
	struct evc_schedule sch;
	bool have_sch;
	struct cfs_epochs set;
	bool have_set;
	struct cfs_fs *fs;
	struct timespec t0;
	pthread_t epoch_thread;
	bool have_thread;
	bool workers_started;

	pthread_mutex_t flush_mu; /* serialises stats flushes */

	pthread_mutex_t mu;
	pthread_cond_t cv;		  /* wakes the epoch thread */
	pthread_cond_t done_cv;		  /* a boundary finished */
	bool stop;			  /* protected by mu */
	uint64_t adv_requested;		  /* protected by mu: boundaries asked for (sequence) */
	uint64_t adv_done;		  /* protected by mu: boundaries finished */
	uint64_t adv_wait_upto;		  /* protected by mu: requests up to this one want "wait" */
	int adv_rc;			  /* protected by mu: result of the last boundary */
	bool auto_pending;		  /* protected by mu */
	struct evc_plan last_plan;	  /* protected by mu */
	bool have_plan;			  /* protected by mu */
	char entry_desc[256];		  /* protected by mu */
	const struct evc_entry *entry;	  /* protected by mu: entry in force */
	uint64_t err_flush, err_boundary; /* protected by mu */
	double ingest_bps, fetch_bps;	  /* protected by mu */
	uint64_t rate_bytes, rate_fetched; /* protected by mu */
	uint32_t inval[64];		   /* protected by mu: epochs to drop from the kernel */
	size_t n_inval;			   /* protected by mu */
	struct timespec rate_t;		   /* protected by mu */

	/* scratch of one boundary; epoch thread (or start-up) only */
	struct cfs_shard_info *snap;
	size_t nsnap;
	struct cfs_epoch_row row; /* the epoch row evict_step() wrote; publish() completes it */
};

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static double elapsed_s(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) / 1e9;
}

/* ---- deletion of evicted files (invariant 3) ----------------------- */

static void gone_cb(void *ctx, int64_t id, int kind, const char *relpath, uint64_t bytes)
{
	struct daemon *d = ctx;
	int rc = cfs_store_release_evicted(d->store, (enum cfs_kind)kind, id, bytes);
	if (rc != 0)
		cmn_log(CMN_LOG_WARN, "delete evicted %s: %s (start-up reconciliation retries)",
			relpath, strerror(-rc));
	else
		cmn_log(CMN_LOG_DEBUG, "evicted %s deleted on its last release", relpath);
}

/*
 * An epoch left the view (epoch.c, any thread, no lock held): queue it so
 * that the epoch thread drops the kernel's cached entry (a notification
 * from inside a request handler could deadlock on the directory lock).
 */
static void retired_cb(void *ctx, uint32_t number)
{
	struct daemon *d = ctx;
	pthread_mutex_lock(&d->mu);
	if (d->n_inval < sizeof(d->inval) / sizeof(d->inval[0]))
		d->inval[d->n_inval++] = number;
	pthread_cond_signal(&d->cv);
	pthread_mutex_unlock(&d->mu);
}

/* Epoch thread (or start-up): invalidates queued epochs/<E> entries. */
static void inval_retired(struct daemon *d)
{
	uint32_t q[64];
	pthread_mutex_lock(&d->mu);
	size_t n = d->n_inval;
	memcpy(q, d->inval, n * sizeof(q[0]));
	d->n_inval = 0;
	pthread_mutex_unlock(&d->mu);
	for (size_t i = 0; i < n && d->fs; i++)
		cfs_fs_epoch_retired(d->fs, q[i]);
}

/* ---- read statistics, batched off the hot path --------------------- */

struct delta_acc {
	struct cfs_shard_stat_delta *d;
	size_t n, cap;
	bool oom;
};

static void collect_delta(struct cfs_efile *f, void *ctx)
{
	struct delta_acc *a = ctx;
	if (a->oom)
		return;
	uint64_t reads = atomic_load_explicit(&f->d_reads, memory_order_relaxed);
	uint64_t full = atomic_load_explicit(&f->d_full_reads, memory_order_relaxed);
	uint64_t bytes = atomic_load_explicit(&f->d_read_bytes, memory_order_relaxed);
	if (!reads && !full && !bytes)
		return;
	if (a->n == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 64;
		struct cfs_shard_stat_delta *p = realloc(a->d, cap * sizeof(*p));
		if (!p) {
			a->oom = true;
			return;
		}
		a->d = p;
		a->cap = cap;
	}
	struct cfs_shard_stat_delta *x = &a->d[a->n++];
	x->id = f->id;
	x->reads = atomic_exchange_explicit(&f->d_reads, 0, memory_order_relaxed);
	x->full_reads = atomic_exchange_explicit(&f->d_full_reads, 0, memory_order_relaxed);
	x->read_bytes = atomic_exchange_explicit(&f->d_read_bytes, 0, memory_order_relaxed);
	x->last_read_ms = atomic_load_explicit(&f->last_read_ms, memory_order_relaxed);
}

/* Writes pending read statistics into the catalog (one transaction). */
static void flush_stats(struct daemon *d)
{
	struct delta_acc a = {0};
	pthread_mutex_lock(&d->flush_mu);
	cfs_epochs_foreach_file(&d->set, collect_delta, &a);
	bool have;
	uint32_t epoch = cfs_epochs_current_number(&d->set, &have);
	int rc = a.n ? cfs_catalog_shards_add_stats(d->cat, a.d, a.n, epoch) : 0;
	pthread_mutex_unlock(&d->flush_mu);
	if (rc != 0 || a.oom) {
		cmn_log(CMN_LOG_WARN, "read statistics of %zu files not recorded: %s", a.n,
			a.oom ? "out of memory" : strerror(-rc));
		pthread_mutex_lock(&d->mu);
		d->err_flush++;
		pthread_mutex_unlock(&d->mu);
	}
	free(a.d);
}

/* ---- snapshots ------------------------------------------------------- */

static int cmp_info_id(const void *a, const void *b)
{
	const struct cfs_shard_info *x = a, *y = b;
	return x->id < y->id ? -1 : x->id > y->id;
}

/* Reloads d->snap with every SEALED file (sorted by id). */
static int load_sealed(struct daemon *d)
{
	cfs_shard_info_free(d->snap, d->nsnap);
	d->snap = NULL;
	d->nsnap = 0;
	int rc = cfs_catalog_shards_list(d->cat, 1u << CFS_SHARD_SEALED, &d->snap, &d->nsnap);
	if (rc == 0 && d->nsnap)
		qsort(d->snap, d->nsnap, sizeof(*d->snap), cmp_info_id);
	return rc;
}

/*
 * Publishes epoch `number` of every SEALED file (DESIGN "Epochs" step 3)
 * and lets the previous epoch go once unused (step 4).
 */
static int publish(struct daemon *d, uint32_t number, char *err, size_t errlen)
{
	int rc = load_sealed(d);
	if (rc != 0) {
		snprintf(err, errlen, "epoch %" PRIu32 ": listing sealed files: %s", number,
			 strerror(-rc));
		return rc;
	}
	struct cfs_efile_in *in = calloc(d->nsnap ? d->nsnap : 1, sizeof(*in));
	char(*names)[40] = calloc(d->nsnap ? d->nsnap : 1, sizeof(*names));
	char(*paths)[64] = calloc(d->nsnap ? d->nsnap : 1, sizeof(*paths));
	if (!in || !names || !paths) {
		rc = -ENOMEM;
		snprintf(err, errlen, "epoch %" PRIu32 ": out of memory", number);
		goto out;
	}
	for (size_t i = 0; i < d->nsnap; i++) {
		const struct cfs_shard_info *si = &d->snap[i];
		/* raw: the sanitized display path (invariant 7); '/' makes directories */
		const char *name = si->kind == CFS_KIND_RAW && si->name ? si->name : names[i];
		snprintf(names[i], sizeof(names[i]), "shard-%" PRId64 ".tfrecord", si->id);
		rc = cfs_store_file_path(d->store, si->kind, si->id, false, paths[i],
					 sizeof(paths[i]));
		if (rc != 0) {
			snprintf(err, errlen, "file %" PRId64 ": path: %s", si->id, strerror(-rc));
			goto out;
		}
		in[i] = (struct cfs_efile_in){
		    .id = si->id,
		    .kind = (int)si->kind,
		    .name = name,
		    .relpath = paths[i],
		    .bytes = si->bytes,
		    .records = si->records,
		    .created_epoch = si->created_epoch,
		};
	}
	uint64_t started = now_ms();
	rc = cfs_epochs_publish(&d->set, number, in, d->nsnap, started, NULL);
	if (rc != 0) {
		snprintf(err, errlen, "epoch %" PRIu32 ": snapshot: %s", number, strerror(-rc));
		goto out;
	}
	if (d->fs) /* the kernel caches the `current` link: it points elsewhere now */
		cfs_fs_current_changed(d->fs);
	/*
	 * The epoch starts with this snapshot (step 3), after any wait for
	 * min_records (step 2): its row records what the snapshot holds.
	 */
	d->row.number = number;
	d->row.started_ms = started;
	d->row.resident_files = d->nsnap;
	d->row.resident_bytes = d->row.resident_records = 0;
	for (size_t i = 0; i < d->nsnap; i++) {
		d->row.resident_bytes += d->snap[i].bytes;
		d->row.resident_records += d->snap[i].records;
	}
	rc = cfs_catalog_epoch_begin(d->cat, &d->row);
	if (rc != 0) {
		snprintf(err, errlen, "epoch %" PRIu32 ": catalog: %s", number, strerror(-rc));
		goto out;
	}
	inval_retired(d);
	cmn_log(CMN_LOG_INFO, "epoch %" PRIu32 ": %zu files", number, d->nsnap);
out:
	free(in);
	free(names);
	free(paths);
	return rc;
}

/* ---- the boundary (DESIGN "Epochs" steps 1-4) ----------------------- */

static uint64_t started_ms_of(const struct cfs_epoch_row *rows, size_t n, uint32_t epoch)
{
	for (size_t i = 0; i < n; i++)
		if (rows[i].number == epoch)
			return rows[i].started_ms;
	return 0;
}

/*
 * Step 1: plans with evc_plan_boundary() over the sealed files and applies
 * the plan in one catalog transaction (victims EVICTING, the epoch row).
 * Victims held by a snapshot or a handle stay on disk until released.
 */
static int evict_step(struct daemon *d, uint32_t next, const struct evc_entry *entry,
		      uint64_t startup_admit, bool startup, struct evc_plan *plan, char *err,
		      size_t errlen)
{
	struct evc_shard *sh = NULL;
	size_t *victims = NULL;
	struct cfs_evict_item *items = NULL;
	int64_t *ids = NULL;
	struct cfs_epoch_row *rows = NULL;
	size_t nrows = 0;
	int rc = load_sealed(d);
	if (rc != 0) {
		snprintf(err, errlen, "boundary %" PRIu32 ": listing sealed files: %s", next,
			 strerror(-rc));
		return rc;
	}
	if (cfs_catalog_epochs_list(d->cat, &rows, &nrows) != 0)
		nrows = 0;
	size_t n = d->nsnap;
	sh = calloc(n ? n : 1, sizeof(*sh));
	victims = calloc(n ? n : 1, sizeof(*victims));
	items = calloc(n ? n : 1, sizeof(*items));
	ids = calloc(n ? n : 1, sizeof(*ids));
	if (!sh || !victims || !items || !ids) {
		rc = -ENOMEM;
		snprintf(err, errlen, "boundary %" PRIu32 ": out of memory", next);
		goto out;
	}
	uint64_t resident_bytes = 0, resident_records = 0;
	for (size_t i = 0; i < n; i++) {
		const struct cfs_shard_info *si = &d->snap[i];
		sh[i] = (struct evc_shard){
		    .id = si->id,
		    .bytes = si->bytes,
		    .created = si->created_epoch,
		    .reads = si->reads,
		    .full_reads = si->full_reads,
		    .last_use = si->last_read_ms ? si->last_read_ms
						 : started_ms_of(rows, nrows, si->created_epoch),
		    .pins = 0, /* a handle defers deletion, not eviction: see docs/mount.md */
		};
		resident_bytes += si->bytes;
		resident_records += si->records;
	}
	struct cfs_budget_stat bs;
	cfs_budget_get(d->budget, &bs);
	rc = evc_plan_boundary(entry, next, sh, n, bs.draining + bs.reserved, victims, plan);
	if (rc != 0) {
		snprintf(err, errlen, "boundary %" PRIu32 ": plan: %s", next, strerror(-rc));
		goto out;
	}
	if (startup) {
		/* planned with admit 0 (evict only above the limit); now the real budget */
		uint64_t room =
		    plan->used_after < entry->limit ? entry->limit - plan->used_after : 0;
		plan->admit = startup_admit < room ? startup_admit : room;
	}
	uint64_t ev_records = 0;
	for (size_t i = 0; i < plan->n_victims; i++) {
		const struct cfs_shard_info *si = &d->snap[victims[i]];
		items[i] = (struct cfs_evict_item){
		    .id = si->id,
		    .kind = si->kind,
		    .bytes = si->bytes,
		    .open = cfs_epochs_held(&d->set, si->id),
		};
		ids[i] = si->id;
		ev_records += si->records;
	}
	struct cfs_epoch_row row = {
	    .number = next,
	    .started_ms = now_ms(),
	    .limit = entry->limit,
	    .admit = plan->admit,
	    .min_uses = entry->min_uses,
	    .resident_files = n - plan->n_victims,
	    .resident_bytes = resident_bytes - plan->evict_bytes,
	    .resident_records = resident_records - ev_records,
	};
	snprintf(row.policy, sizeof(row.policy), "%s", cmn_policy_name(entry->policy));
	d->row = row; /* publish() rewrites started_ms and resident_* at the snapshot */

	rc = cfs_catalog_begin(d->cat);
	if (rc == 0 && plan->n_victims)
		rc = cfs_store_evict(d->store, items, plan->n_victims, next);
	if (rc == 0)
		rc = cfs_catalog_epoch_begin(d->cat, &row);
	if (rc == 0) {
		rc = cfs_catalog_commit(d->cat);
	} else {
		int rc2 = rc;
		cfs_catalog_rollback(d->cat);
		rc = rc2;
	}
	if (rc != 0) {
		snprintf(err, errlen, "boundary %" PRIu32 ": catalog: %s", next, strerror(-rc));
		goto out;
	}
	/* Held victims are deleted on their last release (invariant 3). */
	cfs_epochs_evict(&d->set, ids, plan->n_victims);
	if (plan->reason != EVC_REASON_OK)
		cmn_log(CMN_LOG_WARN, "epoch %" PRIu32 ": %s", next, plan->why);
	cmn_log(CMN_LOG_INFO,
		"epoch %" PRIu32 ": evicted %zu files (%" PRIu64 " bytes), admit %" PRIu64, next,
		plan->n_victims, plan->evict_bytes, plan->admit);
out:
	free(sh);
	free(victims);
	free(items);
	free(ids);
	free(rows);
	return rc;
}

static bool exiting(struct daemon *d)
{
	pthread_mutex_lock(&d->mu);
	bool stop = d->stop;
	pthread_mutex_unlock(&d->mu);
	return stop || (d->fs && cfs_fs_exited(d->fs));
}

/*
 * Step 2: waits until min_records records are resident, the samplers have
 * nothing more to give, the bound passes, or the daemon stops.  "Nothing
 * more" is: their pass ended (idle), or they have been blocked on the budget
 * (the epoch's admit or the limit is used up) for a second with no new
 * record sealed meanwhile; a one-second grace covers the moment right after
 * the boundary when the flags still describe the old pass.
 * Returns 0, or -ECANCELED when stopping.
 */
static int wait_records(struct daemon *d)
{
	uint64_t bound = d->o->wait_timeout_ms ? d->o->wait_timeout_ms : WAIT_TIMEOUT_DEFAULT_MS;
	uint64_t t0 = now_ms(), last_change = t0, blocked_since = 0, last_records = UINT64_MAX;
	for (;;) {
		struct cfs_resident r = {0};
		uint64_t now = now_ms();
		if (cfs_catalog_resident(d->cat, &r) == 0 && r.records >= d->cfg->min_records)
			return 0;
		if (r.records != last_records) {
			last_records = r.records;
			last_change = now;
		}
		if (exiting(d))
			return -ECANCELED;
		struct cfs_worker_stats ws = {0};
		if (d->o->workers && d->o->workers->stats)
			d->o->workers->stats(d->o->workers_ctx, &ws);
		struct cfs_budget_stat bs;
		cfs_budget_get(d->budget, &bs);
		bool blocked = bs.waiting_admit || bs.waiting_limit;
		if (!blocked)
			blocked_since = 0;
		else if (!blocked_since)
			blocked_since = now;
		const char *why = NULL;
		if (!ws.present)
			why = "no samplers are running";
		else if (ws.idle && now - t0 >= 1000)
			why = "the source has no more data for this epoch";
		else if (blocked_since && now - blocked_since >= 1000 && now - last_change >= 1000)
			why = "the cache is full for this epoch (limit or admit reached)";
		else if (now - t0 > bound)
			why = "the wait timed out";
		if (why) {
			cmn_log(CMN_LOG_WARN,
				"next wait: %" PRIu64 " of min_records %" PRIu64
				" resident; going ahead: %s",
				r.records, d->cfg->min_records, why);
			return 0;
		}
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 100 * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_mutex_lock(&d->mu);
		if (!d->stop)
			pthread_cond_timedwait(&d->cv, &d->mu, &ts);
		pthread_mutex_unlock(&d->mu);
	}
}

/* Runs one boundary into current + 1 (or into `first` at start-up). */
static int boundary(struct daemon *d, bool wait, bool startup, uint32_t first, char *err,
		    size_t errlen)
{
	bool have;
	uint32_t cur = cfs_epochs_current_number(&d->set, &have);
	uint32_t next = startup ? first : cur + 1;
	const struct evc_entry *entry = evc_schedule_at(&d->sch, next);
	struct evc_entry e = *entry;
	struct evc_plan plan;
	bool paused = false;

	if (!startup)
		flush_stats(d); /* the evictor sees every read so far */
	if (startup)
		e.admit = 0; /* a (re-)mount evicts only above the limit: serve what is held */
	int rc = evict_step(d, next, &e, entry->admit, startup, &plan, err, errlen);
	if (rc != 0)
		goto fail;
	paused = d->workers_started && d->o->workers->pause;
	if (paused)
		d->o->workers->pause(d->o->workers_ctx);
	cfs_budget_set_limit(d->budget, entry->limit);
	cfs_budget_new_epoch(d->budget, plan.admit);
	pthread_mutex_lock(&d->mu);
	d->last_plan = plan;
	d->have_plan = true;
	d->entry = entry;
	evc_entry_describe(entry, d->entry_desc, sizeof(d->entry_desc));
	pthread_mutex_unlock(&d->mu);
	/*
	 * The samplers start admitting for `next` now when we wait for them
	 * (step 2), else right after the snapshot, so that nothing they seal
	 * for `next` slips into its own snapshot: it joins at next + 1.
	 */
	bool tell = d->workers_started && d->o->workers->new_epoch;
	if (wait) {
		if (tell)
			d->o->workers->new_epoch(d->o->workers_ctx, next);
		rc = wait_records(d);
		if (rc != 0) {
			snprintf(err, errlen, "epoch %" PRIu32 ": shutting down", next);
			goto fail;
		}
	}
	rc = publish(d, next, err, errlen);
	if (rc != 0)
		goto fail;
	if (!wait && tell)
		d->o->workers->new_epoch(d->o->workers_ctx, next);
	return 0;
fail:
	if (paused && !wait && d->o->workers->new_epoch)
		d->o->workers->new_epoch(d->o->workers_ctx, next); /* never leave them paused */
	pthread_mutex_lock(&d->mu);
	d->err_boundary++;
	pthread_mutex_unlock(&d->mu);
	cmn_log(CMN_LOG_ERROR, "%s", err);
	return rc;
}

/* ---- the epoch thread -------------------------------------------------- */

static void update_rates(struct daemon *d)
{
	if (!d->workers_started || !d->o->workers->stats)
		return;
	struct cfs_worker_stats ws = {0};
	d->o->workers->stats(d->o->workers_ctx, &ws);
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	pthread_mutex_lock(&d->mu);
	double dt = elapsed_s(&d->rate_t, &now);
	if (dt >= 0.5) {
		double ib = (double)(ws.bytes_admitted - d->rate_bytes) / dt;
		double fb = (double)(ws.bytes_fetched - d->rate_fetched) / dt;
		d->ingest_bps = 0.5 * d->ingest_bps + 0.5 * ib;
		d->fetch_bps = 0.5 * d->fetch_bps + 0.5 * fb;
		d->rate_bytes = ws.bytes_admitted;
		d->rate_fetched = ws.bytes_fetched;
		d->rate_t = now;
	}
	pthread_mutex_unlock(&d->mu);
}

/*
 * advance = auto on an empty epoch (a new cache): "every file read" can
 * never happen, so advance once min_records are resident, or once anything
 * is and the samplers can add no more (pass over, or blocked on the budget).
 */
static bool auto_empty_ready(struct daemon *d)
{
	if (d->cfg->advance != CMN_ADVANCE_AUTO || atomic_load(&d->set.cur_nfiles) != 0)
		return false;
	struct cfs_resident r;
	if (cfs_catalog_resident(d->cat, &r) != 0 || r.records == 0)
		return false;
	if (r.records >= d->cfg->min_records)
		return true;
	struct cfs_worker_stats ws = {0};
	if (d->workers_started && d->o->workers->stats)
		d->o->workers->stats(d->o->workers_ctx, &ws);
	struct cfs_budget_stat bs;
	cfs_budget_get(d->budget, &bs);
	return !ws.present || ws.idle || bs.waiting_admit || bs.waiting_limit;
}

static void *epoch_main(void *arg)
{
	struct daemon *d = arg;
	char err[512];
	pthread_mutex_lock(&d->mu);
	while (!d->stop) {
		if (d->n_inval) {
			pthread_mutex_unlock(&d->mu);
			inval_retired(d);
			pthread_mutex_lock(&d->mu);
			continue;
		}
		if (d->adv_done < d->adv_requested) {
			bool wait = d->adv_done + 1 <= d->adv_wait_upto;
			pthread_mutex_unlock(&d->mu);
			int rc = boundary(d, wait, false, 0, err, sizeof(err));
			pthread_mutex_lock(&d->mu);
			d->adv_rc = rc;
			d->adv_done++;
			pthread_cond_broadcast(&d->done_cv);
			continue;
		}
		if (d->auto_pending) {
			d->auto_pending = false;
			pthread_mutex_unlock(&d->mu);
			cmn_log(CMN_LOG_INFO, "advance = auto: every file of the epoch was read");
			boundary(d, false, false, 0, err, sizeof(err));
			pthread_mutex_lock(&d->mu);
			continue;
		}
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		if (pthread_cond_timedwait(&d->cv, &d->mu, &ts) == ETIMEDOUT) {
			pthread_mutex_unlock(&d->mu);
			flush_stats(d);
			update_rates(d);
			if (auto_empty_ready(d)) {
				cmn_log(CMN_LOG_INFO,
					"advance = auto: the epoch is empty and data arrived");
				boundary(d, false, false, 0, err, sizeof(err));
			}
			pthread_mutex_lock(&d->mu);
		}
	}
	pthread_cond_broadcast(&d->done_cv);
	pthread_mutex_unlock(&d->mu);
	return NULL;
}

static void all_read_cb(void *ctx)
{
	struct daemon *d = ctx;
	if (d->cfg->advance != CMN_ADVANCE_AUTO)
		return;
	pthread_mutex_lock(&d->mu);
	d->auto_pending = true;
	pthread_cond_signal(&d->cv);
	pthread_mutex_unlock(&d->mu);
}

/* ---- hooks of the view ------------------------------------------------ */

static int control_hook(void *ctx, const char *cmd)
{
	struct daemon *d = ctx;
	bool wait;
	if (strcmp(cmd, "next") == 0)
		wait = false;
	else if (strcmp(cmd, "next wait") == 0)
		wait = true;
	else
		return -EINVAL;
	pthread_mutex_lock(&d->mu);
	if (d->stop) {
		pthread_mutex_unlock(&d->mu);
		return -ECANCELED;
	}
	uint64_t seq = ++d->adv_requested;
	if (wait)
		d->adv_wait_upto = seq;
	pthread_cond_signal(&d->cv);
	int rc = 0;
	while (d->adv_done < seq) {
		if (d->stop || cfs_fs_exited(d->fs)) {
			rc = -ECANCELED;
			break;
		}
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		pthread_cond_timedwait(&d->done_cv, &d->mu, &ts);
	}
	if (rc == 0)
		rc = d->adv_rc;
	pthread_mutex_unlock(&d->mu);
	return rc;
}

static void space_hook(void *ctx, uint64_t *limit, uint64_t *used)
{
	struct daemon *d = ctx;
	struct cfs_budget_stat bs;
	cfs_budget_get(d->budget, &bs);
	*limit = bs.limit;
	*used = bs.sealed + bs.reserved + bs.draining;
}

static int render_hook(void *ctx, enum cfs_fs_text which, char **buf, size_t *len)
{
	struct daemon *d = ctx;
	struct cfs_stats_view v;
	struct cfs_budget_stat bs;
	struct cfs_epochs_stat es;
	struct cfs_epoch_row *rows = NULL;
	size_t nrows = 0;
	struct cfs_sbuf b = {0};
	struct timespec now;

	flush_stats(d); /* so that read figures agree with the catalog */
	memset(&v, 0, sizeof(v));
	v.pid = (int)getpid();
	v.source = d->o->source;
	v.cache_dir = cfs_store_dir(d->store);
	v.mountpoint = d->o->mountpoint;
	v.epoch = cfs_epochs_current_number(&d->set, &v.have_epoch);
	v.advance = d->cfg->advance == CMN_ADVANCE_AUTO ? "auto" : "manual";
	v.min_records = d->cfg->min_records;
	cfs_budget_get(d->budget, &bs);
	v.limit = bs.limit;
	v.admit = bs.admit;
	v.admit_used = bs.admit_used;
	v.reserved = bs.reserved;
	v.sealed = bs.sealed;
	v.draining = bs.draining;
	v.peak = bs.peak;
	v.waiting_limit = bs.waiting_limit;
	v.waiting_admit = bs.waiting_admit;
	if (cfs_catalog_resident(d->cat, &v.resident) != 0)
		memset(&v.resident, 0, sizeof(v.resident));
	if (cfs_catalog_epochs_list(d->cat, &rows, &nrows) != 0)
		nrows = 0;
	v.epochs = rows;
	v.n_epochs = nrows;
	cfs_epochs_stat(&d->set, &es);
	v.epochs_listed = es.epochs_listed;
	v.open_handles = es.open_handles;
	v.draining_files = es.draining_files;
	if (d->fs) {
		struct cfs_fs_pt_stats pt;
		cfs_fs_passthrough(d->fs, &pt);
		v.passthrough = pt.enabled;
		v.passthrough_opens = pt.opens;
		v.passthrough_refused = pt.refused;
	}
	struct cfs_epoch *ep = cfs_epochs_lookup_current(&d->set);
	if (ep) {
		v.current_files = ep->nfiles;
		v.current_bytes = ep->bytes;
		v.current_records = ep->records;
		cfs_epoch_forget(&d->set, ep, 1);
	}
	v.current_read_bytes = atomic_load(&d->set.cur_read_bytes);
	v.current_files_read_full = atomic_load(&d->set.cur_full_files);
	if (d->workers_started && d->o->workers->stats)
		d->o->workers->stats(d->o->workers_ctx, &v.sampler);
	clock_gettime(CLOCK_MONOTONIC, &now);
	v.uptime_s = elapsed_s(&d->t0, &now);

	pthread_mutex_lock(&d->mu);
	char desc[256];
	memcpy(desc, d->entry_desc, sizeof(desc));
	struct evc_plan plan = d->last_plan;
	bool have_plan = d->have_plan;
	const struct evc_entry *entry = d->entry;
	v.errors_stats_flush = d->err_flush;
	v.errors_boundary = d->err_boundary;
	v.sampler.ingest_bps = d->ingest_bps;
	v.sampler.fetch_bps = d->fetch_bps;
	pthread_mutex_unlock(&d->mu);
	v.schedule = desc;
	v.policy = entry ? cmn_policy_name(entry->policy) : "";
	v.min_uses = entry ? entry->min_uses : 0;
	v.entry_limit = entry ? entry->limit : 0;
	v.entry_admit = entry ? entry->admit : 0;
	if (have_plan) {
		v.last_victims = plan.n_victims;
		v.last_evicted_bytes = plan.evict_bytes;
		v.last_admit = plan.admit;
		v.last_reason = evc_reason_name(plan.reason);
		v.last_why = plan.why;
	} else {
		v.last_reason = "";
		v.last_why = "";
	}

	if (which == CFS_TEXT_STATS_JSON)
		cfs_stats_json(&v, &b);
	else
		cfs_stats_metrics(&v, &b);
	free(rows);
	if (b.failed) {
		cfs_sbuf_free(&b);
		return -ENOMEM;
	}
	*buf = b.p;
	*len = b.len;
	return 0;
}

static const struct cfs_fs_hooks fs_hooks = {
    .render = render_hook,
    .control = control_hook,
    .space = space_hook,
};

/* ---- start-up and shutdown ---------------------------------------------- */

static void block_signals(sigset_t *old)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, old);
}

int cfs_daemon_run(const struct cfs_daemon_opts *o, char *err, size_t errlen)
{
	struct daemon *d = calloc(1, sizeof(*d));
	int rc;
	if (!d) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	d->o = o;
	d->cfg = o->cfg;
	d->dirfd = -1;
	clock_gettime(CLOCK_MONOTONIC, &d->t0);
	d->rate_t = d->t0;
	pthread_mutex_init(&d->mu, NULL);
	pthread_mutex_init(&d->flush_mu, NULL);
	pthread_cond_init(&d->cv, NULL);
	pthread_cond_init(&d->done_cv, NULL);

	rc = evc_schedule_build(d->cfg->epochs, d->cfg->n_epochs, d->cfg->limit, d->cfg->path,
				&d->sch, err, errlen);
	if (rc != 0)
		goto out;
	d->have_sch = true;

	struct cfs_store_opts so = {.dir = d->cfg->cache_dir, .limit = d->cfg->limit};
	rc = cfs_store_open(&d->store, &so, err, errlen);
	if (rc != 0)
		goto out;
	d->cat = cfs_store_catalog(d->store);
	d->budget = cfs_store_budget(d->store);
	d->dirfd = open(cfs_store_dir(d->store), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d->dirfd < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", cfs_store_dir(d->store), strerror(errno));
		goto out;
	}
	rc = cfs_epochs_init(&d->set, gone_cb, d);
	if (rc != 0) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	d->have_set = true;
	d->set.all_read = all_read_cb;
	d->set.all_read_ctx = d;
	d->set.retired = retired_cb;
	d->set.retired_ctx = d;

	/* The first epoch: 0 for a new cache, else one past the last recorded. */
	uint32_t last = 0, first = 0;
	if (cfs_catalog_current_epoch(d->cat, &last) == 0)
		first = last + 1;
	rc = boundary(d, false, true, first, err, errlen);
	if (rc != 0)
		goto out;

	struct cfs_fs_opts fo = {
	    .splice_read = o->splice_read,
	    .passthrough = o->passthrough,
	    .timeout = 86400.0,
	    .max_io = 1u << 20,
	    .max_readahead = 1u << 20,
	    .debug = o->debug,
	    .fsname = o->source,
	    .extra_opts = o->fuse_opts,
	};
	rc = cfs_fs_mount(&d->fs, o->mountpoint, &d->set, d->dirfd, &fs_hooks, d, &fo, err, errlen);
	if (rc != 0)
		goto out;
	uint32_t ra = o->readahead_kib ? o->readahead_kib : 4096;
	int rrc = cfs_fs_set_readahead(o->mountpoint, ra);
	if (rrc != 0)
		cmn_log(CMN_LOG_INFO, "readahead of %s stays at the kernel default (%s)",
			o->mountpoint, strerror(-rrc));
	cmn_log(CMN_LOG_INFO, "mounted %s on %s (cache %s, epoch %" PRIu32 ")", o->source,
		o->mountpoint, cfs_store_dir(d->store), first);

	/* Threads other than main never take SIGINT/SIGTERM/SIGHUP. */
	sigset_t old;
	block_signals(&old);
	if (o->workers && o->workers->start) {
		char werr[512];
		rc = o->workers->start(o->workers_ctx, d->store, first, werr, sizeof(werr));
		if (rc != 0) {
			pthread_sigmask(SIG_SETMASK, &old, NULL);
			snprintf(err, errlen, "samplers: %s", werr);
			goto out;
		}
		d->workers_started = true;
	}
	rc = pthread_create(&d->epoch_thread, NULL, epoch_main, d);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		rc = -rc;
		snprintf(err, errlen, "cannot start the epoch thread: %s", strerror(-rc));
		goto out;
	}
	d->have_thread = true;
	/* Up, samplers included: a failure above reached the caller as an error. */
	if (o->on_ready)
		o->on_ready(o->on_ready_ctx);

	rc = cfs_fs_loop(d->fs);
	if (rc != 0)
		snprintf(err, errlen, "FUSE loop: %s", strerror(-rc));
	cmn_log(CMN_LOG_INFO, "unmounting %s", o->mountpoint);

out:
	pthread_mutex_lock(&d->mu);
	d->stop = true;
	pthread_cond_broadcast(&d->cv);
	pthread_cond_broadcast(&d->done_cv);
	pthread_mutex_unlock(&d->mu);
	if (d->have_thread)
		pthread_join(d->epoch_thread, NULL);
	if (d->workers_started && o->workers->stop)
		o->workers->stop(o->workers_ctx);
	if (d->have_set && d->cat)
		flush_stats(d);
	cfs_fs_free(d->fs);
	if (d->have_set)
		cfs_epochs_destroy(&d->set);
	cfs_shard_info_free(d->snap, d->nsnap);
	if (d->dirfd >= 0)
		close(d->dirfd);
	if (d->store)
		cfs_store_close(d->store);
	if (d->have_sch)
		evc_schedule_free(&d->sch);
	pthread_cond_destroy(&d->cv);
	pthread_cond_destroy(&d->done_cv);
	pthread_mutex_destroy(&d->mu);
	pthread_mutex_destroy(&d->flush_mu);
	free(d);
	return rc;
}
