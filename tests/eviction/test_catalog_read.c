/*
 * test_catalog_read.c - cfs_catalog_read_begin/read_end (cachefs/catalog.c),
 * the read snapshot `rollcache report` takes beside a live daemon.  Kept
 * here, with the report's other tests, because tests/cachefs is the catalog
 * engineer's.
 *
 * One TCase per behaviour: a snapshot on a read-only handle does not see a
 * commit made meanwhile on a writing handle (and does not block it), and
 * sees it after read_end; nesting and transactions inside a snapshot are
 * refused; read_end without a snapshot is a no-op.
 */
#include "cachefs/catalog.h"

#include <check.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[256], path[300], err[512];
static struct cfs_catalog *w, *r; /* writer, read-only reader */

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb;
	(void)flag;
	(void)f;
	remove(p);
	return 0;
}

static void insert(int64_t id, uint64_t bytes, uint32_t epoch)
{
	struct cfs_sample smp = {.offset = 0, .length = 4, .crc = 1};
	struct cfs_shard_new sh = {
	    .id = id, .kind = CFS_KIND_TFRECORD, .bytes = bytes, .created_epoch = epoch};
	cfs_catalog_note_id(w, id);
	ck_assert_int_eq(cfs_catalog_shard_insert(w, &sh, &smp, 1), 0);
}

static void setup(void)
{
	const char *t = getenv("TMPDIR");
	snprintf(dir, sizeof(dir), "%s/rc-evc-cat-XXXXXX", t && *t ? t : "/tmp");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/catalog.db", dir);
	ck_assert_int_eq(cfs_catalog_open(&w, path, 0, err, sizeof(err)), 0);
	insert(1, 100, 0);
	ck_assert_int_eq(cfs_catalog_open(&r, path, CFS_CATALOG_READONLY, err, sizeof(err)), 0);
}

static void teardown(void)
{
	cfs_catalog_close(r);
	cfs_catalog_close(w);
	r = w = NULL;
	nftw(dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

START_TEST(snapshot_isolates_a_concurrent_commit)
{
	struct cfs_resident res;
	struct cfs_epoch_row *rows = NULL;
	size_t n = 0;

	ck_assert_int_eq(cfs_catalog_read_begin(r), 0);
	ck_assert_int_eq(cfs_catalog_resident(r, &res), 0);
	ck_assert_uint_eq(res.files, 1);
	/* the writer commits meanwhile: not blocked by the reader (WAL) */
	insert(2, 50, 1);
	ck_assert_int_eq(cfs_catalog_resident(r, &res), 0);
	ck_assert_uint_eq(res.files, 1);
	ck_assert_uint_eq(res.bytes, 100);
	ck_assert_int_eq(cfs_catalog_epochs_list(r, &rows, &n), 0);
	ck_assert_uint_eq(n, 1); /* epoch 1's row came with the insert: not seen */
	free(rows);
	cfs_catalog_read_end(r);

	ck_assert_int_eq(cfs_catalog_resident(r, &res), 0);
	ck_assert_uint_eq(res.files, 2);
	ck_assert_uint_eq(res.bytes, 150);
}
END_TEST

START_TEST(nesting_refused)
{
	ck_assert_int_eq(cfs_catalog_read_begin(r), 0);
	ck_assert_int_eq(cfs_catalog_read_begin(r), -EINVAL);
	ck_assert_int_eq(cfs_catalog_begin(r), -EINVAL);
	ck_assert_int_eq(cfs_catalog_commit(r), -EINVAL); /* not a write transaction */
	cfs_catalog_read_end(r);
	/* the handle works normally afterwards */
	struct cfs_resident res;
	ck_assert_int_eq(cfs_catalog_resident(r, &res), 0);
	ck_assert_uint_eq(res.files, 1);
	/* and a writer's own snapshot ends cleanly too */
	ck_assert_int_eq(cfs_catalog_read_begin(w), 0);
	cfs_catalog_read_end(w);
	ck_assert_int_eq(cfs_catalog_begin(w), 0);
	ck_assert_int_eq(cfs_catalog_commit(w), 0);
}
END_TEST

START_TEST(end_without_begin_is_a_noop)
{
	cfs_catalog_read_end(r);
	cfs_catalog_read_end(r);
	ck_assert_int_eq(cfs_catalog_read_begin(r), 0);
	cfs_catalog_read_end(r);
	insert(3, 10, 0);
	struct cfs_resident res;
	ck_assert_int_eq(cfs_catalog_resident(r, &res), 0);
	ck_assert_uint_eq(res.files, 2);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("eviction-catalog-read");
	const struct {
		const char *name;
		const TTest *fn;
	} cases[] = {
	    {"snapshot_isolates_a_concurrent_commit", snapshot_isolates_a_concurrent_commit},
	    {"nesting_refused", nesting_refused},
	    {"end_without_begin_is_a_noop", end_without_begin_is_a_noop},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		TCase *tc = tcase_create(cases[i].name);
		tcase_add_checked_fixture(tc, setup, teardown);
		tcase_add_test(tc, cases[i].fn);
		suite_add_tcase(s, tc);
	}
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
