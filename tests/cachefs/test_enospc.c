/*
 * test_enospc.c - file-system failures under the cache, on a tiny tmpfs
 * (mount needs root; exits 77 otherwise):
 *   - a full disk, with a `limit` larger than the disk: writing must fail
 *     with -ENOSPC and a message, leave nothing in tmp/ or shards/, give
 *     back every reserved byte, and leave a catalog that reopens intact;
 *   - the same cache remounted read-only: opening fails with a message
 *     naming the cause, and nothing changes.
 */
#include "cfs_test.h"

#include "cachefs/shard_writer.h"
#include "cachefs/store.h"

#include <sys/mount.h>

static char dir[256];
static char err[1024];

START_TEST(full_disk_fails_cleanly)
{
	struct cfs_store_opts o = {.dir = dir, .limit = 64u << 20};
	struct cfs_store *s = NULL;
	struct cfs_shard_writer *w = NULL;
	struct cfs_budget_stat st;
	static char buf[64 << 10];
	int rc = 0, i;

	ck_assert_msg(cfs_store_open(&s, &o, err, sizeof(err)) == 0, "open: %s", err);
	ck_assert_int_eq(cfs_shard_writer_open(&w, s, 0, err, sizeof(err)), 0);
	memset(buf, 'q', sizeof(buf));
	uint32_t crc = cmn_crc32c(0, buf, sizeof(buf));
	for (i = 0; i < 64 && rc == 0; i++) { /* 4 MiB into a 2 MiB disk */
		ck_assert_int_eq(cfs_shard_writer_reserve(w, sizeof(buf) + 16, 0), 0);
		rc = cfs_shard_writer_append(w, buf, sizeof(buf), crc, 0, 0);
	}
	if (rc == 0) {
		rc = cfs_shard_writer_seal(w, NULL, err, sizeof(err));
		ck_assert_ptr_nonnull(strstr(err, "No space left"));
	} else {
		cfs_shard_writer_abort(w);
	}
	ck_assert_int_eq(rc, -ENOSPC);
	ck_assert_int_eq(cfs_test_count(dir, "tmp"), 0);
	ck_assert_int_eq(cfs_test_count(dir, "shards"), 0);
	cfs_budget_get(cfs_store_budget(s), &st);
	ck_assert_uint_eq(st.reserved + st.sealed + st.draining, 0);

	/* the space is back: a small shard seals */
	ck_assert_int_eq(cfs_shard_writer_open(&w, s, 0, err, sizeof(err)), 0);
	ck_assert_int_eq(cfs_shard_writer_reserve(w, 1016, 0), 0);
	ck_assert_int_eq(cfs_shard_writer_append(w, buf, 1000, cmn_crc32c(0, buf, 1000), 0, 0), 0);
	ck_assert_msg(cfs_shard_writer_seal(w, NULL, err, sizeof(err)) == 0, "seal: %s", err);
	cfs_store_close(s);

	ck_assert_msg(cfs_store_open(&s, &o, err, sizeof(err)) == 0, "reopen: %s", err);
	ck_assert_uint_eq(cfs_store_reconcile_report(s)->resident_files, 1);
	ck_assert_int_eq(cfs_catalog_integrity_check(cfs_store_catalog(s), err, sizeof(err)), 0);
	cfs_store_close(s);
}
END_TEST

START_TEST(read_only_filesystem)
{
	struct cfs_store_opts o = {.dir = dir, .limit = 64u << 20};
	struct cfs_store *s = NULL;

	ck_assert_msg(cfs_store_open(&s, &o, err, sizeof(err)) == 0, "open: %s", err);
	cfs_store_close(s);
	s = NULL;
	ck_assert_int_eq(mount("tmpfs", dir, "tmpfs", MS_REMOUNT | MS_RDONLY, NULL), 0);
	ck_assert_int_eq(cfs_store_open(&s, &o, err, sizeof(err)), -EROFS);
	ck_assert_ptr_null(s);
	ck_assert_ptr_nonnull(strstr(err, "Read-only file system"));
	ck_assert_int_eq(mount("tmpfs", dir, "tmpfs", MS_REMOUNT, "size=2m,mode=0755"), 0);
	ck_assert_msg(cfs_store_open(&s, &o, err, sizeof(err)) == 0, "reopen: %s", err);
	cfs_store_close(s);
}
END_TEST

int main(void)
{
	Suite *su = suite_create("cachefs");
	TCase *tc = tcase_create("full_disk_fails_cleanly");
	SRunner *sr;
	int failed;

	if (geteuid() != 0) {
		printf("SKIP: mounting a tiny tmpfs to fill the disk needs root\n");
		return 77;
	}
	snprintf(dir, sizeof(dir), "%s/rc-cfs-XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir)) {
		printf("cannot make a scratch directory: %s\n", strerror(errno));
		return 1;
	}
	if (mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV, "size=2m,mode=0755") != 0) {
		printf("SKIP: cannot mount a tmpfs on %s: %s\n", dir, strerror(errno));
		rmdir(dir);
		return 77;
	}
	tcase_add_test(tc, full_disk_fails_cleanly);
	suite_add_tcase(su, tc);
	tc = tcase_create("read_only_filesystem"); /* runs after: the cache exists */
	tcase_add_test(tc, read_only_filesystem);
	suite_add_tcase(su, tc);
	sr = srunner_create(su);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	umount2(dir, MNT_DETACH);
	rmdir(dir);
	return failed ? 1 : 0;
}
