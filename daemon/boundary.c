/*
 * boundary.c - the one epoch boundary: read statistics into the catalog,
 * the retirement plan applied in one transaction, the snapshot published.
 *
 * Owns the catalog side of a boundary and the scratch list of sealed files
 * (see boundary.h).  Does not choose victims (eviction/evictor.h's pure
 * plan does), speak SQL (catalog.c does), or decide when a boundary runs
 * or what the samplers do meanwhile (epochs.c does).
 *
 * Invariants: DESIGN 3 (victims held by a snapshot or a handle are deleted
 * only on their last release: cfs_epochs_evict; a file open now is pinned
 * and never a victim), DESIGN 4 (the plan keeps used + admit <= limit).
 * Locking: b->flush_mu serialises flushes; the catalog locks itself;
 * set->mu is a leaf (epoch.c).  No lock is held across a catalog call.
 *
 * DESIGN NOTE (in the manner of SQLite's pager.c)
 *
 * Terms.
 *   shard      a sealed file of the cache (a TFRecord shard or a raw object).
 *   resident   a shard whose catalog state is SEALED.
 *   pinned     a resident shard with an open handle (DESIGN invariant 3).
 *   draining   bytes of shards marked EVICTING whose file is not deleted yet.
 *   other      draining + reserved (being written) bytes: on disk or
 *              promised, but not resident.
 *   used       resident bytes + other: what invariant 4 bounds by `limit`.
 *   entry S    the schedule entry in force for the epoch being entered.
 *
 * Invariants this module keeps (numbers are DESIGN's):
 *   E1 (inv. 3)  a pinned shard is never a victim.
 *   E2 (inv. 4)  after a boundary, used + admit budget <= S.limit; and
 *                used <= S.limit unless pinned + other bytes alone exceed it
 *                (reason over_limit; they drain on release).
 *   E3           a shard used fewer than S.min_uses times is a victim only to
 *                honour a limit that shrank (reason limit_forced).
 *   E4           a boundary is atomic: the victims, the new epoch row and
 *                its budget are committed in one catalog transaction, or
 *                nothing is.
 *   E5           a boundary never waits for room: when pins or min_uses
 *                leave less than S.admit, the epoch starts with what fits
 *                and the reason is recorded (no deadlock).
 *
 * States of a shard, and who moves it:
 *
 *      (tmp, no row) --cfs_catalog_shard_insert--> SEALED (resident)
 *      SEALED --dmn_boundary_evict() whose plan names it--> EVICTING
 *      SEALED --cfs_catalog_shard_withdraw (scrub.c: corrupt or stale,
 *               between boundaries)--> EVICTING
 *      EVICTING --last handle released (cachefs), unlink--> GONE
 *
 *   A victim without open handles passes EVICTING -> GONE right after the
 *   commit; its bytes leave `used` when the file is unlinked.
 *
 * A boundary into epoch E+1 (the epoch thread, epochs.c, runs these in
 * order):
 *   1. dmn_boundary_flush_reads(): the view's read counters into the catalog.
 *   2. dmn_boundary_evict(): resident shards with their statistics (pins
 *      from the view's open handles) and other; evc_plan_boundary() with
 *      S = evc_schedule_at(E+1): victims, budget; one transaction (E4).
 *      The set then deletes the unpinned victims; the epoch thread sets the
 *      budget's limit/admit to S and the plan.
 *   3. dmn_boundary_publish(): the snapshot of every SEALED file.
 *
 * Not here: choosing victims (eviction/policy.c), the arithmetic
 * (eviction/plan.c), SQL (cachefs/catalog.c), handle counts (cachefs/epoch.c).
 */
#include "daemon/boundary.h"

#include "cachefs/fs.h"
#include "common/clock.h"
#include "common/log.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dmn_boundary_init(struct dmn_boundary *b)
{
	pthread_mutex_init(&b->flush_mu, NULL);
	atomic_store(&b->errors_flush, 0);
	b->snap = NULL;
	b->nsnap = 0;
	b->carry = NULL;
	b->ncarry = 0;
	b->from_start = false;
	b->snap_view = -1;
	b->retiring_carry = -1;
	memset(&b->row, 0, sizeof(b->row));
}

void dmn_boundary_destroy(struct dmn_boundary *b)
{
	cfs_shard_info_free(b->snap, b->nsnap);
	b->snap = NULL;
	b->nsnap = 0;
	cfs_shard_info_free(b->carry, b->ncarry);
	b->carry = NULL;
	b->ncarry = 0;
	pthread_mutex_destroy(&b->flush_mu);
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
	if (cfs_efile_take_delta(f, &a->d[a->n]))
		a->n++;
}

void dmn_boundary_flush_reads(struct dmn_boundary *b)
{
	struct delta_acc a = {0};
	struct cfs_catalog *cat = cfs_store_catalog(b->store);
	pthread_mutex_lock(&b->flush_mu);
	cfs_epochs_foreach_dirty(b->set, collect_delta, &a); /* the files read since the last */
	bool have;
	uint32_t epoch = cfs_epochs_current_number(b->set, &have);
	int rc = a.n ? cfs_catalog_shards_add_stats(cat, a.d, a.n, epoch) : 0;
	pthread_mutex_unlock(&b->flush_mu);
	if (rc != 0 || a.oom) {
		cmn_log(CMN_LOG_WARN, "read statistics of %zu files not recorded: %s", a.n,
			a.oom ? "out of memory" : strerror(-rc));
		atomic_fetch_add(&b->errors_flush, 1);
	}
	free(a.d);
}

/* ---- snapshots ------------------------------------------------------- */

static int cmp_info_id(const void *a, const void *b)
{
	const struct cfs_shard_info *x = a, *y = b;
	return x->id < y->id ? -1 : x->id > y->id;
}

/*
 * Reloads b->snap with every SEALED file, and with retiring >= 0 also the
 * EVICTING files chosen at the boundary into epoch `retiring` (retire =
 * read keeps them in that epoch's view), and those of epoch `carry` (a
 * restart kept them: cfs_store_opts.keep_retiring); sorted by id.
 */
static int load_files(struct dmn_boundary *b, int64_t retiring, int64_t carry)
{
	unsigned mask = 1u << CFS_SHARD_SEALED;
	if (retiring >= 0)
		mask |= 1u << CFS_SHARD_EVICTING;
	cfs_shard_info_free(b->snap, b->nsnap);
	b->snap = NULL;
	b->nsnap = 0;
	int rc = cfs_catalog_shards_list(cfs_store_catalog(b->store), mask, &b->snap, &b->nsnap);
	if (rc != 0)
		return rc;
	size_t k = 0;
	for (size_t i = 0; i < b->nsnap; i++) {
		struct cfs_shard_info *si = &b->snap[i];
		if (si->state == CFS_SHARD_EVICTING && si->evicted_epoch != retiring &&
		    si->evicted_epoch != carry) {
			free(si->name); /* an older victim, kept only by a handle */
			continue;
		}
		b->snap[k++] = *si;
	}
	b->nsnap = k;
	if (b->nsnap > 1)
		qsort(b->snap, b->nsnap, sizeof(*b->snap), cmp_info_id);
	return 0;
}

static int load_sealed(struct dmn_boundary *b)
{
	b->from_start = false;
	return load_files(b, -1, -1);
}

/*
 * A start-up evict's list: the rows reconciliation left, SEALED ones in
 * b->snap and EVICTING ones (kept to retire) in b->carry, both by id;
 * else, when the store kept none, the catalog's (load_sealed).
 */
static int load_start(struct dmn_boundary *b)
{
	struct cfs_shard_info *rows;
	size_t n;
	if (cfs_store_take_start_rows(b->store, &rows, &n) != 0)
		return load_sealed(b);
	size_t ncarry = 0;
	for (size_t i = 0; i < n; i++)
		ncarry += rows[i].state == CFS_SHARD_EVICTING;
	struct cfs_shard_info *carry = calloc(ncarry ? ncarry : 1, sizeof(*carry));
	if (!carry) {
		cfs_shard_info_free(rows, n);
		return -ENOMEM;
	}
	size_t k = 0, c = 0;
	for (size_t i = 0; i < n; i++) {
		if (rows[i].state == CFS_SHARD_EVICTING)
			carry[c++] = rows[i];
		else
			rows[k++] = rows[i];
	}
	cfs_shard_info_free(b->snap, b->nsnap);
	cfs_shard_info_free(b->carry, b->ncarry);
	b->snap = rows;
	b->nsnap = k;
	b->carry = carry;
	b->ncarry = c;
	b->from_start = true;
	return 0;
}

/*
 * After a start-up evict whose victims (b->snap[victims[i]]) all left:
 * b->snap becomes what the publish of epoch `next` would read (the SEALED
 * files without the victims, and the carried EVICTING rows), by id.
 */
static int snap_for_view(struct dmn_boundary *b, const size_t *victims, size_t n_victims,
			 uint32_t next)
{
	struct cfs_shard_info *all =
	    realloc(b->snap, (b->nsnap + b->ncarry ? b->nsnap + b->ncarry : 1) * sizeof(*all));
	if (!all)
		return -ENOMEM;
	b->snap = all;
	for (size_t i = 0; i < n_victims; i++)
		b->snap[victims[i]].state = CFS_SHARD_GONE;
	size_t k = cfs_shard_info_drop_gone(b->snap, b->nsnap);
	memcpy(b->snap + k, b->carry, b->ncarry * sizeof(*b->carry));
	b->nsnap = k + b->ncarry;
	free(b->carry); /* its names moved into b->snap */
	b->carry = NULL;
	b->ncarry = 0;
	if (b->nsnap > 1)
		qsort(b->snap, b->nsnap, sizeof(*b->snap), cmp_info_id);
	b->from_start = false;
	b->snap_view = next;
	return 0;
}

int dmn_boundary_publish(struct dmn_boundary *b, uint32_t number, char *err, size_t errlen)
{
	int64_t carry = b->retiring_carry;
	int rc = b->snap_view == (int64_t)number
		     ? 0
		     : load_files(b, b->retire_read ? (int64_t)number : -1, carry);
	b->snap_view = -1;
	cfs_shard_info_free(b->carry, b->ncarry); /* what snap_for_view did not take */
	b->carry = NULL;
	b->ncarry = 0;
	if (rc != 0) {
		snprintf(err, errlen, "epoch %" PRIu32 ": listing sealed files: %s", number,
			 strerror(-rc));
		return rc;
	}
	struct cfs_efile_in *in = calloc(b->nsnap ? b->nsnap : 1, sizeof(*in));
	char(*names)[40] = calloc(b->nsnap ? b->nsnap : 1, sizeof(*names));
	if (!in || !names) {
		rc = -ENOMEM;
		snprintf(err, errlen, "epoch %" PRIu32 ": out of memory", number);
		goto out;
	}
	for (size_t i = 0; i < b->nsnap; i++) {
		const struct cfs_shard_info *si = &b->snap[i];
		/* raw: the sanitized display path (invariant 7); '/' makes directories */
		const char *name = si->kind == CFS_KIND_RAW && si->name ? si->name : names[i];
		snprintf(names[i], sizeof(names[i]), "shard-%" PRId64 ".tfrecord", si->id);
		in[i] = (struct cfs_efile_in){
		    .id = si->id,
		    .kind = (int)si->kind,
		    .name = name,
		    .bytes = si->bytes,
		    .records = si->records,
		    .created_epoch = si->created_epoch,
		    .crc = si->crc,
		    .has_crc = si->has_crc,
		    .retiring = si->state == CFS_SHARD_EVICTING,
		};
	}
	uint64_t started = cmn_wall_ms();
	rc = cfs_epochs_publish(b->set, number, in, b->nsnap, started, NULL);
	if (rc != 0) {
		snprintf(err, errlen, "epoch %" PRIu32 ": snapshot: %s", number, strerror(-rc));
		goto out;
	}
	if (b->fs) /* the kernel caches the `current` link: it points elsewhere now */
		cfs_fs_current_changed(b->fs);
	/*
	 * The epoch starts with this snapshot (DESIGN "Epochs" step 1), after
	 * the retirement plan (step 2) and any wait for min_records (step 3):
	 * its row records what the snapshot holds.
	 */
	b->row.number = number;
	b->row.started_ms = started;
	b->row.resident_files = b->nsnap;
	b->row.resident_bytes = b->row.resident_records = 0;
	for (size_t i = 0; i < b->nsnap; i++) {
		b->row.resident_bytes += b->snap[i].bytes;
		b->row.resident_records += b->snap[i].records;
	}
	rc = cfs_catalog_epoch_begin(cfs_store_catalog(b->store), &b->row);
	if (rc != 0) {
		snprintf(err, errlen, "epoch %" PRIu32 ": catalog: %s", number, strerror(-rc));
		goto out;
	}
	b->retiring_carry = -1; /* shown once: they retire in this epoch */
	cmn_log(CMN_LOG_INFO, "epoch %" PRIu32 ": %zu files", number, b->nsnap);
out:
	free(in);
	free(names);
	return rc;
}

/* ---- the retirement plan (DESIGN "Epochs" step 2) -------------------- */

static uint64_t started_ms_of(const struct cfs_epoch_row *rows, size_t n, uint32_t epoch)
{
	for (size_t i = 0; i < n; i++)
		if (rows[i].number == epoch)
			return rows[i].started_ms;
	return 0;
}

/* The evictable view of the snapshot for the plan; sums what is resident. */
static void snapshot_shards(struct dmn_boundary *b, struct evc_shard *sh,
			    const struct cfs_epoch_row *rows, size_t nrows, uint64_t *bytes,
			    uint64_t *records)
{
	*bytes = *records = 0;
	for (size_t i = 0; i < b->nsnap; i++) {
		const struct cfs_shard_info *si = &b->snap[i];
		sh[i] = (struct evc_shard){
		    .id = si->id,
		    .bytes = si->bytes,
		    .created = si->created_epoch,
		    .reads = si->reads,
		    .full_reads = si->full_reads,
		    .last_use = si->last_read_ms ? si->last_read_ms
						 : started_ms_of(rows, nrows, si->created_epoch),
		    .pins = cfs_epochs_pinned(b->set, si->id) ? 1u : 0u, /* invariant 3 */
		    .fresh = !cfs_epochs_in_current(b->set, si->id),	 /* never in a view */
		};
		*bytes += si->bytes;
		*records += si->records;
	}
}

/*
 * Bytes on disk that are not resident and stay: evicted files held by a
 * handle.  Evicted files nobody holds leave when this boundary publishes
 * (retire = read: victims of the last boundary not read in their epoch), so
 * their room is the plan's.  Before the first publish nothing is held: the
 * draining bytes are then the interrupted epoch's victims a restart kept to
 * retire (cfs_store_opts.keep_retiring), whose room is the plan's too.  Bytes the samplers hold
 * reserved are not counted: the budget counts them against the new epoch's admit
 * (cfs_budget_new_epoch, B2), so used_after + admit <= limit still bounds
 * sealed + draining + reserved + what they may still reserve (invariant 4).
 */
static uint64_t draining_held(struct dmn_boundary *b)
{
	bool published;
	cfs_epochs_current_number(b->set, &published);
	if (!published)
		return 0;
	struct cfs_budget_stat bs;
	cfs_budget_get(cfs_store_budget(b->store), &bs);
	struct cfs_epochs_stat es;
	cfs_epochs_stat(b->set, &es);
	return bs.draining > es.draining_unheld_bytes ? bs.draining - es.draining_unheld_bytes : 0;
}

/* The plan's victims as the store's eviction items; returns their records. */
static uint64_t victim_items(struct dmn_boundary *b, const struct evc_shard *sh,
			     const size_t *victims, const struct evc_plan *plan,
			     struct cfs_evict_item *items, int64_t *ids)
{
	uint64_t records = 0;
	for (size_t i = 0; i < plan->n_victims; i++) {
		const struct cfs_shard_info *si = &b->snap[victims[i]];
		/* E1 (invariant 3): a pinned file is never a victim */
		assert(sh[victims[i]].pins == 0);
		items[i] = (struct cfs_evict_item){
		    .id = si->id,
		    .kind = si->kind,
		    .bytes = si->bytes,
		    .open = cfs_epochs_held(b->set, si->id),
		};
		ids[i] = si->id;
		records += si->records;
	}
	return records;
}

/*
 * The victims marked EVICTING and the epoch's row, in one transaction (E4);
 * the budget counts the victims' bytes as draining once it committed.
 */
static int commit_eviction(struct dmn_boundary *b, const struct cfs_evict_item *items,
			   const int64_t *ids, size_t n_victims, const struct cfs_epoch_row *row)
{
	struct cfs_catalog *cat = cfs_store_catalog(b->store);
	int rc = cfs_catalog_begin(cat);
	if (rc == 0 && n_victims)
		rc = cfs_catalog_shards_evict(cat, ids, n_victims, row->number);
	if (rc == 0)
		rc = cfs_catalog_epoch_begin(cat, row);
	if (rc != 0) {
		cfs_catalog_rollback(cat);
		return rc;
	}
	rc = cfs_catalog_commit(cat);
	if (rc == 0)
		cfs_store_evicted(b->store, items, n_victims);
	return rc;
}

/*
 * Victims no handle holds are deleted now, after the boundary committed:
 * a crash in between leaves EVICTING rows, which reconciliation finishes.
 * Compacts `items` to those (the order of the others does not matter).
 * Returns whether every victim left, files and rows.
 */
static bool reap_unheld(struct dmn_boundary *b, uint32_t next, struct cfs_evict_item *items,
			size_t n)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (!items[i].open)
			items[k++] = items[i];
	int rc = cfs_store_reap(b->store, items, k);
	if (rc != 0)
		cmn_log(CMN_LOG_WARN,
			"epoch %" PRIu32 ": deleting victims: %s (start-up reconciliation retries)",
			next, strerror(-rc));
	return rc == 0 && k == n;
}

int dmn_boundary_evict(struct dmn_boundary *b, uint32_t next, const struct evc_entry *entry,
		       bool startup, uint64_t startup_admit, struct evc_plan *plan, char *err,
		       size_t errlen)
{
	struct cfs_epoch_row *rows = NULL;
	size_t nrows = 0;
	b->snap_view = -1;
	int rc = startup ? load_start(b) : load_sealed(b);
	if (rc != 0) {
		snprintf(err, errlen, "boundary %" PRIu32 ": listing sealed files: %s", next,
			 strerror(-rc));
		return rc;
	}
	if (cfs_catalog_epochs_list(cfs_store_catalog(b->store), &rows, &nrows) != 0)
		nrows = 0;
	size_t n = b->nsnap, m = n ? n : 1;
	struct evc_shard *sh = calloc(m, sizeof(*sh));
	size_t *victims = calloc(m, sizeof(*victims));
	struct cfs_evict_item *items = calloc(m, sizeof(*items));
	int64_t *ids = calloc(m, sizeof(*ids));
	if (!sh || !victims || !items || !ids) {
		rc = -ENOMEM;
		snprintf(err, errlen, "boundary %" PRIu32 ": out of memory", next);
		goto out;
	}
	uint64_t resident_bytes, resident_records;
	snapshot_shards(b, sh, rows, nrows, &resident_bytes, &resident_records);
	rc = evc_plan_boundary(entry, next, sh, n, draining_held(b), victims, plan);
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
	/* E2 (invariant 4): the admit is room the limit has after the victims leave */
	assert(plan->admit == 0 || plan->used_after + plan->admit <= entry->limit);
	uint64_t ev_records = victim_items(b, sh, victims, plan, items, ids);
	struct cfs_epoch_row row = {
	    .number = next,
	    .started_ms = cmn_wall_ms(),
	    .limit = entry->limit,
	    .admit = plan->admit,
	    .min_uses = entry->min_uses,
	    .resident_files = n - plan->n_victims,
	    .resident_bytes = resident_bytes - plan->evict_bytes,
	    .resident_records = resident_records - ev_records,
	};
	snprintf(row.policy, sizeof(row.policy), "%s", cmn_policy_name(entry->policy));
	b->row = row; /* publish() rewrites started_ms and resident_* at the snapshot */
	rc = commit_eviction(b, items, ids, plan->n_victims, &row);
	if (rc != 0) {
		snprintf(err, errlen, "boundary %" PRIu32 ": catalog: %s", next, strerror(-rc));
		goto out;
	}
	bool all_left = reap_unheld(b, next, items, plan->n_victims);
	if (startup && b->from_start && all_left &&
	    snap_for_view(b, victims, plan->n_victims, next) != 0)
		b->snap_view = -1; /* out of memory: the publish reads the catalog */
	/* Held victims are deleted on their last release (invariant 3). */
	cfs_epochs_evict(b->set, ids, plan->n_victims);
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
