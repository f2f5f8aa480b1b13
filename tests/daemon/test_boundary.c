/*
 * test_boundary.c - Check suite of daemon/boundary.c, the one epoch
 * boundary, over a real store (SQLite catalog, files on disk) and a real
 * epoch set, without FUSE: the plan's victims leave the catalog and the
 * disk, a file with an open handle is pinned and never a victim (DESIGN
 * invariant 3; EVC_REASON_PINNED when pins hold the room), a victim stays
 * on disk while its epoch is current and goes at the next snapshot, reads
 * reach the plan, and the bound holds (invariant 4).
 */
#include "../cachefs/cfs_test.h"

#include "cachefs/budget.h"
#include "cachefs/catalog.h"
#include "cachefs/epoch.h"
#include "cachefs/shard_writer.h"
#include "cachefs/store.h"
#include "common/crc32c.h"
#include "common/events.h"
#include "daemon/boundary.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REC   1000u			    /* payload bytes of a record */
#define RECS  4				    /* records per shard */
#define SHARD ((uint64_t)RECS * (REC + 16)) /* bytes of one shard on disk */

static char dir[256];
static char err[512];
static struct cfs_store *store;
static struct cfs_epochs set;
static struct cmn_events ev;
static struct dmn_boundary bd;

static void setup(void)
{
	cfs_test_mkscratch(dir, sizeof(dir));
	struct cfs_store_opts o = {.dir = dir, .limit = 100 * SHARD};
	ck_assert_msg(cfs_store_open(&store, &o, err, sizeof(err)) == 0, "store: %s", err);
	cfs_budget_new_epoch(cfs_store_budget(store), 100 * SHARD);
	cmn_events_init(&ev);
	ck_assert_int_eq(cfs_epochs_init(&set, store, &ev), 0);
	memset(&bd, 0, sizeof(bd));
	bd.store = store;
	bd.set = &set;
	dmn_boundary_init(&bd);
}

static void teardown(void)
{
	dmn_boundary_destroy(&bd);
	cfs_epochs_destroy(&set);
	cmn_events_destroy(&ev);
	cfs_store_close(store);
	cfs_test_rmrf(dir);
}

/* Seals a shard of RECS records admitted in `epoch`; returns its id. */
static int64_t write_shard(uint32_t epoch)
{
	struct cfs_shard_writer *w = NULL;
	char buf[REC];
	int64_t id = -1;
	ck_assert_int_eq(cfs_shard_writer_open(&w, store, epoch, err, sizeof(err)), 0);
	for (int i = 0; i < RECS; i++) {
		memset(buf, 'a' + i, sizeof(buf));
		ck_assert_int_eq(
		    cfs_shard_writer_reserve(w, cfs_shard_writer_record_bytes(REC), 1000), 0);
		ck_assert_int_eq(cfs_shard_writer_append(w, buf, REC, cmn_crc32c(0, buf, REC), 1,
							 (uint64_t)i * REC),
				 0);
	}
	ck_assert_msg(cfs_shard_writer_seal(w, &id, err, sizeof(err)) == 0, "seal: %s", err);
	return id;
}

static bool on_disk(int64_t id)
{
	char name[64];
	snprintf(name, sizeof(name), "%lld.tfrecord", (long long)id);
	char sub[300];
	snprintf(sub, sizeof(sub), "%s/shards", dir);
	return cfs_test_exists(sub, name);
}

/* A file's state in the catalog: GONE when it has no row (GONE deletes it). */
static enum cfs_shard_state state_of(int64_t id)
{
	struct cfs_shard_info si;
	int rc = cfs_catalog_shard_get(cfs_store_catalog(store), id, &si);
	if (rc == -ENOENT)
		return CFS_SHARD_GONE;
	ck_assert_int_eq(rc, 0);
	enum cfs_shard_state st = si.state;
	free(si.name);
	return st;
}

static struct evc_entry entry(uint64_t limit, uint64_t admit, enum cmn_policy p)
{
	return (struct evc_entry){
	    .first = 0, .last = CMN_EPOCH_OPEN, .limit = limit, .admit = admit, .policy = p};
}

/* Runs the whole boundary into `next` (evict, then publish); returns the plan. */
static struct evc_plan boundary(uint32_t next, struct evc_entry e)
{
	struct evc_plan plan;
	dmn_boundary_flush_reads(&bd);
	ck_assert_msg(dmn_boundary_evict(&bd, next, &e, false, 0, &plan, err, sizeof(err)) == 0,
		      "evict: %s", err);
	ck_assert_msg(dmn_boundary_publish(&bd, next, err, sizeof(err)) == 0, "publish: %s", err);
	return plan;
}

/* Opens a handle on file id in the current epoch (as fs_read.c's open does). */
static struct cfs_efile *open_current(int64_t id)
{
	char name[64];
	snprintf(name, sizeof(name), "shard-%lld.tfrecord", (long long)id);
	struct cfs_epoch *ep = cfs_epochs_lookup_current(&set);
	ck_assert_ptr_nonnull(ep);
	struct cfs_efile *f = cfs_epoch_lookup_file(&set, ep, name);
	cfs_epoch_forget(&set, ep, 1);
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(cfs_efile_open(&set, f), 0);
	return f;
}

static uint64_t used(void)
{
	struct cfs_budget_stat bs;
	cfs_budget_get(cfs_store_budget(store), &bs);
	return bs.sealed + bs.reserved + bs.draining;
}

START_TEST(victims_leave_catalog_and_disk)
{
	int64_t a = write_shard(0), b = write_shard(1), c = write_shard(2);
	struct evc_entry e = entry(10 * SHARD, 10 * SHARD, CMN_POLICY_NONE);
	boundary(0, e);
	/* target = limit - admit = 2 shards: fifo evicts the oldest (a) */
	e = entry(10 * SHARD, 8 * SHARD, CMN_POLICY_FIFO);
	struct evc_plan p = boundary(1, e);
	ck_assert_uint_eq(p.n_victims, 1);
	ck_assert_uint_eq(p.evict_bytes, SHARD);
	ck_assert_int_eq(p.reason, EVC_REASON_OK);
	/* a was in epoch 0, which left the view when 1 was published: deleted */
	ck_assert(!on_disk(a));
	ck_assert_int_eq(state_of(a), CFS_SHARD_GONE);
	ck_assert(on_disk(b) && on_disk(c));
	ck_assert_int_eq(state_of(b), CFS_SHARD_SEALED);
	ck_assert_uint_eq(used(), 2 * SHARD); /* invariant 4: the budget follows */
	/* the new epoch lists exactly the survivors */
	struct cfs_epoch *ep = cfs_epochs_lookup_current(&set);
	ck_assert_uint_eq(ep->nfiles, 2);
	cfs_epoch_forget(&set, ep, 1);
}
END_TEST

START_TEST(open_file_is_pinned_not_a_victim)
{
	int64_t a = write_shard(0), b = write_shard(1), c = write_shard(2);
	boundary(0, entry(10 * SHARD, 10 * SHARD, CMN_POLICY_NONE));
	struct cfs_efile *fa = open_current(a); /* the oldest is being read */
	struct evc_plan p = boundary(1, entry(10 * SHARD, 8 * SHARD, CMN_POLICY_FIFO));
	ck_assert_uint_eq(p.n_victims, 1);
	ck_assert(on_disk(a)); /* pinned: fifo took the next oldest instead */
	ck_assert_int_eq(state_of(a), CFS_SHARD_SEALED);
	ck_assert(!on_disk(b));
	ck_assert(on_disk(c));
	cfs_efile_release(&set, fa);
	cfs_efile_forget(&set, fa, 1);
}
END_TEST

START_TEST(pins_holding_the_room_say_pinned)
{
	int64_t a = write_shard(0), b = write_shard(1);
	boundary(0, entry(10 * SHARD, 10 * SHARD, CMN_POLICY_NONE));
	struct cfs_efile *fa = open_current(a), *fb = open_current(b);
	/* admit 9 of 10 shards: both files would have to go, both are open */
	struct evc_plan p = boundary(1, entry(10 * SHARD, 9 * SHARD, CMN_POLICY_FIFO));
	ck_assert_uint_eq(p.n_victims, 0);
	ck_assert_int_eq(p.reason, EVC_REASON_PINNED);
	ck_assert_uint_eq(p.admit, 8 * SHARD); /* what fits: used + admit <= limit */
	ck_assert(on_disk(a) && on_disk(b));
	cfs_efile_release(&set, fa);
	cfs_efile_release(&set, fb);
	/* released: the next boundary may take them (target 1 shard: the oldest goes) */
	p = boundary(2, entry(10 * SHARD, 9 * SHARD, CMN_POLICY_FIFO));
	ck_assert_uint_eq(p.n_victims, 1);
	ck_assert_int_eq(p.reason, EVC_REASON_OK);
	ck_assert(!on_disk(a) && on_disk(b));
	cfs_efile_forget(&set, fa, 1);
	cfs_efile_forget(&set, fb, 1);
}
END_TEST

/*
 * Two shards in epoch 0, then the boundary into epoch 1 evicts the older
 * (FIFO, a limit one shard short) without publishing it: *a is the victim,
 * EVICTING, *b stays.
 */
static void evict_first_of_two(int64_t *a, int64_t *b)
{
	*a = write_shard(0);
	*b = write_shard(1);
	boundary(0, entry(10 * SHARD, 10 * SHARD, CMN_POLICY_NONE));
	struct evc_entry e = entry(10 * SHARD, 9 * SHARD, CMN_POLICY_FIFO);
	struct evc_plan p;
	ck_assert_int_eq(dmn_boundary_evict(&bd, 1, &e, false, 0, &p, err, sizeof(err)), 0);
	ck_assert_uint_eq(p.n_victims, 1);
	ck_assert_int_eq(state_of(*a), CFS_SHARD_EVICTING);
}

START_TEST(victim_stays_until_the_next_snapshot)
{
	int64_t a, b;
	evict_first_of_two(&a, &b);
	/* chosen, but epoch 0 is still current: invariant 3 keeps it */
	ck_assert(on_disk(a));
	ck_assert_uint_eq(used(), 2 * SHARD); /* draining bytes still count (invariant 4) */
	ck_assert_int_eq(dmn_boundary_publish(&bd, 1, err, sizeof(err)), 0);
	ck_assert(!on_disk(a));
	ck_assert_int_eq(state_of(a), CFS_SHARD_GONE);
	ck_assert(on_disk(b));
	ck_assert_uint_eq(used(), SHARD);
}
END_TEST

/* The epochs row of `number` (the test fails when there is none). */
static struct cfs_epoch_row epoch_row(uint32_t number)
{
	return cfs_test_epoch_row(store, number);
}

/*
 * A victim read to the end after the boundary that chose it, and deleted
 * on its last release before any flush of the daemon: its read statistics
 * reach its row before GONE deletes the row (epoch.c, flush_gone_stats),
 * so it counts as read to the end (full_files of the epoch that admitted
 * it, its records served), not as evicted unread.
 */
START_TEST(victim_read_then_deleted_counts_read)
{
	int64_t a, b;
	evict_first_of_two(&a, &b);
	struct cfs_efile *fa = open_current(a); /* epoch 0 is still current */
	bool end = false;
	cfs_efile_account(&set, fa, 0, SHARD, true, &end, cfs_epochs_current1(&set));
	ck_assert_int_eq(dmn_boundary_publish(&bd, 1, err, sizeof(err)), 0);
	ck_assert(on_disk(a)); /* the handle holds it (invariant 3) */
	cfs_efile_release(&set, fa);
	cfs_epochs_reap_wait(&set);
	ck_assert(!on_disk(a));
	ck_assert_int_eq(state_of(a), CFS_SHARD_GONE);
	struct cfs_epoch_row r0 = epoch_row(0), r1 = epoch_row(1);
	ck_assert_uint_eq(r1.evicted_files, 1);
	ck_assert_uint_eq(r1.unread_files, 0);
	ck_assert_uint_eq(r0.full_files, 1);
	ck_assert_uint_eq(r0.full_records, RECS);
	ck_assert_uint_eq(r0.served_records + r1.served_records, RECS);
	(void)b;
	cfs_efile_forget(&set, fa, 1);
}
END_TEST

START_TEST(reads_flushed_before_the_plan)
{
	int64_t a = write_shard(0), b = write_shard(1);
	boundary(0, entry(10 * SHARD, 10 * SHARD, CMN_POLICY_NONE));
	/* b is read to the end, a never: `uses` retires what was seen most */
	struct cfs_efile *fb = open_current(b);
	bool end = false;
	cfs_efile_account(&set, fb, 0, SHARD, true, &end, cfs_epochs_current1(&set));
	cfs_efile_release(&set, fb);
	struct evc_plan p = boundary(1, entry(10 * SHARD, 9 * SHARD, CMN_POLICY_USES));
	ck_assert_uint_eq(p.n_victims, 1);
	ck_assert(!on_disk(b)); /* fifo would have taken a: the read reached the plan */
	ck_assert(on_disk(a));
	/* the flush reached the catalog: b, GONE (no row), was read to the end */
	ck_assert_int_eq(state_of(b), CFS_SHARD_GONE);
	ck_assert_uint_eq(epoch_row(1).full_files, 1);
	ck_assert_uint_eq(epoch_row(1).unread_files, 0);
	cfs_efile_forget(&set, fb, 1);
}
END_TEST

/* The ids the current epoch shows, sorted (*n of them; malloc'd). */
static int64_t *shown_ids(size_t *n)
{
	struct cfs_epoch *ep = cfs_epochs_lookup_current(&set);
	ck_assert_ptr_nonnull(ep);
	ck_assert_int_eq(cfs_epoch_hold(&set, ep), 0);
	int64_t *ids = NULL;
	size_t pos = 0, k = 0, got;
	struct cfs_efile *f[16];
	while ((got = cfs_epoch_shown_files(&set, ep, &pos, f, 16)) > 0) {
		ids = realloc(ids, (k + got) * sizeof(*ids));
		ck_assert_ptr_nonnull(ids);
		for (size_t i = 0; i < got; i++)
			ids[k++] = f[i]->id;
	}
	cfs_epoch_forget(&set, ep, 2); /* the lookup and the hold */
	for (size_t i = 1; i < k; i++) /* insertion sort: a handful */
		for (size_t j = i; j > 0 && ids[j - 1] > ids[j]; j--) {
			int64_t t = ids[j];
			ids[j] = ids[j - 1];
			ids[j - 1] = t;
		}
	*n = k;
	return ids;
}

/*
 * A restart's first boundary reads no row twice: its evict takes the rows
 * reconciliation left (cfs_store_take_start_rows, once), and its publish
 * the evict's list without the victims plus the victims a restart kept to
 * retire.  The view is what the catalog holds: the SEALED files but the
 * victim, the kept victims retiring; not a row reconciliation dropped.
 */
START_TEST(restart_boundary_reads_the_rows_once)
{
	int64_t ids[6];
	for (int i = 0; i < 6; i++)
		ids[i] = write_shard(0);
	ck_assert_int_eq(cfs_catalog_shards_evict(cfs_store_catalog(store), ids, 2, 3), 0);
	char path[600];
	snprintf(path, sizeof(path), "%s/shards/%lld.tfrecord", dir, (long long)ids[2]);
	ck_assert_int_eq(unlink(path), 0); /* a row without its file: dropped at the restart */
	dmn_boundary_destroy(&bd);
	cfs_epochs_destroy(&set);
	cfs_store_close(store);

	struct cfs_store_opts o = {
	    .dir = dir, .limit = 100 * SHARD, .keep_retiring = true, .keep_start_rows = true};
	ck_assert_msg(cfs_store_open(&store, &o, err, sizeof(err)) == 0, "store: %s", err);
	ck_assert_int_eq(cfs_epochs_init(&set, store, &ev), 0);
	memset(&bd, 0, sizeof(bd));
	bd.store = store;
	bd.set = &set;
	dmn_boundary_init(&bd);
	bd.retiring_carry = cfs_store_reconcile_report(store)->retiring_epoch;
	ck_assert_int_eq(bd.retiring_carry, 3);

	struct evc_entry e = entry(2 * SHARD, 0, CMN_POLICY_FIFO);
	struct evc_plan p;
	ck_assert_msg(dmn_boundary_evict(&bd, 4, &e, true, 0, &p, err, sizeof(err)) == 0,
		      "evict: %s", err);
	ck_assert_uint_eq(p.n_victims, 1);
	struct cfs_shard_info *rows;
	size_t nrows;
	ck_assert_int_eq(cfs_store_take_start_rows(store, &rows, &nrows), -ENOENT);
	ck_assert_msg(dmn_boundary_publish(&bd, 4, err, sizeof(err)) == 0, "publish: %s", err);

	/* what the catalog holds now: the view's files */
	ck_assert_int_eq(cfs_catalog_shards_list(cfs_store_catalog(store),
						 1u << CFS_SHARD_SEALED | 1u << CFS_SHARD_EVICTING,
						 &rows, &nrows),
			 0);
	size_t n;
	int64_t *shown = shown_ids(&n);
	ck_assert_uint_eq(n, 4); /* 2 retiring, 2 of the 3 SEALED */
	ck_assert_uint_eq(nrows, n);
	uint64_t bytes = 0;
	for (size_t i = 0; i < nrows; i++) {
		ck_assert_int_eq(rows[i].id, shown[i]);
		ck_assert_int_ne(rows[i].id, ids[2]);
		bytes += rows[i].bytes;
	}
	ck_assert_int_eq(shown[0], ids[0]);
	ck_assert_int_eq(shown[1], ids[1]);
	struct cfs_epochs_stat st;
	cfs_epochs_stat(&set, &st);
	ck_assert_uint_eq(st.retiring_files, 2);
	ck_assert_uint_eq(st.current_files, 4);
	ck_assert_uint_eq(st.current_bytes, bytes);
	free(shown);
	cfs_shard_info_free(rows, nrows);
}
END_TEST

static Suite *boundary_suite(void)
{
	Suite *s = suite_create("daemon-boundary");
	struct {
		const char *name;
		const TTest *t;
	} cases[] = {
	    {"victims-leave-catalog-and-disk", victims_leave_catalog_and_disk},
	    {"open-file-is-pinned", open_file_is_pinned_not_a_victim},
	    {"pins-holding-room-say-pinned", pins_holding_the_room_say_pinned},
	    {"victim-stays-until-next-snapshot", victim_stays_until_the_next_snapshot},
	    {"reads-flushed-before-plan", reads_flushed_before_the_plan},
	    {"victim-read-then-deleted-counts-read", victim_read_then_deleted_counts_read},
	    {"restart-boundary-reads-the-rows-once", restart_boundary_reads_the_rows_once},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		TCase *tc = tcase_create(cases[i].name);
		tcase_add_checked_fixture(tc, setup, teardown);
		tcase_add_test(tc, cases[i].t);
		suite_add_tcase(s, tc);
	}
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(boundary_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
