/*
 * test_epoch.c - Check suite of cachefs/epoch.c: snapshots, pins and the
 * states of an epoch and of an evicted-but-open file, without FUSE or disk
 * (a set without a store deletes nothing on disk but counts what it would
 * delete; epochs that leave the view and "all read" come as event bits).
 *
 * One TCase per behaviour; invariant numbers are DESIGN's.
 */
#include "cachefs/catalog.h"
#include "cachefs/epoch.h"
#include "cachefs/names.h"
#include "common/events.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Evicted files the set has deleted so far. */
static uint64_t ngone(void);

static struct cfs_epochs set;
static struct cmn_events ev;

static void setup(void)
{
	cmn_events_init(&ev);
	ck_assert_int_eq(cfs_epochs_init(&set, NULL, &ev), 0);
}

static void teardown(void)
{
	cfs_epochs_destroy(&set);
	cmn_events_destroy(&ev);
}

static uint64_t ngone(void)
{
	struct cfs_epochs_stat st;
	cfs_epochs_stat(&set, &st);
	return st.gone_files;
}

/* Whether `bit` was posted since the last call (takes every pending bit). */
static bool posted(uint32_t bit)
{
	return (cmn_events_wait(&ev, 0) & bit) != 0;
}

/* Publishes epoch `number` of files with ids[0..n). */
static int publish(uint32_t number, const int64_t *ids, size_t n)
{
	struct cfs_efile_in in[16] = {0};
	char names[16][32];
	for (size_t i = 0; i < n; i++) {
		snprintf(names[i], sizeof(names[i]), "shard-%lld.tfrecord", (long long)ids[i]);
		in[i] = (struct cfs_efile_in){.id = ids[i],
					      .name = names[i],
					      .bytes = 100,
					      .records = 10,
					      .created_epoch = 0};
	}
	return cfs_epochs_publish(&set, number, in, n, 0, NULL);
}

static struct cfs_efile *lookup(uint32_t epoch, int64_t id)
{
	char name[32];
	snprintf(name, sizeof(name), "shard-%lld.tfrecord", (long long)id);
	struct cfs_epoch *ep = cfs_epochs_lookup(&set, epoch);
	if (!ep)
		return NULL;
	struct cfs_efile *f = cfs_epoch_lookup_file(&set, ep, name);
	cfs_epoch_forget(&set, ep, 1);
	return f;
}

static uint32_t nlisted(void)
{
	struct cfs_epochs_stat st;
	cfs_epochs_stat(&set, &st);
	return st.epochs_listed;
}

START_TEST(snapshot_is_fixed_and_sorted)
{
	int64_t a[] = {3, 1, 2};
	ck_assert_int_eq(publish(0, a, 3), 0);
	struct cfs_epoch *ep = cfs_epochs_lookup(&set, 0);
	ck_assert_ptr_nonnull(ep);
	ck_assert_uint_eq(ep->nfiles, 3);
	ck_assert_str_eq(ep->files[0]->name, "shard-1.tfrecord");
	ck_assert_str_eq(ep->files[2]->name, "shard-3.tfrecord");
	ck_assert_uint_eq(ep->records, 30);
	ck_assert_ptr_null(cfs_epoch_lookup_file(&set, ep, "shard-4.tfrecord"));
	cfs_epoch_forget(&set, ep, 1);
	/* invariant 3: a later epoch does not change epoch 0's membership */
	int64_t b[] = {1, 2, 3, 4};
	ck_assert_int_eq(publish(1, b, 4), 0);
	ck_assert_uint_eq(cfs_epochs_current_number(&set, NULL), 1);
	/* numbers only grow; duplicate names are refused, set unchanged */
	ck_assert_int_eq(publish(1, b, 4), -EINVAL);
	int64_t dup[] = {5, 5};
	ck_assert_int_eq(publish(2, dup, 2), -EINVAL);
	ck_assert_uint_eq(cfs_epochs_current_number(&set, NULL), 1);
}
END_TEST

START_TEST(shared_file_across_epochs)
{
	int64_t a[] = {1, 2};
	ck_assert_int_eq(publish(0, a, 2), 0);
	struct cfs_efile *f0 = lookup(0, 1);
	ck_assert_int_eq(publish(1, a, 2), 0);
	struct cfs_efile *f1 = lookup(1, 1);
	ck_assert_ptr_eq(f0, f1); /* one inode, one page cache */
	cfs_efile_forget(&set, f0, 2);
}
END_TEST

START_TEST(old_epoch_leaves_when_unheld)
{
	int64_t a[] = {1, 2};
	ck_assert_int_eq(publish(0, a, 2), 0);
	ck_assert_int_eq(publish(1, a, 2), 0);
	ck_assert_uint_eq(nlisted(), 1);
	ck_assert(posted(CFS_EV_RETIRED));
	uint32_t q[4];
	ck_assert_uint_eq(cfs_epochs_take_retired(&set, q, 4), 1);
	ck_assert_uint_eq(q[0], 0);
	ck_assert_uint_eq(cfs_epochs_take_retired(&set, q, 4), 0); /* taken once */
	ck_assert_ptr_null(cfs_epochs_lookup(&set, 0));
	ck_assert_uint_eq(ngone(), 0); /* nothing evicted, nothing deleted */
}
END_TEST

START_TEST(dir_handle_holds_old_epoch)
{
	int64_t a[] = {1};
	ck_assert_int_eq(publish(0, a, 1), 0);
	struct cfs_epoch *ep = cfs_epochs_lookup(&set, 0);
	cfs_epoch_opendir(&set, ep);
	ck_assert_int_eq(publish(1, a, 1), 0);
	ck_assert_uint_eq(nlisted(), 2);
	ck_assert(!posted(CFS_EV_RETIRED)); /* held by the directory handle */
	cfs_epoch_releasedir(&set, ep);
	ck_assert_uint_eq(nlisted(), 1);
	ck_assert(posted(CFS_EV_RETIRED));
	uint32_t q[4];
	ck_assert_uint_eq(cfs_epochs_take_retired(&set, q, 4), 1);
	ck_assert_uint_eq(q[0], 0);
	/* the kernel still holds a lookup: the struct lives, shows nothing */
	ck_assert_ptr_null(cfs_epoch_lookup_file(&set, ep, "shard-1.tfrecord"));
	cfs_epoch_forget(&set, ep, 1);
}
END_TEST

START_TEST(evicted_open_file_deleted_on_last_release)
{
	int64_t a[] = {1, 2};
	ck_assert_int_eq(publish(0, a, 2), 0);
	struct cfs_efile *f = lookup(0, 1);
	ck_assert_int_eq(cfs_efile_open(&set, f), 0);
	ck_assert_int_eq(cfs_efile_open(&set, f), 0);
	int64_t victims[] = {1, 2};
	ck_assert_uint_eq(cfs_epochs_evict(&set, victims, 2), 200);
	ck_assert(cfs_epochs_held(&set, 1));
	ck_assert_uint_eq(ngone(), 0); /* epoch 0 is current: invariant 3 */
	ck_assert_int_eq(publish(1, NULL, 0), 0);
	/* epoch 0 is held by the open evicted file 1; file 2 (not open) goes */
	ck_assert_uint_eq(nlisted(), 2);
	ck_assert_uint_eq(ngone(), 1);
	ck_assert(!cfs_epochs_held(&set, 2)); /* the one deleted is 2 */
	ck_assert(cfs_epochs_held(&set, 1));
	cfs_efile_release(&set, f);
	ck_assert_uint_eq(ngone(), 1); /* one handle left */
	struct cfs_epochs_stat st;
	cfs_epochs_stat(&set, &st);
	ck_assert_uint_eq(st.draining_bytes, 100);
	ck_assert_uint_eq(st.draining_files, 1);
	cfs_efile_release(&set, f);
	ck_assert_uint_eq(ngone(), 2);
	ck_assert(!cfs_epochs_held(&set, 1));
	ck_assert_uint_eq(nlisted(), 1);
	cfs_epochs_stat(&set, &st);
	ck_assert_uint_eq(st.draining_bytes, 0);
	/* the inode is still known to the kernel: open now fails */
	ck_assert_int_eq(cfs_efile_open(&set, f), -ENOENT);
	cfs_efile_forget(&set, f, 1);
}
END_TEST

START_TEST(evicted_unheld_file_deleted_at_next_epoch)
{
	int64_t a[] = {1, 2};
	ck_assert_int_eq(publish(0, a, 2), 0);
	int64_t v[] = {2};
	cfs_epochs_evict(&set, v, 1);
	ck_assert_uint_eq(ngone(), 0);
	int64_t b[] = {1};
	ck_assert_int_eq(publish(1, b, 1), 0);
	ck_assert_uint_eq(ngone(), 1);
	ck_assert(!cfs_epochs_held(&set, 2));
	ck_assert(cfs_epochs_held(&set, 1));
	/* an evicted file never comes back (invariant 1) */
	int64_t c[] = {1, 3};
	ck_assert_int_eq(publish(2, c, 2), 0);
	ck_assert_uint_eq(ngone(), 1);
}
END_TEST

/*
 * With the reaper the same files go, on its thread: a publish and a last
 * release queue them, cfs_epochs_reap_wait() sees them deleted, and the
 * queue's bytes count as draining nobody holds until then (the boundary
 * gives that room to the plan).  Destroy with a queue lets it finish.
 */
START_TEST(reaper_deletes_what_publish_and_release_queue)
{
	ck_assert_int_eq(cfs_epochs_start_reaper(&set), 0);
	int64_t a[] = {1, 2, 3, 4};
	ck_assert_int_eq(publish(0, a, 4), 0);
	struct cfs_efile *f = lookup(0, 3);
	ck_assert_int_eq(cfs_efile_open(&set, f), 0);
	int64_t v[] = {2, 3};
	ck_assert_uint_eq(cfs_epochs_evict(&set, v, 2), 200);
	int64_t b[] = {1, 4};
	ck_assert_int_eq(publish(1, b, 2), 0);
	struct cfs_epochs_stat st;
	cfs_epochs_stat(&set, &st);
	/* 2 queued or deleted, 3 held open: draining is 3 and what is queued */
	ck_assert_uint_eq(st.draining_bytes, 100 + st.draining_unheld_bytes);
	cfs_epochs_reap_wait(&set);
	ck_assert_uint_eq(ngone(), 1);
	ck_assert(!cfs_epochs_held(&set, 2));
	cfs_efile_release(&set, f);
	cfs_epochs_reap_wait(&set);
	ck_assert_uint_eq(ngone(), 2);
	cfs_epochs_stat(&set, &st);
	ck_assert_uint_eq(st.draining_bytes, 0);
	ck_assert_uint_eq(st.draining_unheld_bytes, 0);
	ck_assert_int_eq(cfs_efile_open(&set, f), -ENOENT);
	cfs_efile_forget(&set, f, 1);
	/* a queue left at destroy (teardown) is deleted before the set goes */
	int64_t c[] = {4};
	cfs_epochs_evict(&set, c, 1);
	ck_assert_int_eq(publish(2, NULL, 0), 0);
}
END_TEST

START_TEST(read_accounting_and_all_read)
{
	int64_t a[] = {1, 2};
	ck_assert_int_eq(publish(0, a, 2), 0);
	struct cfs_efile *f1 = lookup(0, 1), *f2 = lookup(0, 2);
	bool end1 = false, end2 = false;
	cfs_efile_account(&set, f1, 0, 50, true, &end1, cfs_epochs_current1(&set));
	ck_assert(!end1);
	cfs_efile_account(&set, f1, 50, 50, false, &end1, cfs_epochs_current1(&set));
	ck_assert(end1);
	ck_assert_uint_eq(atomic_load(&f1->d_reads), 1);
	ck_assert_uint_eq(atomic_load(&f1->d_full_reads), 1);
	ck_assert_uint_eq(atomic_load(&f1->d_read_bytes), 100);
	ck_assert(!posted(CFS_EV_ALL_READ));
	cfs_efile_account(&set, f2, 0, 100, true, &end2, cfs_epochs_current1(&set));
	ck_assert(posted(CFS_EV_ALL_READ));
	ck_assert_uint_eq(atomic_load(&set.cur_read_bytes), 200);
	/* a second full read of f1 in the same epoch does not count twice */
	bool end3 = false;
	cfs_efile_account(&set, f1, 0, 100, true, &end3, cfs_epochs_current1(&set));
	ck_assert_uint_eq(atomic_load(&set.cur_full_files), 2);
	ck_assert(!posted(CFS_EV_ALL_READ));
	cfs_efile_forget(&set, f1, 1);
	cfs_efile_forget(&set, f2, 1);
}
END_TEST

/* foreach_dirty's callback: the ids it is called for, in *(struct ids *)ctx. */
struct ids {
	int64_t v[16];
	size_t n;
};
static void note_id(struct cfs_efile *f, void *ctx)
{
	struct ids *d = ctx;
	struct cfs_shard_stat_delta delta;
	d->v[d->n++] = f->id;
	cfs_efile_take_delta(f, &delta);
}

/*
 * The flush of read counters visits the files read since the last one, not
 * the view: of 8 files, the 2 read; none the next time; a file read again
 * comes back once however often it is read; a file that leaves the set
 * while listed is off the list.  The counts a stats read reports are kept
 * as files open, close and are evicted (checked against the walk in debug
 * builds, here by value).
 */
START_TEST(flush_visits_files_read_and_stats_are_kept)
{
	int64_t a[] = {1, 2, 3, 4, 5, 6, 7, 8};
	ck_assert_int_eq(publish(0, a, 8), 0);
	struct cfs_efile *f2 = lookup(0, 2), *f5 = lookup(0, 5), *f7 = lookup(0, 7);
	bool e = false, e5 = false;
	cfs_efile_account(&set, f2, 0, 10, true, &e, cfs_epochs_current1(&set));
	cfs_efile_account(&set, f5, 0, 100, true, &e5, cfs_epochs_current1(&set));
	struct ids d = {0};
	cfs_epochs_foreach_dirty(&set, note_id, &d);
	ck_assert_uint_eq(d.n, 2);
	ck_assert(d.v[0] + d.v[1] == 7 && (d.v[0] == 2 || d.v[0] == 5));
	d.n = 0;
	cfs_epochs_foreach_dirty(&set, note_id, &d);
	ck_assert_uint_eq(d.n, 0);
	e = false;
	cfs_efile_account(&set, f2, 10, 10, false, &e, cfs_epochs_current1(&set));
	cfs_efile_account(&set, f2, 20, 10, false, &e, cfs_epochs_current1(&set));
	cfs_epochs_foreach_dirty(&set, note_id, &d);
	ck_assert_uint_eq(d.n, 1);
	ck_assert_int_eq(d.v[0], 2);

	/* kept counts: two handles on 7, one on 2; 7 and 3 evicted */
	ck_assert_int_eq(cfs_efile_open(&set, f7), 0);
	ck_assert_int_eq(cfs_efile_open(&set, f7), 0);
	ck_assert_int_eq(cfs_efile_open(&set, f2), 0);
	int64_t v[] = {7, 3};
	cfs_epochs_evict(&set, v, 2);
	struct cfs_epochs_stat st;
	cfs_epochs_stat(&set, &st);
	ck_assert_uint_eq(st.open_handles, 3);
	ck_assert_uint_eq(st.draining_files, 2);
	ck_assert_uint_eq(st.retiring_files, 2); /* epoch 0 is current: both listed */
	ck_assert_uint_eq(st.retiring_bytes, 200);
	ck_assert_uint_eq(st.draining_unheld_bytes, 100); /* 3 has no handle */
	/* 7 read while evicted, then the next epoch: 3 goes, 7 stays held */
	e = false;
	cfs_efile_account(&set, f7, 0, 10, true, &e, cfs_epochs_current1(&set));
	int64_t b[] = {1, 2, 4, 5, 6, 8};
	ck_assert_int_eq(publish(1, b, 6), 0);
	cfs_epochs_stat(&set, &st);
	ck_assert_uint_eq(st.draining_files, 1);
	ck_assert_uint_eq(st.retiring_files, 0);
	ck_assert_uint_eq(st.open_handles, 3);
	cfs_efile_release(&set, f7);
	cfs_efile_release(&set, f7); /* its last handle: deleted, then freed below */
	cfs_epochs_stat(&set, &st);
	ck_assert_uint_eq(st.open_handles, 1);
	ck_assert_uint_eq(st.draining_files, 0);
	ck_assert_uint_eq(st.draining_unheld_bytes, 0);
	cfs_efile_forget(&set, f7, 1); /* leaves the set while on the dirty list */
	d.n = 0;
	cfs_epochs_foreach_dirty(&set, note_id, &d);
	ck_assert_uint_eq(d.n, 0);
	cfs_efile_release(&set, f2);
	cfs_efile_forget(&set, f2, 1);
	cfs_efile_forget(&set, f5, 1);
}
END_TEST

START_TEST(tree_of_nested_names)
{
	const char *names[] = {"a.bin", "a/b/c", "a/b/d", "a", "x/y", "a-z"};
	struct cfs_efile_in in[6];
	for (int i = 0; i < 6; i++) {
		in[i] = (struct cfs_efile_in){
		    .id = i + 1, .kind = CFS_KIND_RAW, .name = names[i], .bytes = 1, .records = 1};
	}
	ck_assert_int_eq(cfs_epochs_publish(&set, 0, in, 6, 0, NULL), 0);
	struct cfs_epoch *ep = cfs_epochs_lookup(&set, 0);
	ck_assert_ptr_nonnull(ep);
	/* top level: a (dir wins over the file "a"), a-z, a.bin, x */
	ck_assert_uint_eq(ep->root.nents, 4);
	ck_assert_str_eq(ep->root.ents[0].name, "a");
	ck_assert_ptr_nonnull(ep->root.ents[0].d);
	ck_assert_str_eq(ep->root.ents[1].name, "a-z");
	ck_assert_str_eq(ep->root.ents[2].name, "a.bin");
	ck_assert_str_eq(ep->root.ents[3].name, "x");
	struct cfs_dent a, b, c;
	ck_assert_int_eq(cfs_edir_lookup(&set, &ep->root, "a", &a), 0);
	ck_assert_ptr_nonnull(a.d);
	ck_assert_int_eq(cfs_edir_lookup(&set, a.d, "b", &b), 0);
	ck_assert_ptr_nonnull(b.d);
	ck_assert_ptr_eq(b.d->parent, a.d);
	ck_assert_int_eq(cfs_edir_lookup(&set, b.d, "d", &c), 0);
	ck_assert_ptr_nonnull(c.f);
	ck_assert_str_eq(c.f->name, "a/b/d");
	struct cfs_efile *dfile = c.f;
	ck_assert_int_eq(cfs_edir_lookup(&set, b.d, "e", &c), -ENOENT);
	/* directory lookups count on the epoch: it outlives the view while known */
	ck_assert_uint_eq(ep->nlookup, 3); /* cfs_epochs_lookup + a + b */
	cfs_epoch_forget(&set, ep, 1);	   /* the cfs_epochs_lookup() above */
	ck_assert_int_eq(publish(1, NULL, 0), 0);
	ck_assert_uint_eq(nlisted(), 1);
	ck_assert_int_eq(cfs_edir_lookup(&set, b.d, "c", &c), -ENOENT); /* left the view */
	cfs_epoch_forget(&set, ep, 2); /* a and b: the tree is freed now */
	cfs_efile_forget(&set, dfile, 1);
}
END_TEST

/* Current-listing figures from cfs_epochs_stat: files, bytes, records. */
static void current_is(uint64_t files, uint64_t bytes, uint64_t records)
{
	struct cfs_epochs_stat st;
	cfs_epochs_stat(&set, &st);
	ck_assert_uint_eq(st.current_files, files);
	ck_assert_uint_eq(st.current_bytes, bytes);
	ck_assert_uint_eq(st.current_records, records);
}

/* Names ep lists now, by cfs_epoch_shown_files in batches of 2, joined by ','. */
static void shown(struct cfs_epoch *ep, char *out, size_t len)
{
	struct cfs_efile *b[2];
	size_t pos = 0, n;
	out[0] = '\0';
	while ((n = cfs_epoch_shown_files(&set, ep, &pos, b, 2)) > 0)
		for (size_t i = 0; i < n; i++)
			snprintf(out + strlen(out), len - strlen(out), "%s%s", out[0] ? "," : "",
				 b[i]->name);
}

/*
 * retire = read (DESIGN "Epochs", invariant 3's exception): a victim read to
 * the end in the current epoch and closed leaves the listing, and the count
 * the stats read (current files/bytes/records) follows it.
 */
START_TEST(retired_file_leaves_the_current_count)
{
	cfs_epochs_set_retire_read(&set, true);
	int64_t a[] = {1, 2, 3};
	ck_assert_int_eq(publish(0, a, 3), 0);
	current_is(3, 300, 30);
	int64_t v[] = {1, 2};
	cfs_epochs_evict(&set, v, 2); /* victims of the boundary into epoch 1 */
	struct cfs_efile_in in[3] = {0};
	char names[3][32];
	for (int i = 0; i < 3; i++) {
		snprintf(names[i], sizeof(names[i]), "shard-%d.tfrecord", i + 1);
		in[i] = (struct cfs_efile_in){
		    .id = i + 1, .name = names[i], .bytes = 100, .records = 10, .retiring = i < 2};
	}
	ck_assert_int_eq(cfs_epochs_publish(&set, 1, in, 3, 0, NULL), 0);
	current_is(3, 300, 30); /* victims stay in the view until read */
	struct cfs_efile *f1 = lookup(1, 1), *f2 = lookup(1, 2);
	ck_assert_int_eq(cfs_efile_open(&set, f1), 0);
	ck_assert_int_eq(cfs_efile_open(&set, f2), 0);
	bool end = false;
	cfs_efile_account(&set, f1, 0, 100, true, &end,
			  cfs_epochs_current1(&set)); /* read to the end */
	ck_assert(end);
	end = false;
	cfs_efile_account(&set, f2, 0, 50, true, &end, cfs_epochs_current1(&set)); /* half */
	/* victims may retire (looked up with entry timeout 0), file 3 may not */
	ck_assert(cfs_efile_may_retire(&set, f1) && cfs_efile_may_retire(&set, f2));
	ck_assert(!cfs_efile_may_retire(&set, lookup(1, 3)));
	cfs_efile_forget(&set, lookup(1, 3), 1);
	cfs_efile_release(&set, f1);
	struct cfs_epoch *ep = cfs_epochs_lookup(&set, 1);
	ck_assert(!cfs_efile_may_retire(&set, f1)); /* retired: deleted */
	current_is(2, 200, 20);
	ck_assert_uint_eq(ngone(), 1);
	struct cfs_dent d;
	ck_assert_int_eq(cfs_edir_lookup(&set, &ep->root, "shard-1.tfrecord", &d), -ENOENT);
	char list[128];
	ck_assert_int_eq(cfs_epoch_hold(&set, ep), 0);
	shown(ep, list, sizeof(list));
	ck_assert_str_eq(list, "shard-2.tfrecord,shard-3.tfrecord");
	/* read in part: it stays; file 3 is no victim: it stays however read */
	cfs_efile_release(&set, f2);
	current_is(2, 200, 20);
	/* a read to the end that reaches the daemon after a boundary (a kernel
	 * readahead, a release of a handle the page cache served) counts in the
	 * epoch its handle was opened in: it retires nothing in this one */
	ck_assert_int_eq(cfs_efile_open(&set, f2), 0);
	end = false;
	cfs_efile_account(&set, f2, 0, 100, true, &end, cfs_epochs_current1(&set) - 1);
	cfs_efile_release(&set, f2);
	current_is(2, 200, 20);
	struct cfs_efile *f3 = lookup(1, 3);
	ck_assert_int_eq(cfs_efile_open(&set, f3), 0);
	end = false;
	cfs_efile_account(&set, f3, 0, 100, true, &end, cfs_epochs_current1(&set));
	cfs_efile_release(&set, f3);
	current_is(2, 200, 20);
	cfs_epoch_releasedir(&set, ep);
	cfs_epoch_forget(&set, ep, 1);
	/* the next epoch counts its own snapshot */
	int64_t b[] = {3};
	ck_assert_int_eq(publish(2, b, 1), 0);
	current_is(1, 100, 10);
	cfs_efile_forget(&set, f1, 1);
	cfs_efile_forget(&set, f2, 1);
	cfs_efile_forget(&set, f3, 1);
}
END_TEST

/*
 * A file hidden by a directory of the same name is in no listing: not in
 * the count, not in the index; a retired file in a subdirectory leaves its
 * directory.
 */
START_TEST(hidden_and_nested_files_in_listing_and_count)
{
	const char *names[] = {"a", "a/b/c", "a/b/d", "x"};
	struct cfs_efile_in in[4];
	for (int i = 0; i < 4; i++) {
		in[i] = (struct cfs_efile_in){.id = i + 1,
					      .kind = CFS_KIND_RAW,
					      .name = names[i],
					      .bytes = (uint64_t)(i + 1) * 10,
					      .records = 1};
	}
	cfs_epochs_set_retire_read(&set, true);
	ck_assert_int_eq(cfs_epochs_publish(&set, 0, in, 4, 0, NULL), 0);
	current_is(3, 20 + 30 + 40, 3); /* "a" (10 bytes) hidden by a/ */
	struct cfs_epoch *ep = cfs_epochs_lookup(&set, 0);
	ck_assert_uint_eq(ep->nhidden, 1);
	ck_assert_int_eq(cfs_epoch_hold(&set, ep), 0);
	char list[128];
	shown(ep, list, sizeof(list));
	ck_assert_str_eq(list, "a/b/c,a/b/d,x");
	cfs_epoch_releasedir(&set, ep);
	/* a/b/d a victim of the boundary into epoch 1, read there and closed */
	int64_t v[] = {3};
	cfs_epochs_evict(&set, v, 1);
	in[2].retiring = true;
	ck_assert_int_eq(cfs_epochs_publish(&set, 1, in, 4, 0, NULL), 0);
	cfs_epoch_forget(&set, ep, 1);
	ep = cfs_epochs_lookup(&set, 1);
	struct cfs_dent a, b, d;
	ck_assert_int_eq(cfs_edir_lookup(&set, &ep->root, "a", &a), 0);
	ck_assert_int_eq(cfs_edir_lookup(&set, a.d, "b", &b), 0);
	ck_assert_int_eq(cfs_edir_lookup(&set, b.d, "d", &d), 0);
	ck_assert_int_eq(cfs_efile_open(&set, d.f), 0);
	bool end = false;
	cfs_efile_account(&set, d.f, 0, 30, true, &end, cfs_epochs_current1(&set));
	ck_assert(cfs_efile_may_retire(&set, d.f));
	cfs_efile_release(&set, d.f);
	struct cfs_dent gone;
	ck_assert_int_eq(cfs_edir_lookup(&set, b.d, "d", &gone), -ENOENT);
	current_is(2, 20 + 40, 2);
	/* an epoch that left the view cannot be held */
	ck_assert_int_eq(publish(2, NULL, 0), 0);
	ck_assert_int_eq(cfs_epoch_hold(&set, ep), -ENOENT);
	current_is(0, 0, 0);
	cfs_epoch_forget(&set, ep, 3); /* lookup, a, b */
	cfs_efile_forget(&set, d.f, 1);
}
END_TEST

static Suite *epoch_suite(void)
{
	Suite *s = suite_create("fuse-epoch");
	struct {
		const char *name;
		const TTest *fn;
	} cases[] = {
	    {"snapshot_is_fixed_and_sorted", snapshot_is_fixed_and_sorted},
	    {"shared_file_across_epochs", shared_file_across_epochs},
	    {"old_epoch_leaves_when_unheld", old_epoch_leaves_when_unheld},
	    {"dir_handle_holds_old_epoch", dir_handle_holds_old_epoch},
	    {"evicted_open_file_deleted_on_last_release",
	     evicted_open_file_deleted_on_last_release},
	    {"evicted_unheld_file_deleted_at_next_epoch",
	     evicted_unheld_file_deleted_at_next_epoch},
	    {"reaper_deletes_what_publish_and_release_queue",
	     reaper_deletes_what_publish_and_release_queue},
	    {"read_accounting_and_all_read", read_accounting_and_all_read},
	    {"flush_visits_files_read_and_stats_are_kept",
	     flush_visits_files_read_and_stats_are_kept},
	    {"tree_of_nested_names", tree_of_nested_names},
	    {"retired_file_leaves_the_current_count", retired_file_leaves_the_current_count},
	    {"hidden_and_nested_files_in_listing_and_count",
	     hidden_and_nested_files_in_listing_and_count},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		TCase *tc = tcase_create(cases[i].name);
		tcase_add_checked_fixture(tc, setup, teardown);
		tcase_add_test(tc, cases[i].fn);
		suite_add_tcase(s, tc);
	}
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(epoch_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
