/*
 * test_store.c - cachefs/store.c, shard_writer.c, reconcile.c: the cache
 * directory, its lock, sealing by invariant 2, eviction (invariants 3, 4),
 * start-up reconciliation from crafted crash states (invariant 6), and the
 * error cases of opening a cache directory.
 */
#include "cfs_test.h"

#include "cachefs/names.h"
#include "cachefs/shard_writer.h"
#include "cachefs/store.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[256];
static char err[1024];

static void setup(void)
{
	cfs_test_mkscratch(dir, sizeof(dir));
	err[0] = '\0';
}

static void teardown(void)
{
	cfs_test_rmrf(dir);
}

static struct cfs_store *open_store(uint64_t limit)
{
	struct cfs_store_opts o = {.dir = dir, .limit = limit};
	struct cfs_store *s = NULL;
	int rc = cfs_store_open(&s, &o, err, sizeof(err));
	ck_assert_msg(rc == 0, "store open: %d %s", rc, err);
	return s;
}

/* Seals a shard of n records of `size` bytes each; returns its id. */
static int64_t write_shard(struct cfs_store *s, uint32_t epoch, int n, size_t size)
{
	struct cfs_shard_writer *w = NULL;
	char *buf = malloc(size);
	int64_t id = -1;

	ck_assert_int_eq(cfs_shard_writer_open(&w, s, epoch, err, sizeof(err)), 0);
	for (int i = 0; i < n; i++) {
		memset(buf, 'a' + i % 26, size);
		ck_assert_int_eq(
		    cfs_shard_writer_reserve(w, cfs_shard_writer_record_bytes(size), 1000), 0);
		ck_assert_int_eq(cfs_shard_writer_append(w, buf, size, cmn_crc32c(0, buf, size), 3,
							 (uint64_t)i * size),
				 0);
	}
	ck_assert_msg(cfs_shard_writer_seal(w, &id, err, sizeof(err)) == 0, "seal: %s", err);
	free(buf);
	return id;
}

static void shard_name(int64_t id, char *buf, size_t len)
{
	snprintf(buf, len, "shards/%lld.tfrecord", (long long)id);
}

static uint64_t held(struct cfs_store *s)
{
	struct cfs_budget_stat st;
	cfs_budget_get(cfs_store_budget(s), &st);
	return st.reserved + st.sealed + st.draining;
}

START_TEST(layout_and_lock_pid)
{
	struct cfs_store *s = open_store(1 << 20);
	char path[512], buf[32] = "";
	FILE *f;

	ck_assert(cfs_test_exists(dir, "catalog.db"));
	ck_assert_int_eq(cfs_test_count(dir, "shards"), 0);
	ck_assert_int_eq(cfs_test_count(dir, "objects"), 0);
	ck_assert_int_eq(cfs_test_count(dir, "tmp"), 0);
	snprintf(path, sizeof(path), "%s/lock", dir);
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(fgets(buf, sizeof(buf), f));
	fclose(f);
	ck_assert_int_eq(atol(buf), (long)getpid());
	ck_assert_int_eq(cfs_store_file_path(s, CFS_KIND_TFRECORD, 12, false, path, sizeof(path)),
			 0);
	ck_assert_str_eq(path, "shards/12.tfrecord");
	ck_assert_int_eq(cfs_store_file_path(s, CFS_KIND_RAW, 7, false, path, sizeof(path)), 0);
	ck_assert_str_eq(path, "objects/7");
	ck_assert_int_eq(cfs_store_file_path(s, CFS_KIND_RAW, 7, true, path, 4), -ENAMETOOLONG);
	cfs_store_close(s);
}
END_TEST

START_TEST(lock_held_by_another_process)
{
	int to_parent[2], to_child[2];
	pid_t pid;
	char c;
	struct cfs_store *s = NULL;
	struct cfs_store_opts o = {.dir = dir, .limit = 1 << 20};
	char want[64];

	ck_assert_int_eq(pipe(to_parent), 0);
	ck_assert_int_eq(pipe(to_child), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct cfs_store *cs = NULL;
		char e[256];
		if (cfs_store_open(&cs, &o, e, sizeof(e)) != 0)
			_exit(1);
		if (write(to_parent[1], "r", 1) != 1 || read(to_child[0], &c, 1) != 1)
			_exit(2);
		cfs_store_close(cs);
		_exit(0);
	}
	close(to_parent[1]); /* a dead child then reads as EOF, not a hang */
	close(to_child[0]);
	ck_assert_int_eq(read(to_parent[0], &c, 1), 1);
	ck_assert_int_eq(cfs_store_open(&s, &o, err, sizeof(err)), -EWOULDBLOCK);
	ck_assert_ptr_null(s);
	snprintf(want, sizeof(want), "in use by pid %ld", (long)pid);
	ck_assert_msg(strstr(err, want) != NULL, "message '%s' lacks '%s'", err, want);
	ck_assert_ptr_nonnull(strstr(err, "another cache_dir"));
	ck_assert_int_eq(write(to_child[1], "x", 1), 1);
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_int_eq(WEXITSTATUS(status), 0);
	/* the holder is gone: the lock is free */
	s = open_store(1 << 20);
	cfs_store_close(s);
}
END_TEST

START_TEST(unwritable_directory)
{
	char sub[512];
	int p[2];
	pid_t pid;
	int status, rc;
	char msg[512] = "";
	ssize_t n;

	snprintf(sub, sizeof(sub), "%s/ro", dir);
	ck_assert_int_eq(chmod(dir, 0755), 0);
	ck_assert_int_eq(mkdir(sub, 0555), 0);
	ck_assert_int_eq(pipe(p), 0);
	/* in a child: as root, drop to nobody so that permissions apply */
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct cfs_store *s = NULL;
		char sub2[600], e[512];
		struct cfs_store_opts o = {.dir = sub2, .limit = 1 << 20};
		snprintf(sub2, sizeof(sub2), "%s/cache", sub);
		if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0))
			_exit(100);
		rc = cfs_store_open(&s, &o, e, sizeof(e));
		if (write(p[1], e, strlen(e) + 1) < 0)
			_exit(101);
		_exit(rc == -EACCES ? 0 : 1);
	}
	close(p[1]);
	n = read(p[0], msg, sizeof(msg) - 1);
	ck_assert_int_gt(n, 0);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "child status %d, message '%s'", status, msg);
	ck_assert_ptr_nonnull(strstr(msg, "Permission denied"));
	ck_assert_ptr_nonnull(strstr(msg, "cache directory"));
	close(p[0]);
}
END_TEST

START_TEST(cache_dir_is_a_file)
{
	struct cfs_store *s = NULL;
	char path[512];
	struct cfs_store_opts o = {.dir = path, .limit = 100};

	ck_assert_int_eq(cfs_test_write_file(dir, "plain", 10, 'x'), 0);
	snprintf(path, sizeof(path), "%s/plain", dir);
	ck_assert_int_eq(cfs_store_open(&s, &o, err, sizeof(err)), -ENOTDIR);
	ck_assert_ptr_nonnull(strstr(err, "plain"));
	o.dir = "";
	ck_assert_int_eq(cfs_store_open(&s, &o, err, sizeof(err)), -EINVAL);
}
END_TEST

START_TEST(corrupt_catalog_refused_nothing_deleted)
{
	struct cfs_store *s = NULL;
	struct cfs_store_opts o = {.dir = dir, .limit = 1 << 20};
	char name[64];

	s = open_store(1 << 20);
	int64_t id = write_shard(s, 0, 3, 100);
	cfs_store_close(s);
	ck_assert_int_eq(cfs_test_write_file(dir, "catalog.db", 4096, 0x5a), 0);
	ck_assert(!cfs_test_exists(dir, "catalog.db-wal")); /* checkpointed at close */
	ck_assert_int_eq(cfs_test_write_file(dir, "tmp/9.tfrecord", 10, 1), 0);
	s = NULL;
	ck_assert_int_eq(cfs_store_open(&s, &o, err, sizeof(err)), -EBADMSG);
	ck_assert_ptr_null(s);
	ck_assert_ptr_nonnull(strstr(err, "not a SQLite database"));
	/* nothing deleted: the shard, the catalog and even tmp/ are untouched */
	shard_name(id, name, sizeof(name));
	ck_assert(cfs_test_exists(dir, name));
	ck_assert_int_eq(cfs_test_size(dir, "catalog.db"), 4096);
	ck_assert(cfs_test_exists(dir, "tmp/9.tfrecord"));
}
END_TEST

START_TEST(newer_schema_refused)
{
	struct cfs_store *s = open_store(1 << 20);
	struct cfs_store_opts o = {.dir = dir, .limit = 1 << 20};
	char path[512];
	sqlite3 *db;

	cfs_store_close(s);
	snprintf(path, sizeof(path), "%s/catalog.db", dir);
	ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
	char newer[64];
	snprintf(newer, sizeof(newer), "PRAGMA user_version = %d", CFS_SCHEMA_VERSION + 1);
	ck_assert_int_eq(sqlite3_exec(db, newer, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	s = NULL;
	ck_assert_int_eq(cfs_store_open(&s, &o, err, sizeof(err)), -EPROTONOSUPPORT);
	ck_assert_ptr_nonnull(strstr(err, "newer"));
	/* the lock was released on failure: a fixed binary could open it */
	ck_assert_ptr_null(s);
}
END_TEST

START_TEST(seal_makes_visible_in_order)
{
	struct cfs_store *s = open_store(1 << 20);
	struct cfs_shard_writer *w = NULL;
	struct cfs_shard_info one;
	struct cfs_sample *smp;
	struct cfs_budget_stat st;
	char name[64], path[600], tmpname[64];
	size_t n;
	int64_t id;

	ck_assert_int_eq(cfs_shard_writer_open(&w, s, 2, err, sizeof(err)), 0);
	id = cfs_shard_writer_id(w);
	snprintf(tmpname, sizeof(tmpname), "tmp/%lld.tfrecord", (long long)id);
	shard_name(id, name, sizeof(name));
	ck_assert_int_eq(cfs_shard_writer_reserve(w, 1000, 100), 0);
	ck_assert_int_eq(cfs_shard_writer_append(w, "hello", 5, cmn_crc32c(0, "hello", 5), 9, 0),
			 0);
	ck_assert_int_eq(cfs_shard_writer_append(w, "world!", 6, cmn_crc32c(0, "world!", 6), 9, 21),
			 0);
	ck_assert_uint_eq(cfs_shard_writer_bytes(w), 5 + 6 + 32);
	ck_assert_uint_eq(cfs_shard_writer_room(w), 1000 - 43);
	/* invariant 2: while writing it is only in tmp/ and has no row */
	ck_assert(cfs_test_exists(dir, tmpname));
	ck_assert(!cfs_test_exists(dir, name));
	ck_assert_int_eq(cfs_catalog_shard_get(cfs_store_catalog(s), id, &one), -ENOENT);
	ck_assert_int_eq(cfs_shard_writer_seal(w, NULL, err, sizeof(err)), 0);
	ck_assert(!cfs_test_exists(dir, tmpname));
	ck_assert_int_eq(cfs_test_size(dir, name), 43);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	ck_assert_int_eq(cfs_test_tfrecord_records(path), 2);
	ck_assert_int_eq(cfs_catalog_shard_get(cfs_store_catalog(s), id, &one), 0);
	ck_assert_uint_eq(one.bytes, 43);
	ck_assert_uint_eq(one.records, 2);
	ck_assert_uint_eq(one.created_epoch, 2);
	ck_assert_int_eq(cfs_catalog_samples_of(cfs_store_catalog(s), id, &smp, &n), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(smp[1].offset, 21);
	ck_assert_uint_eq(smp[1].length, 6);
	ck_assert_uint_eq(smp[1].object_offset, 21);
	ck_assert_int_eq(smp[1].object_id, 9);
	free(smp);
	/* invariant 4: the unused reservation went back */
	cfs_budget_get(cfs_store_budget(s), &st);
	ck_assert_uint_eq(st.sealed, 43);
	ck_assert_uint_eq(st.reserved, 0);
	/* the mount's read path opens it by id */
	int fd = cfs_store_open_file(s, CFS_KIND_TFRECORD, id);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(cfs_store_open_file(s, CFS_KIND_TFRECORD, id + 100), -ENOENT);
	cfs_store_close(s);
}
END_TEST

START_TEST(append_needs_reservation)
{
	struct cfs_store *s = open_store(100);
	struct cfs_shard_writer *w = NULL;

	ck_assert_int_eq(cfs_shard_writer_open(&w, s, 0, err, sizeof(err)), 0);
	/* invariant 4: no byte is written without a reservation */
	ck_assert_int_eq(cfs_shard_writer_append(w, "x", 1, 0, 0, 0), -ENOBUFS);
	ck_assert_int_eq(cfs_shard_writer_try_reserve(w, 17), 0);
	ck_assert_int_eq(cfs_shard_writer_append(w, "xy", 2, 0, 0, 0), -ENOBUFS);
	ck_assert_uint_eq(cfs_shard_writer_bytes(w), 0);
	ck_assert_int_eq(cfs_shard_writer_append(w, "x", 1, cmn_crc32c(0, "x", 1), 0, 0), 0);
	ck_assert_int_eq(cfs_raw_writer_write(w, "x", 1), -EINVAL);
	ck_assert_int_eq(cfs_shard_writer_reserve(w, 101, 1000), -EFBIG);
	ck_assert_int_eq(cfs_shard_writer_try_reserve(w, 84), -EAGAIN);
	ck_assert_int_eq(cfs_shard_writer_try_reserve(w, 83), 0);
	ck_assert_uint_eq(held(s), 100);
	cfs_shard_writer_abort(w);
	ck_assert_uint_eq(held(s), 0);
	cfs_store_close(s);
}
END_TEST

START_TEST(abort_and_empty_discard)
{
	struct cfs_store *s = open_store(1 << 20);
	struct cfs_shard_writer *w = NULL;
	struct cfs_resident res;

	ck_assert_int_eq(cfs_shard_writer_open(&w, s, 0, err, sizeof(err)), 0);
	ck_assert_int_eq(cfs_shard_writer_reserve(w, 100, 0), 0);
	ck_assert_int_eq(cfs_shard_writer_append(w, "abc", 3, cmn_crc32c(0, "abc", 3), 0, 0), 0);
	ck_assert_int_eq(cfs_test_count(dir, "tmp"), 1);
	cfs_shard_writer_abort(w);
	ck_assert_int_eq(cfs_test_count(dir, "tmp"), 0);
	ck_assert_uint_eq(held(s), 0);

	ck_assert_int_eq(cfs_shard_writer_open(&w, s, 0, err, sizeof(err)), 0);
	ck_assert_int_eq(cfs_shard_writer_reserve(w, 100, 0), 0);
	ck_assert_int_eq(cfs_shard_writer_seal(w, NULL, err, sizeof(err)), -ENODATA);
	ck_assert_int_eq(cfs_test_count(dir, "tmp"), 0);
	ck_assert_int_eq(cfs_test_count(dir, "shards"), 0);
	ck_assert_uint_eq(held(s), 0);
	ck_assert_int_eq(cfs_catalog_resident(cfs_store_catalog(s), &res), 0);
	ck_assert_uint_eq(res.files, 0);
	cfs_shard_writer_abort(NULL);
	cfs_store_close(s);
}
END_TEST

static int64_t write_raw(struct cfs_store *s, const char *key, const char *data)
{
	struct cfs_shard_writer *w = NULL;
	int64_t id;
	size_t len = strlen(data);

	ck_assert_int_eq(cfs_raw_writer_open(&w, s, 1, 42, key, err, sizeof(err)), 0);
	ck_assert_int_eq(cfs_raw_writer_write(w, data, len), -ENOBUFS);
	ck_assert_int_eq(cfs_shard_writer_reserve(w, len, 100), 0);
	ck_assert_int_eq(cfs_raw_writer_write(w, data, len / 2), 0);
	ck_assert_int_eq(cfs_raw_writer_write(w, data + len / 2, len - len / 2), 0);
	ck_assert_int_eq(cfs_shard_writer_append(w, "x", 1, 0, 0, 0), -EINVAL);
	ck_assert_msg(cfs_shard_writer_seal(w, &id, err, sizeof(err)) == 0, "seal: %s", err);
	return id;
}

/*
 * Invariant 2 for a raw object: while it is written it is objects/<id>
 * without a row (invisible: nothing serves a file without one; tmp/ stays
 * empty), sealing commits its row, and an abort leaves nothing behind and
 * gives its reservation back.
 */
START_TEST(raw_object_without_row_until_sealed)
{
	struct cfs_store *s = open_store(1 << 20);
	struct cfs_shard_writer *w = NULL, *v = NULL;
	struct cfs_shard_info one;
	struct cfs_budget_stat st;
	char name[64];
	int64_t id;

	ck_assert_int_eq(cfs_raw_writer_open(&w, s, 1, 7, "a/key", err, sizeof(err)), 0);
	id = cfs_shard_writer_id(w);
	snprintf(name, sizeof(name), "objects/%lld", (long long)id);
	ck_assert_int_eq(cfs_shard_writer_reserve(w, 5, 100), 0);
	ck_assert_int_eq(cfs_raw_writer_write(w, "bytes", 5), 0);
	ck_assert_int_eq(cfs_test_count(dir, "tmp"), 0);
	ck_assert_int_eq(cfs_test_size(dir, name), 5);
	ck_assert_int_eq(cfs_catalog_shard_get(cfs_store_catalog(s), id, &one), -ENOENT);
	ck_assert_msg(cfs_shard_writer_seal(w, NULL, err, sizeof(err)) == 0, "seal: %s", err);
	ck_assert_int_eq(cfs_test_size(dir, name), 5);
	ck_assert_int_eq(cfs_test_count(dir, "tmp"), 0);
	ck_assert_int_eq(cfs_catalog_shard_get(cfs_store_catalog(s), id, &one), 0);
	ck_assert_uint_eq(one.bytes, 5);
	free(one.name);
	int fd = cfs_store_open_file(s, CFS_KIND_RAW, id);
	ck_assert_int_ge(fd, 0);
	char got[8] = {0};
	ck_assert_int_eq(pread(fd, got, sizeof(got), 0), 5);
	ck_assert_str_eq(got, "bytes");
	close(fd);

	ck_assert_int_eq(cfs_raw_writer_open(&v, s, 1, 8, "b/key", err, sizeof(err)), 0);
	ck_assert_int_eq(cfs_shard_writer_reserve(v, 5, 100), 0);
	ck_assert_int_eq(cfs_raw_writer_write(v, "other", 5), 0);
	cfs_shard_writer_abort(v);
	ck_assert_int_eq(cfs_test_count(dir, "tmp"), 0);
	ck_assert_int_eq(cfs_test_count(dir, "objects"), 1);
	cfs_budget_get(cfs_store_budget(s), &st);
	ck_assert_uint_eq(st.sealed, 5);
	ck_assert_uint_eq(st.reserved, 0);
	cfs_store_close(s);
}
END_TEST

/* Opens a raw writer of `key` holding `data` (reserved, written, not sealed). */
static struct cfs_shard_writer *raw_written(struct cfs_store *s, const char *key, const char *data)
{
	struct cfs_shard_writer *w = NULL;
	size_t len = strlen(data);
	ck_assert_int_eq(cfs_raw_writer_open(&w, s, 1, 42, key, err, sizeof(err)), 0);
	ck_assert_int_eq(cfs_shard_writer_reserve(w, len, 100), 0);
	ck_assert_int_eq(cfs_raw_writer_write(w, data, len), 0);
	return w;
}

/*
 * A group of files of two epochs adds its admissions once an epoch, each
 * epoch's files, bytes and records its own; the counters of a later group
 * add to them.
 */
START_TEST(raw_group_counts_admissions_by_epoch)
{
	struct cfs_store *s = open_store(1 << 20);
	const char *keys[4] = {"e1a", "e2a", "e1b", "e2b"}, *data[4] = {"1", "22", "333", "4444"};
	const uint32_t epochs[4] = {1, 2, 1, 2};
	struct cfs_shard_writer *ws[4];
	int rcs[4];
	for (int i = 0; i < 4; i++) {
		size_t len = strlen(data[i]);
		ck_assert_int_eq(
		    cfs_raw_writer_open(&ws[i], s, epochs[i], 42, keys[i], err, sizeof(err)), 0);
		ck_assert_int_eq(cfs_shard_writer_reserve(ws[i], len, 100), 0);
		ck_assert_int_eq(cfs_raw_writer_write(ws[i], data[i], len), 0);
	}
	ck_assert_msg(cfs_shard_writer_seal_group(ws, 4, rcs, err, sizeof(err)) == 0, "group: %s",
		      err);
	struct cfs_epoch_row e1 = cfs_test_epoch_row(s, 1), e2 = cfs_test_epoch_row(s, 2);
	ck_assert_uint_eq(e1.admitted_files, 2);
	ck_assert_uint_eq(e1.admitted_bytes, 4);
	ck_assert_uint_eq(e1.admitted_records, 2);
	ck_assert_uint_eq(e2.admitted_files, 2);
	ck_assert_uint_eq(e2.admitted_bytes, 6);
	ck_assert_uint_eq(e2.admitted_records, 2);
	write_raw(s, "late", "55555");
	e1 = cfs_test_epoch_row(s, 1);
	ck_assert_uint_eq(e1.admitted_files, 3);
	ck_assert_uint_eq(e1.admitted_bytes, 9);
	ck_assert_uint_eq(e1.admitted_records, 3);
	cfs_store_close(s);
}
END_TEST

/*
 * A group commit whose files' rows go in without a savepoint each: two
 * files of one group with the same key both commit, the second under its
 * id-suffixed name (its first row was refused whole, nothing of it left
 * behind), each with its one sample row; a group of one sealed later
 * still finds the name taken.
 */
START_TEST(raw_group_with_a_name_clash)
{
	struct cfs_store *s = open_store(1 << 20);
	struct cfs_shard_writer *ws[3] = {raw_written(s, "a", "one"), raw_written(s, "dup", "two"),
					  raw_written(s, "dup", "three")};
	int64_t ids[3] = {cfs_shard_writer_id(ws[0]), cfs_shard_writer_id(ws[1]),
			  cfs_shard_writer_id(ws[2])};
	int rcs[3] = {-1, -1, -1};
	struct cfs_shard_info one;
	struct cfs_sample *smp;
	size_t n;
	char want[64];
	ck_assert_msg(cfs_shard_writer_seal_group(ws, 3, rcs, err, sizeof(err)) == 0, "group: %s",
		      err);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(rcs[i], 0);
		ck_assert_ptr_null(ws[i]);
		ck_assert_int_eq(cfs_catalog_shard_get(cfs_store_catalog(s), ids[i], &one), 0);
		ck_assert_uint_eq(one.bytes, i == 0 ? 3 : i == 1 ? 3 : 5);
		if (i == 2) {
			ck_assert_int_eq(cfs_display_name("dup", ids[2], true, want, sizeof(want)),
					 0);
			ck_assert_str_eq(one.name, want);
		} else {
			ck_assert_str_eq(one.name, i == 0 ? "a" : "dup");
		}
		free(one.name);
		ck_assert_int_eq(cfs_catalog_samples_of(cfs_store_catalog(s), ids[i], &smp, &n), 0);
		ck_assert_uint_eq(n, 1);
		free(smp);
	}
	ck_assert_int_eq(cfs_test_count(dir, "objects"), 3);
	int64_t late = write_raw(s, "dup", "four");
	ck_assert_int_eq(cfs_catalog_shard_get(cfs_store_catalog(s), late, &one), 0);
	ck_assert_int_eq(cfs_display_name("dup", late, true, want, sizeof(want)), 0);
	ck_assert_str_eq(one.name, want);
	free(one.name);
	cfs_store_close(s);
}
END_TEST

/*
 * A raw object placed before its seal (cfs_raw_writer_place): in objects/
 * at once, without a row (invisible) until the seal commits one; nothing
 * more can be written to it; an abort removes it and gives its bytes
 * back; a process that dies between the two leaves a file without a row,
 * which the next start deletes (invariant 6).
 */
START_TEST(raw_object_placed_before_its_seal)
{
	struct cfs_store *s = open_store(1 << 20);
	struct cfs_shard_writer *w = raw_written(s, "placed", "bytes"), *v;
	struct cfs_shard_info one;
	struct cfs_budget_stat st;
	int64_t id = cfs_shard_writer_id(w);
	char name[64];
	snprintf(name, sizeof(name), "objects/%lld", (long long)id);
	ck_assert_msg(cfs_raw_writer_place(w, err, sizeof(err)) == 0, "place: %s", err);
	ck_assert_int_eq(cfs_test_size(dir, name), 5);
	ck_assert_int_eq(cfs_catalog_shard_get(cfs_store_catalog(s), id, &one), -ENOENT);
	ck_assert_int_eq(cfs_raw_writer_write(w, "x", 1), -EINVAL);
	ck_assert_int_eq(cfs_raw_writer_place(w, err, sizeof(err)), -EINVAL);
	ck_assert_msg(cfs_shard_writer_seal(w, NULL, err, sizeof(err)) == 0, "seal: %s", err);
	ck_assert_int_eq(cfs_catalog_shard_get(cfs_store_catalog(s), id, &one), 0);
	ck_assert_str_eq(one.name, "placed");
	free(one.name);
	ck_assert_int_eq(cfs_test_size(dir, name), 5);

	v = raw_written(s, "aborted", "other");
	ck_assert_int_eq(cfs_raw_writer_place(v, err, sizeof(err)), 0);
	ck_assert_int_eq(cfs_test_count(dir, "objects"), 2);
	cfs_shard_writer_abort(v);
	ck_assert_int_eq(cfs_test_count(dir, "objects"), 1);
	cfs_budget_get(cfs_store_budget(s), &st);
	ck_assert_uint_eq(st.sealed, 5);
	ck_assert_uint_eq(st.reserved, 0);
	cfs_store_close(s);

	pid_t pid = fork(); /* places an object and dies before its seal */
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct cfs_store *c = open_store(1 << 20);
		struct cfs_shard_writer *x = raw_written(c, "orphan", "lost");
		_exit(cfs_raw_writer_place(x, err, sizeof(err)) == 0 &&
			      cfs_test_count(dir, "objects") == 2
			  ? 0
			  : 1);
	}
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: %d", status);
	ck_assert_int_eq(cfs_test_count(dir, "objects"), 2);
	s = open_store(1 << 20);
	ck_assert_int_eq(cfs_test_count(dir, "objects"), 1);
	ck_assert_int_eq(cfs_test_size(dir, name), 5);
	cfs_budget_get(cfs_store_budget(s), &st);
	ck_assert_uint_eq(st.sealed, 5);
	cfs_store_close(s);
}
END_TEST

START_TEST(raw_objects_with_hostile_keys)
{
	struct cfs_store *s = open_store(1 << 20);
	struct cfs_shard_info one;
	struct cfs_sample *smp;
	size_t n;
	char name[64];
	int64_t a = write_raw(s, "../../etc/passwd", "root:x:0:0");
	int64_t b = write_raw(s, "/etc/passwd", "other");
	int64_t c = write_raw(s, "etc/passwd", "third");

	/* invariant 7: the files are objects/<id>, nothing else was created */
	snprintf(name, sizeof(name), "objects/%lld", (long long)a);
	ck_assert_int_eq(cfs_test_size(dir, name), 10);
	ck_assert_int_eq(cfs_test_count(dir, "objects"), 3);
	/* catalog.db, -wal, -shm, lock, ballast, shards, objects, tmp: no "etc" anywhere */
	ck_assert_int_eq(cfs_test_count(dir, ""), 8);
	ck_assert_int_eq(cfs_test_size(dir, "ballast"), (int64_t)CFS_BALLAST_BYTES);
	ck_assert_int_eq(cfs_store_ballast(s, false), 0); /* a full disk: given back */
	ck_assert_int_lt(cfs_test_size(dir, "ballast"), 0);
	ck_assert_int_eq(cfs_store_ballast(s, true), 0); /* room again: taken back */
	ck_assert_int_eq(cfs_test_size(dir, "ballast"), (int64_t)CFS_BALLAST_BYTES);
	ck_assert_int_eq(cfs_catalog_shard_get(cfs_store_catalog(s), a, &one), 0);
	ck_assert_str_eq(one.name, "%2E%2E/%2E%2E/etc/passwd");
	ck_assert_int_eq(one.kind, CFS_KIND_RAW);
	ck_assert_int_eq(one.object_id, 42);
	ck_assert_uint_eq(one.records, 1);
	free(one.name);
	/* a lossy name ("/etc" lost its '/') takes its id as suffix at once */
	ck_assert_int_eq(cfs_catalog_shard_get(cfs_store_catalog(s), b, &one), 0);
	snprintf(name, sizeof(name), "etc/passwd~%lld", (long long)b);
	ck_assert_str_eq(one.name, name);
	free(one.name);
	ck_assert_int_eq(cfs_catalog_shard_get(cfs_store_catalog(s), c, &one), 0);
	ck_assert_str_eq(one.name, "etc/passwd");
	free(one.name);
	/* the same key again: the clash gets a suffix */
	int64_t d = write_raw(s, "etc/passwd", "fourth");
	ck_assert_int_eq(cfs_catalog_shard_get(cfs_store_catalog(s), d, &one), 0);
	snprintf(name, sizeof(name), "etc/passwd~%lld", (long long)d);
	ck_assert_str_eq(one.name, name);
	free(one.name);
	ck_assert_int_eq(cfs_catalog_samples_of(cfs_store_catalog(s), a, &smp, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(smp[0].length, 10);
	ck_assert_uint_eq(smp[0].crc, cmn_crc32c(0, "root:x:0:0", 10));
	free(smp);
	cfs_store_close(s);
}
END_TEST

/*
 * Crafts each crash state of invariant 6 on disk and checks what reopening
 * leaves: tmp/ emptied, rows without files dropped, files without rows
 * deleted, a truncated shard dropped, an interrupted eviction finished.
 */
/* Entries of the catalog's `unsynced` list (files sealed since the last sync point). */
static int unsynced_count(void)
{
	char path[512];
	sqlite3 *db;
	sqlite3_stmt *st;
	int n = -1;
	snprintf(path, sizeof(path), "%s/catalog.db", dir);
	ck_assert_int_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	if (sqlite3_prepare_v2(db, "SELECT count(*) FROM unsynced", -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return n;
}

/* Flips one byte of file `name` of the cache, keeping its size. */
static void flip_byte(const char *name, off_t at)
{
	char path[600];
	unsigned char b;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &b, 1, at), 1);
	b ^= 0x20;
	ck_assert_int_eq(pwrite(fd, &b, 1, at), 1);
	close(fd);
}

/*
 * Sync points: a sealed file is listed in `unsynced` until one; a sync
 * point empties the list; a process that dies before the next one leaves
 * its files listed; the next start in the same boot trusts them (the page
 * cache has them), one after a crash of the system (the lock's boot id
 * differs) verifies them whole (a file whose bytes it lost is dropped);
 * then a sync point empties the list.  A file
 * changed after its sync point is not the start's business (the scrubber's).
 */
START_TEST(sync_points_and_the_check_after_a_crash)
{
	struct cfs_store *s = open_store(1 << 20);
	int64_t synced = write_shard(s, 0, 3, 100);
	ck_assert_int_eq(unsynced_count(), 1);
	ck_assert_msg(cfs_store_sync(s, err, sizeof(err)) == 0, "sync: %s", err);
	ck_assert_int_eq(unsynced_count(), 0);
	cfs_store_close(s);

	pid_t pid = fork(); /* a process that seals three files and dies before a sync point */
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct cfs_store *c = open_store(1 << 20);
		write_shard(c, 1, 3, 100);
		write_shard(c, 1, 3, 100);
		write_raw(c, "r", "raw bytes");
		_exit(unsynced_count() == 3 ? 0 : 1);
	}
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child: %d", status);
	ck_assert_int_eq(unsynced_count(), 3);

	/* the process died, the system did not: nothing to verify (the page cache holds it) */
	struct cfs_shard_info *arr;
	size_t n;
	char name[64];
	s = open_store(1 << 20);
	ck_assert_uint_eq(cfs_store_reconcile_report(s)->unsynced_same_boot, 3);
	ck_assert_uint_eq(cfs_store_reconcile_report(s)->unsynced_checked, 0);
	ck_assert_int_eq(
	    cfs_catalog_shards_list(cfs_store_catalog(s), 1u << CFS_SHARD_SEALED, &arr, &n), 0);
	ck_assert_uint_eq(n, 4);
	int64_t bad = arr[1].id, good = arr[2].id;
	cfs_shard_info_free(arr, n);
	cfs_store_close(s);
	ck_assert_int_eq(unsynced_count(), 0); /* synced */
	/*
	 * What a crash of the system could leave: the files listed as a crash
	 * would, one file's bytes changed (size kept), and the lock written in
	 * another boot: the open verifies them.
	 */
	char path[512];
	sqlite3 *db;
	snprintf(path, sizeof(path), "%s/catalog.db", dir);
	ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
	char sql[256];
	snprintf(sql, sizeof(sql), "INSERT INTO unsynced(file_id) VALUES (%lld), (%lld)",
		 (long long)bad, (long long)good);
	ck_assert_int_eq(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	shard_name(bad, name, sizeof(name));
	flip_byte(name, 40); /* inside the first record's payload */
	shard_name(synced, name, sizeof(name));
	flip_byte(name, 40); /* synced: not checked at start */
	snprintf(path, sizeof(path), "%s/lock", dir);
	FILE *lock = fopen(path, "w");
	ck_assert_ptr_nonnull(lock);
	fputs("1\nnot-this-boot\n", lock);
	fclose(lock);

	s = open_store(1 << 20);
	const struct cfs_reconcile_report *rep = cfs_store_reconcile_report(s);
	ck_assert_uint_eq(rep->unsynced_checked, 2);
	ck_assert_uint_eq(rep->unsynced_bad, 1);
	ck_assert_uint_eq(rep->unsynced_same_boot, 0);
	ck_assert_uint_eq(rep->resident_files, 3);
	ck_assert_int_eq(
	    cfs_catalog_shards_list(cfs_store_catalog(s), 1u << CFS_SHARD_SEALED, &arr, &n), 0);
	ck_assert_uint_eq(n, 3);
	for (size_t i = 0; i < n; i++)
		ck_assert_int_ne(arr[i].id, bad);
	cfs_shard_info_free(arr, n);
	shard_name(bad, name, sizeof(name));
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	ck_assert_int_eq(access(path, F_OK), -1); /* the file went with its row */
	cfs_store_close(s);
	ck_assert_int_eq(unsynced_count(), 0);
}
END_TEST

/*
 * A sync point makes up to CFS_SYNC_FILES_MAX files durable by an fsync of
 * each, more by one syncfs(); either way the `unsynced` list is emptied.
 * The store's own sync points wait an hour here: only the test's run.
 */
START_TEST(sync_point_of_many_files_by_syncfs)
{
	struct cfs_store_opts o = {.dir = dir, .limit = 1 << 20, .sync_period_ms = 3600000};
	struct cfs_store *s = NULL;
	uint64_t by_fsyncs, by_syncfs;
	char key[32];
	ck_assert_msg(cfs_store_open(&s, &o, err, sizeof(err)) == 0, "store open: %s", err);
	for (int i = 0; i < CFS_SYNC_FILES_MAX; i++) {
		snprintf(key, sizeof(key), "few/%d", i);
		write_raw(s, key, "raw bytes");
	}
	ck_assert_int_eq(unsynced_count(), CFS_SYNC_FILES_MAX);
	ck_assert_msg(cfs_store_sync(s, err, sizeof(err)) == 0, "sync: %s", err);
	ck_assert_int_eq(unsynced_count(), 0);
	cfs_store_sync_ways(s, &by_fsyncs, &by_syncfs);
	ck_assert_uint_eq(by_fsyncs, 1);
	ck_assert_uint_eq(by_syncfs, 0);
	for (int i = 0; i <= CFS_SYNC_FILES_MAX; i++) {
		snprintf(key, sizeof(key), "many/%d", i);
		write_raw(s, key, "raw bytes");
	}
	ck_assert_int_eq(unsynced_count(), CFS_SYNC_FILES_MAX + 1);
	ck_assert_msg(cfs_store_sync(s, err, sizeof(err)) == 0, "sync: %s", err);
	ck_assert_int_eq(unsynced_count(), 0);
	cfs_store_sync_ways(s, &by_fsyncs, &by_syncfs);
	ck_assert_uint_eq(by_fsyncs, 1);
	ck_assert_uint_eq(by_syncfs, 1);
	cfs_store_close(s);
}
END_TEST

START_TEST(reconcile_crafted_crash_states)
{
	struct cfs_store *s = open_store(1 << 20);
	int64_t a = write_shard(s, 0, 3, 100); /* its file will vanish */
	int64_t b = write_shard(s, 0, 3, 100); /* will be truncated */
	int64_t c = write_shard(s, 0, 3, 100); /* EVICTING at the crash */
	int64_t d = write_shard(s, 0, 5, 200); /* intact */
	int64_t r = write_raw(s, "k", "raw bytes");
	const struct cfs_reconcile_report *rep;
	struct cfs_shard_info *arr, one;
	struct cfs_budget_stat st;
	char name[64], path[600], e2[256];
	size_t n;

	ck_assert_int_eq(cfs_catalog_shards_evict(cfs_store_catalog(s), &c, 1, 0), 0);
	cfs_store_close(s);

	ck_assert_int_eq(cfs_test_write_file(dir, "tmp/900.tfrecord", 77, 1), 0);
	ck_assert_int_eq(cfs_test_write_file(dir, "tmp/901", 5, 1), 0);
	ck_assert_int_eq(cfs_test_write_file(dir, "shards/500.tfrecord", 116, 2), 0);
	ck_assert_int_eq(cfs_test_write_file(dir, "objects/501", 3, 2), 0);
	ck_assert_int_eq(cfs_test_write_file(dir, "shards/notes.txt", 3, 2), 0);
	shard_name(a, name, sizeof(name));
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	ck_assert_int_eq(unlink(path), 0);
	shard_name(b, name, sizeof(name));
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	ck_assert_int_eq(truncate(path, 300), 0);

	s = open_store(1 << 20);
	rep = cfs_store_reconcile_report(s);
	ck_assert_uint_eq(rep->tmp_removed, 2);
	ck_assert_uint_eq(rep->rows_dropped, 1);
	ck_assert_uint_eq(rep->files_removed, 2);
	ck_assert_uint_eq(rep->size_mismatches, 1);
	ck_assert_uint_eq(rep->evictions_finished, 1);
	ck_assert_uint_eq(rep->stray_entries, 1);
	ck_assert_uint_eq(rep->resident_files, 2);
	ck_assert_uint_eq(rep->resident_bytes, 5 * 216 + 9);
	ck_assert_int_eq(cfs_test_count(dir, "tmp"), 0);
	ck_assert_int_eq(cfs_test_count(dir, "shards"), 1);
	ck_assert_int_eq(cfs_test_count(dir, "objects"), 1);
	shard_name(d, name, sizeof(name));
	ck_assert(cfs_test_exists(dir, name));

	ck_assert_int_eq(cfs_catalog_shards_list(cfs_store_catalog(s),
						 1u << CFS_SHARD_SEALED | 1u << CFS_SHARD_EVICTING,
						 &arr, &n),
			 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_int_eq(arr[0].id, d);
	ck_assert_int_eq(arr[1].id, r);
	cfs_shard_info_free(arr, n);
	ck_assert_int_eq(cfs_catalog_shard_get(cfs_store_catalog(s), a, &one), -ENOENT);
	ck_assert_int_eq(cfs_catalog_shard_get(cfs_store_catalog(s), b, &one), -ENOENT);
	/* the EVICTING one is GONE: its row deleted */
	ck_assert_int_eq(cfs_catalog_shard_get(cfs_store_catalog(s), c, &one), -ENOENT);
	/* invariant 4: the budget was rebuilt from the survivors */
	cfs_budget_get(cfs_store_budget(s), &st);
	ck_assert_uint_eq(st.sealed, 5 * 216 + 9);
	/* invariant 1: an id seen on disk is never handed out again */
	ck_assert_int_gt(cfs_catalog_alloc_id(cfs_store_catalog(s)), 501);
	ck_assert_int_eq(cfs_catalog_integrity_check(cfs_store_catalog(s), e2, sizeof(e2)), 0);
	cfs_store_close(s);

	/* a second reopen finds nothing left to repair */
	s = open_store(1 << 20);
	rep = cfs_store_reconcile_report(s);
	ck_assert_uint_eq(rep->tmp_removed + rep->rows_dropped + rep->files_removed +
			      rep->size_mismatches + rep->evictions_finished + rep->stray_entries,
			  0);
	ck_assert_uint_eq(rep->resident_files, 2);
	cfs_store_close(s);
}
END_TEST

/*
 * A crash between a victim's unlink and its GONE commit (the `evict` crash
 * point) leaves an EVICTING row without a file: reconciliation makes it
 * GONE, which deletes the row from catalog.db, and its id - the highest
 * ever - is never handed out again (invariant 1), at that open nor at the
 * next, when neither a row nor a file names it any more (the catalog's
 * id mark does).  The resident totals count the survivor only.
 */
START_TEST(reconcile_gone_row_deleted_id_kept)
{
	struct cfs_store *s = open_store(1 << 20);
	int64_t a = write_shard(s, 0, 3, 100);
	int64_t b = write_shard(s, 0, 2, 100); /* the highest id */
	struct cfs_resident res;
	struct cfs_shard_info one;
	char name[64], path[600];

	ck_assert_int_gt(b, a);
	ck_assert_int_eq(cfs_catalog_shards_evict(cfs_store_catalog(s), &b, 1, 1), 0);
	cfs_store_close(s);
	shard_name(b, name, sizeof(name));
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	ck_assert_int_eq(unlink(path), 0); /* unlinked, GONE not committed */

	for (int open = 0; open < 2; open++) {
		s = open_store(1 << 20);
		ck_assert_uint_eq(cfs_store_reconcile_report(s)->evictions_finished, open == 0);
		ck_assert_int_eq(cfs_catalog_shard_get(cfs_store_catalog(s), b, &one), -ENOENT);
		ck_assert_int_eq(cfs_catalog_resident(cfs_store_catalog(s), &res), 0);
		ck_assert_uint_eq(res.files, 1);
		ck_assert_uint_eq(res.records, 3);
		int64_t next = write_shard(s, 0, 1, 10);
		ck_assert_int_gt(next, b);
		/* the new file goes again: the id mark is what remembers its id too */
		struct cfs_evict_item it = {next, CFS_KIND_TFRECORD, 26, false};
		ck_assert_int_eq(cfs_test_evict(s, &it, 1, 1), 0);
		ck_assert_int_eq(cfs_store_reap(s, &it, 1), 0);
		ck_assert_uint_eq(held(s), 3 * 116);
		b = next;
		cfs_store_close(s);
	}
	sqlite3 *db;
	sqlite3_stmt *st;
	char db_path[600];
	snprintf(db_path, sizeof(db_path), "%s/catalog.db", dir);
	ck_assert_int_eq(sqlite3_open(db_path, &db), SQLITE_OK);
	ck_assert_int_eq(
	    sqlite3_prepare_v2(db, "SELECT count(*), max(id) FROM shards", -1, &st, NULL),
	    SQLITE_OK);
	ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
	ck_assert_int_eq(sqlite3_column_int64(st, 0), 1); /* a alone */
	ck_assert_int_eq(sqlite3_column_int64(st, 1), a);
	sqlite3_finalize(st);
	sqlite3_close(db);
}
END_TEST

START_TEST(evict_closed_now_open_on_release)
{
	struct cfs_store *s = open_store(1 << 20);
	int64_t a = write_shard(s, 0, 2, 100), b = write_shard(s, 0, 2, 100);
	struct cfs_evict_item items[2] = {
	    {a, CFS_KIND_TFRECORD, 232, false},
	    {b, CFS_KIND_TFRECORD, 232, true},
	};
	struct cfs_budget_stat st;
	struct cfs_shard_info one;
	char name[64];
	int fd = cfs_store_open_file(s, CFS_KIND_TFRECORD, b);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(cfs_test_evict(s, items, 2, 1), 0);
	/* evict deletes nothing: both are EVICTING and draining */
	shard_name(a, name, sizeof(name));
	ck_assert(cfs_test_exists(dir, name));
	cfs_budget_get(cfs_store_budget(s), &st);
	ck_assert_uint_eq(st.draining, 2 * 232);
	ck_assert_int_eq(cfs_catalog_shard_get(cfs_store_catalog(s), a, &one), 0);
	ck_assert_int_eq(one.state, CFS_SHARD_EVICTING);
	/* the one without a handle is reaped now */
	ck_assert_int_eq(cfs_store_reap(s, items, 1), 0);
	ck_assert(!cfs_test_exists(dir, name));
	/* invariant 3: the open one stays until its last release ... */
	shard_name(b, name, sizeof(name));
	ck_assert(cfs_test_exists(dir, name));
	cfs_budget_get(cfs_store_budget(s), &st);
	ck_assert_uint_eq(st.sealed, 0);
	ck_assert_uint_eq(st.draining, 232); /* ... and counts against the limit (4) */
	ck_assert_int_eq(cfs_catalog_shard_get(cfs_store_catalog(s), a, &one), -ENOENT); /* GONE */
	ck_assert_int_eq(cfs_catalog_shard_get(cfs_store_catalog(s), b, &one), 0);
	ck_assert_int_eq(one.state, CFS_SHARD_EVICTING);
	char buf[8];
	ck_assert_int_eq(pread(fd, buf, 8, 0), 8);
	close(fd);
	ck_assert_int_eq(cfs_store_release_evicted(s, CFS_KIND_TFRECORD, b, 232), 0);
	ck_assert(!cfs_test_exists(dir, name));
	ck_assert_uint_eq(held(s), 0);
	ck_assert_int_eq(cfs_catalog_shard_get(cfs_store_catalog(s), b, &one), -ENOENT);
	/* evicting a GONE file is refused and changes nothing */
	ck_assert_int_eq(cfs_test_evict(s, items, 1, 1), -ENOENT);
	cfs_store_close(s);
}
END_TEST

struct blocked {
	struct cfs_shard_writer *w;
	int rc;
};

static void *reserve_thread(void *arg)
{
	struct blocked *b = arg;
	b->rc = cfs_shard_writer_reserve(b->w, 300, 60000);
	return NULL;
}

START_TEST(writer_waits_for_eviction)
{
	struct cfs_store *s = open_store(500);
	int64_t a = write_shard(s, 0, 2, 100); /* 232 bytes */
	struct cfs_evict_item it = {a, CFS_KIND_TFRECORD, 232, false};
	struct blocked b = {NULL, 1};
	struct cfs_budget_stat st;
	pthread_t t;

	ck_assert_int_eq(cfs_shard_writer_open(&b.w, s, 0, err, sizeof(err)), 0);
	pthread_create(&t, NULL, reserve_thread, &b);
	for (int i = 0; i < 6000; i++) {
		cfs_budget_get(cfs_store_budget(s), &st);
		if (st.waiting_limit)
			break;
		usleep(1000);
	}
	ck_assert_uint_eq(st.waiting_limit, 1);
	ck_assert_int_eq(cfs_test_evict(s, &it, 1, 1), 0);
	ck_assert_int_eq(cfs_store_reap(s, &it, 1), 0); /* the room comes back here */
	pthread_join(t, NULL);
	ck_assert_int_eq(b.rc, 0);
	ck_assert_uint_eq(cfs_shard_writer_room(b.w), 300);
	cfs_shard_writer_abort(b.w);
	cfs_store_close(s);
}
END_TEST

/*
 * One transaction per epoch boundary, as the daemon runs it: begin, evict,
 * record the new epoch, commit - or roll the catalog back as a whole.
 */
START_TEST(evict_inside_boundary_transaction)
{
	struct cfs_store *s = open_store(1 << 20);
	struct cfs_catalog *c = cfs_store_catalog(s);
	int64_t a = write_shard(s, 0, 2, 10), b = write_shard(s, 0, 2, 10);
	struct cfs_evict_item it = {a, CFS_KIND_TFRECORD, 52, true};
	struct cfs_epoch_row row = {.number = 1, .limit = 1 << 20, .policy = "fifo"};
	struct cfs_shard_info one;
	struct cfs_epoch_row *ep;
	size_t n;
	uint32_t cur;

	ck_assert_int_eq(cfs_catalog_begin(c), 0);
	ck_assert_int_eq(cfs_test_evict(s, &it, 1, 1), 0);
	ck_assert_int_eq(cfs_catalog_epoch_begin(c, &row), 0);
	cfs_catalog_rollback(c);
	ck_assert_int_eq(cfs_catalog_shard_get(c, a, &one), 0);
	ck_assert_int_eq(one.state, CFS_SHARD_SEALED);
	ck_assert_int_eq(cfs_catalog_current_epoch(c, &cur), -ENOENT);
	/* the budget moved with the (open) file; give it back as a retry would */
	cfs_budget_draining_removed(cfs_store_budget(s), 52);
	cfs_budget_add_sealed(cfs_store_budget(s), 52);

	it.id = b;
	ck_assert_int_eq(cfs_catalog_begin(c), 0);
	ck_assert_int_eq(cfs_test_evict(s, &it, 1, 1), 0);
	ck_assert_int_eq(cfs_catalog_epoch_begin(c, &row), 0);
	ck_assert_int_eq(cfs_catalog_commit(c), 0);
	ck_assert_int_eq(cfs_catalog_shard_get(c, b, &one), 0);
	ck_assert_int_eq(one.state, CFS_SHARD_EVICTING);
	ck_assert_int_eq(cfs_catalog_current_epoch(c, &cur), 0);
	ck_assert_uint_eq(cur, 1);
	ck_assert_int_eq(cfs_catalog_epochs_list(c, &ep, &n), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(ep[1].evicted_records, 2);
	ck_assert_str_eq(ep[1].policy, "fifo");
	free(ep);
	cfs_store_close(s);
}
END_TEST

START_TEST(foreign_directory_refused)
{
	struct cfs_store *s = NULL;
	struct cfs_store_opts o = {.dir = dir, .limit = 100};
	char sub[512];

	/* someone's directory, with a tmp/ of their own: nothing may be touched */
	snprintf(sub, sizeof(sub), "%s/tmp", dir);
	ck_assert_int_eq(mkdir(sub, 0755), 0);
	ck_assert_int_eq(cfs_test_write_file(dir, "tmp/precious", 5, 'p'), 0);
	ck_assert_int_eq(cfs_test_write_file(dir, "thesis.tex", 5, 't'), 0);
	ck_assert_int_eq(cfs_store_open(&s, &o, err, sizeof(err)), -ENOTEMPTY);
	ck_assert_ptr_nonnull(strstr(err, "thesis.tex"));
	ck_assert_ptr_nonnull(strstr(err, "not a rollcache cache directory"));
	ck_assert(cfs_test_exists(dir, "tmp/precious"));
	ck_assert(!cfs_test_exists(dir, "lock"));
	ck_assert(!cfs_test_exists(dir, "catalog.db"));
	/* the names a first open leaves before its catalog exists are accepted */
	ck_assert_int_eq(unlink(strcat(strcpy(sub, dir), "/thesis.tex")), 0);
	ck_assert_int_eq(cfs_test_write_file(dir, "lock", 3, 'l'), 0);
	s = open_store(100);
	ck_assert(!cfs_test_exists(dir, "tmp/precious")); /* tmp/ is the cache's now */
	cfs_store_close(s);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cachefs");
	SRunner *sr;
	int failed;
	struct {
		const char *name;
		const TTest *fn;
	} cases[] = {
	    {"layout_and_lock_pid", layout_and_lock_pid},
	    {"lock_held_by_another_process", lock_held_by_another_process},
	    {"unwritable_directory", unwritable_directory},
	    {"cache_dir_is_a_file", cache_dir_is_a_file},
	    {"foreign_directory_refused", foreign_directory_refused},
	    {"corrupt_catalog_refused_nothing_deleted", corrupt_catalog_refused_nothing_deleted},
	    {"newer_schema_refused", newer_schema_refused},
	    {"seal_makes_visible_in_order", seal_makes_visible_in_order},
	    {"append_needs_reservation", append_needs_reservation},
	    {"abort_and_empty_discard", abort_and_empty_discard},
	    {"raw_object_without_row_until_sealed", raw_object_without_row_until_sealed},
	    {"raw_objects_with_hostile_keys", raw_objects_with_hostile_keys},
	    {"raw_group_with_a_name_clash", raw_group_with_a_name_clash},
	    {"raw_group_counts_admissions_by_epoch", raw_group_counts_admissions_by_epoch},
	    {"raw_object_placed_before_its_seal", raw_object_placed_before_its_seal},
	    {"reconcile_crafted_crash_states", reconcile_crafted_crash_states},
	    {"sync_points_and_the_check_after_a_crash", sync_points_and_the_check_after_a_crash},
	    {"sync_point_of_many_files_by_syncfs", sync_point_of_many_files_by_syncfs},
	    {"reconcile_gone_row_deleted_id_kept", reconcile_gone_row_deleted_id_kept},
	    {"evict_closed_now_open_on_release", evict_closed_now_open_on_release},
	    {"writer_waits_for_eviction", writer_waits_for_eviction},
	    {"evict_inside_boundary_transaction", evict_inside_boundary_transaction},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		TCase *tc = tcase_create(cases[i].name);
		tcase_add_checked_fixture(tc, setup, teardown);
		tcase_add_test(tc, cases[i].fn);
		suite_add_tcase(s, tc);
	}
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
