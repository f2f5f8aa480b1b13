/*
 * test_catalog.c - the catalog (cachefs/catalog*.c): schema and
 * migrations, refusals of foreign or newer files, files/samples, eviction
 * states, statistics and served records, object listings, epochs, the
 * sampling plan's rows, lists longer than the row reader's first block,
 * and (builds without NDEBUG, forking runner) that the debug checks of C1
 * and C3 abort on a violation.
 */
#include "cfs_test.h"

#include "cachefs/catalog.h"

#include <signal.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static char dir[256];
static char dbpath[512];
static char err[512];

static void setup(void)
{
	cfs_test_mkscratch(dir, sizeof(dir));
	snprintf(dbpath, sizeof(dbpath), "%s/catalog.db", dir);
	err[0] = '\0';
}

static void teardown(void)
{
	cfs_test_rmrf(dir);
}

static struct cfs_catalog *open_rw(void)
{
	struct cfs_catalog *c = NULL;
	int rc = cfs_catalog_open(&c, dbpath, 0, err, sizeof(err));
	ck_assert_msg(rc == 0, "open: %d %s", rc, err);
	return c;
}

/* Runs SQL on the file with plain sqlite3 (the test's own oracle). */
static void raw_sql(const char *sql)
{
	sqlite3 *db;
	ck_assert_int_eq(sqlite3_open(dbpath, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
}

static long long raw_int(const char *sql)
{
	sqlite3 *db;
	sqlite3_stmt *st;
	long long v = -1;
	ck_assert_int_eq(sqlite3_open(dbpath, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
	if (sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return v;
}

static int64_t add_shard(struct cfs_catalog *c, uint32_t epoch, size_t nrec, uint64_t recsize)
{
	struct cfs_sample *s = calloc(nrec ? nrec : 1, sizeof(*s));
	struct cfs_shard_new sh = {
	    .id = cfs_catalog_alloc_id(c),
	    .kind = CFS_KIND_TFRECORD,
	    .bytes = nrec * (recsize + 16),
	    .created_epoch = epoch,
	};
	for (size_t i = 0; i < nrec; i++)
		s[i] = (struct cfs_sample){i * (recsize + 16), recsize, (uint32_t)i, 7, i * 100};
	ck_assert_int_eq(cfs_catalog_shard_insert(c, &sh, s, nrec), 0);
	free(s);
	return sh.id;
}

/* C4: the resident row follows every change of a FILE row, and rollbacks. */
static void expect_resident(struct cfs_catalog *c, uint64_t files, uint64_t records)
{
	struct cfs_resident res;
	ck_assert_int_eq(cfs_catalog_resident(c, &res), 0);
	ck_assert_uint_eq(res.files, files);
	ck_assert_uint_eq(res.records, records);
	ck_assert_int_eq(raw_int("SELECT files FROM resident"), (int64_t)files);
}

START_TEST(new_file_gets_current_schema)
{
	struct cfs_catalog *c = open_rw();

	ck_assert_int_eq(cfs_catalog_schema_version(c), 0);
	cfs_catalog_close(c);
	ck_assert_int_eq(raw_int("PRAGMA user_version"), CFS_SCHEMA_VERSION);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM migrations"), CFS_SCHEMA_VERSION);
	ck_assert_int_eq(raw_int("SELECT max(version) FROM migrations"), CFS_SCHEMA_VERSION);
	/* WAL is persistent in the file */
	c = open_rw();
	ck_assert_int_eq(cfs_catalog_schema_version(c), CFS_SCHEMA_VERSION);
	ck_assert_int_eq(cfs_catalog_integrity_check(c, err, sizeof(err)), 0);
	cfs_catalog_close(c);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM migrations"), CFS_SCHEMA_VERSION);
}
END_TEST

/* Takes this binary's catalog back to version 11 (the 11 -> 12 step undone). */
#define UNDO_12                                                                                    \
	"DROP INDEX shards_name; CREATE UNIQUE INDEX shards_name ON shards(name) "                 \
	"WHERE state != 2 AND name IS NOT NULL; "                                                  \
	"DELETE FROM migrations WHERE version = 12; PRAGMA user_version = 11; "

/* Takes this binary's catalog back to version 10 (the 11 -> 12 and 10 -> 11 steps undone). */
#define UNDO_11                                                                                    \
	UNDO_12 "UPDATE shards SET records_crc = NULL WHERE kind = 1; "                            \
		"DELETE FROM migrations WHERE version = 11; PRAGMA user_version = 10; "

/* Takes this binary's catalog back to version 9 (the 10 -> 11 and 9 -> 10 steps undone). */
#define UNDO_10                                                                                    \
	UNDO_11 "DROP TRIGGER id_mark_delete; DROP TABLE id_mark; "                                \
		"ALTER TABLE epochs DROP COLUMN admitted_files; "                                  \
		"ALTER TABLE epochs DROP COLUMN evicted_files; "                                   \
		"ALTER TABLE epochs DROP COLUMN unread_files; "                                    \
		"ALTER TABLE epochs DROP COLUMN unread_bytes; "                                    \
		"ALTER TABLE epochs DROP COLUMN full_files; "                                      \
		"ALTER TABLE epochs DROP COLUMN full_records; "                                    \
		"DELETE FROM migrations WHERE version = 10; PRAGMA user_version = 9"

/*
 * A catalog of schema version 2 (this binary's file with the 2 -> 3 step
 * undone: table served and the epochs columns served_records, read_files
 * dropped) holding a file and an epoch: opening migrates it, keeps the data,
 * and the new columns then count.
 */
START_TEST(migrates_version_2)
{
	struct cfs_catalog *c = open_rw();
	struct cfs_epoch_row r = {.number = 4, .started_ms = 1000, .limit = 77, .admit = 7};
	snprintf(r.policy, sizeof(r.policy), "fifo");
	ck_assert_int_eq(cfs_catalog_epoch_begin(c, &r), 0);
	int64_t id = add_shard(c, 4, 3, 100); /* 3 records of 100 bytes: 348 with framing */
	cfs_catalog_close(c);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM unsynced"), 1); /* the trigger (8) */
	raw_sql(UNDO_10);
	raw_sql(
	    "ALTER TABLE samples DROP COLUMN ordinal; DROP TABLE plan_index; "
	    "DROP TABLE plan_objects; CREATE TABLE plan_objects(plan_id INTEGER NOT NULL, "
	    "object_id INTEGER NOT NULL, first_unit INTEGER NOT NULL, units INTEGER NOT NULL, "
	    "idx BLOB, PRIMARY KEY(plan_id, object_id)) WITHOUT ROWID; "
	    "INSERT INTO plan_objects VALUES(1, 5, 0, 2, x'0102030405060708'); "
	    "INSERT INTO plan_objects VALUES(1, 6, 2, 1, NULL); "
	    "DELETE FROM migrations WHERE version = 9; "
	    "DROP TRIGGER unsynced_insert; DROP TABLE unsynced; "
	    "DELETE FROM migrations WHERE version = 8; "
	    "ALTER TABLE shards DROP COLUMN records_crc; DELETE FROM migrations WHERE version = 7; "
	    "DROP INDEX objects_stale; DELETE FROM migrations WHERE version = 6; "
	    "DROP TRIGGER resident_insert; DROP TRIGGER resident_delete; "
	    "DROP TRIGGER resident_update; DROP TABLE resident; "
	    "DELETE FROM migrations WHERE version = 5; "
	    "DROP TABLE plan_partial; DROP TABLE plan_cut; DELETE FROM migrations WHERE version = "
	    "4; "
	    "DROP TABLE served; ALTER TABLE epochs DROP COLUMN served_records; "
	    "ALTER TABLE epochs DROP COLUMN read_files; DELETE FROM migrations WHERE version = 3; "
	    "PRAGMA user_version = 2");
	ck_assert_int_eq(raw_int("SELECT count(*) FROM sqlite_master WHERE name = 'served'"), 0);

	c = open_rw();
	ck_assert_int_eq(cfs_catalog_schema_version(c), 2); /* what was found */
	struct cfs_shard_stat_delta d = {.id = id, .reads = 1, .full_reads = 1, .read_bytes = 348};
	ck_assert_int_eq(cfs_catalog_shards_add_stats(c, &d, 1, 4), 0);
	struct cfs_epoch_row *rows = NULL;
	size_t n = 0;
	ck_assert_int_eq(cfs_catalog_epochs_list(c, &rows, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(rows[0].limit, 77); /* kept */
	ck_assert_uint_eq(rows[0].admitted_records, 3);
	ck_assert_uint_eq(rows[0].served_records, 3); /* counted by the new step */
	ck_assert_uint_eq(rows[0].read_files, 1);
	ck_assert_uint_eq(rows[0].read_bytes, 348);
	free(rows);
	cfs_catalog_close(c);
	ck_assert_int_eq(raw_int("PRAGMA user_version"), CFS_SCHEMA_VERSION);
	ck_assert_int_eq(raw_int("SELECT max(version) FROM migrations"), CFS_SCHEMA_VERSION);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM served"), 3);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM plan_partial"), 0); /* the 3 -> 4 step */
	ck_assert_int_eq(raw_int("SELECT count(*) FROM plan_cut"), 0);
	/* the 4 -> 5 step: the resident totals of the rows found */
	ck_assert_int_eq(raw_int("SELECT files FROM resident"), 1);
	/* the 5 -> 6 step */
	ck_assert_int_eq(raw_int("SELECT count(*) FROM sqlite_master WHERE name = 'objects_stale'"),
			 1);
	ck_assert_int_eq(raw_int("SELECT bytes FROM resident"), 348);
	ck_assert_int_eq(raw_int("SELECT records FROM resident"), 3);
	/* the 7 -> 8 step: files sealed before it were fsynced, none is listed */
	ck_assert_int_eq(raw_int("SELECT count(*) FROM unsynced"), 0);
	/* the 8 -> 9 step: the samples found have no ordinal, the indexes move to plan_index */
	ck_assert_int_eq(raw_int("SELECT count(*) FROM samples WHERE ordinal IS NULL"), 3);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM plan_index"), 1);
	ck_assert_int_eq(raw_int("SELECT length(idx) FROM plan_index WHERE object_id = 5"), 8);
	ck_assert_int_eq(raw_int("SELECT idx_bytes FROM plan_objects WHERE object_id = 5"), 8);
	ck_assert_int_eq(raw_int("SELECT units + idx_bytes FROM plan_objects WHERE object_id = 6"),
			 1);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM plan_objects WHERE record_bytes IS NULL"),
			 2);
	/* the 9 -> 10 step: the file found was admitted in epoch 4 and read to the end since */
	ck_assert_int_eq(raw_int("SELECT admitted_files FROM epochs WHERE number = 4"), 1);
	ck_assert_int_eq(raw_int("SELECT full_files + full_records FROM epochs WHERE number = 4"),
			 1 + 3);
	ck_assert_int_eq(raw_int("SELECT high FROM id_mark"), id);
}
END_TEST

/*
 * A catalog of version 9, whose GONE rows stayed: the 9 -> 10 step deletes
 * them (their samples were deleted when they went), fills the new epochs
 * counters from the rows found - the GONE ones among them - and keeps
 * their ids taken: the highest id was a GONE file's, and no new file gets
 * it (DESIGN 1).  The resident totals do not move.
 */
START_TEST(migrates_version_9_gone_rows)
{
	struct cfs_catalog *c = open_rw();
	int64_t a = add_shard(c, 0, 2, 10); /* read to the end, then GONE */
	int64_t b = add_shard(c, 0, 3, 10); /* SEALED */
	int64_t e = add_shard(c, 1, 4, 10); /* EVICTING, unread */
	int64_t d = add_shard(c, 1, 5, 10); /* GONE unread: the highest id */
	struct cfs_shard_stat_delta da = {a, 1, 1, 52, 5};
	ck_assert_int_eq(cfs_catalog_shards_add_stats(c, &da, 1, 1), 0);
	int64_t victims[3] = {a, e, d};
	ck_assert_int_eq(cfs_catalog_shards_evict(c, victims, 3, 2), 0);
	cfs_catalog_close(c);
	raw_sql(UNDO_10);
	/* what version 9's shards_gone did to a and d */
	char sql[256];
	snprintf(sql, sizeof(sql),
		 "UPDATE shards SET state = 2, name = NULL WHERE id IN (%lld, %lld); "
		 "DELETE FROM samples WHERE shard_id IN (%lld, %lld); "
		 "DELETE FROM shard_objects WHERE shard_id IN (%lld, %lld)",
		 (long long)a, (long long)d, (long long)a, (long long)d, (long long)a,
		 (long long)d);
	raw_sql(sql);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM shards WHERE state = 2"), 2);

	c = open_rw();
	ck_assert_int_eq(cfs_catalog_schema_version(c), 9);
	ck_assert_int_gt(cfs_catalog_alloc_id(c), d);
	struct cfs_epoch_row *ep;
	size_t n;
	ck_assert_int_eq(cfs_catalog_epochs_list(c, &ep, &n), 0);
	ck_assert_uint_eq(n, 3);
	ck_assert_uint_eq(ep[0].admitted_files, 2);
	ck_assert_uint_eq(ep[0].full_files, 1);
	ck_assert_uint_eq(ep[0].full_records, 2);
	ck_assert_uint_eq(ep[1].admitted_files, 2);
	ck_assert_uint_eq(ep[1].full_files, 0);
	ck_assert_uint_eq(ep[2].evicted_files, 3);
	ck_assert_uint_eq(ep[2].unread_files, 1); /* d; e is not deleted yet */
	ck_assert_uint_eq(ep[2].unread_bytes, 5 * 26);
	free(ep);
	expect_resident(c, 1, 3);
	cfs_catalog_close(c);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM shards"), 2);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM shards WHERE state = 2"), 0);
	ck_assert_int_eq(raw_int("SELECT high FROM id_mark"), d);

	c = open_rw(); /* the id mark, not a row, keeps d taken */
	ck_assert_int_gt(add_shard(c, 3, 1, 1), d);
	(void)b;
	cfs_catalog_close(c);
}
END_TEST

/*
 * A catalog of version 10, whose raw rows have no records_crc (their CRC
 * was read from their sample): the 10 -> 11 step copies each raw file's
 * sample CRC into its row, and a list gives it as before; a TFRecord row's
 * digest is untouched.  A raw file sealed now has its CRC in its row.  The
 * 11 -> 12 step rebuilds the name index with a predicate on `name` alone.
 */
START_TEST(migrates_version_10_raw_crc)
{
	struct cfs_catalog *c = open_rw();
	int64_t t = add_shard(c, 0, 2, 10);
	struct cfs_sample smp = {.offset = 0, .length = 9, .crc = 0xabcdef01u, .object_id = 3};
	struct cfs_shard_new sh = {.id = cfs_catalog_alloc_id(c),
				   .kind = CFS_KIND_RAW,
				   .bytes = 9,
				   .object_id = 3,
				   .name = "a/raw"};
	ck_assert_int_eq(cfs_catalog_shard_insert(c, &sh, &smp, 1), 0);
	cfs_catalog_close(c);
	char sql[128];
	snprintf(sql, sizeof(sql), "SELECT records_crc FROM shards WHERE id = %lld",
		 (long long)sh.id);
	ck_assert_int_eq(raw_int(sql), 0xabcdef01);
	raw_sql(UNDO_11);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM sqlite_master WHERE name = 'shards_name' "
				 "AND sql LIKE '%state%'"),
			 1);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM shards WHERE records_crc IS NULL"), 2);

	c = open_rw();
	ck_assert_int_eq(cfs_catalog_schema_version(c), 10);
	struct cfs_shard_info *rows;
	size_t n;
	ck_assert_int_eq(cfs_catalog_shards_list(c, 1u << CFS_SHARD_SEALED, &rows, &n), 0);
	ck_assert_uint_eq(n, 2);
	for (size_t i = 0; i < n; i++) {
		if (rows[i].id == sh.id) {
			ck_assert(rows[i].has_crc);
			ck_assert_uint_eq(rows[i].crc, 0xabcdef01u);
		} else { /* sealed without a digest (add_shard): none since */
			ck_assert_int_eq(rows[i].id, t);
			ck_assert(!rows[i].has_crc);
		}
	}
	cfs_shard_info_free(rows, n);
	cfs_catalog_close(c);
	ck_assert_int_eq(raw_int(sql), 0xabcdef01);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM shards WHERE records_crc IS NULL"), 1);
	/* the 11 -> 12 step: the name index's predicate no longer names state */
	ck_assert_int_eq(raw_int("SELECT count(*) FROM sqlite_master WHERE name = 'shards_name' "
				 "AND sql LIKE '%state%'"),
			 0);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM sqlite_master WHERE name = 'shards_name'"),
			 1);
}
END_TEST

START_TEST(journal_is_wal)
{
	struct cfs_catalog *c = open_rw();
	sqlite3 *db;
	sqlite3_stmt *st;

	cfs_catalog_close(c);
	ck_assert_int_eq(sqlite3_open(dbpath, &db), SQLITE_OK);
	ck_assert_int_eq(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL), SQLITE_OK);
	ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
	ck_assert_str_eq((const char *)sqlite3_column_text(st, 0), "wal");
	sqlite3_finalize(st);
	sqlite3_close(db);
}
END_TEST

START_TEST(newer_schema_refused)
{
	struct cfs_catalog *c = open_rw();

	cfs_catalog_close(c);
	raw_sql("PRAGMA user_version = 99");
	c = NULL;
	ck_assert_int_eq(cfs_catalog_open(&c, dbpath, 0, err, sizeof(err)), -EPROTONOSUPPORT);
	ck_assert_ptr_null(c);
	ck_assert_ptr_nonnull(strstr(err, "version 99"));
	ck_assert_ptr_nonnull(strstr(err, "upgrade rollcache"));
	/* nothing written */
	ck_assert_int_eq(raw_int("PRAGMA user_version"), 99);
}
END_TEST

START_TEST(not_a_database_refused_nothing_deleted)
{
	struct cfs_catalog *c = NULL;

	ck_assert_int_eq(cfs_test_write_file(dir, "catalog.db", 8192, 'Z'), 0);
	ck_assert_int_eq(cfs_catalog_open(&c, dbpath, 0, err, sizeof(err)), -EBADMSG);
	ck_assert_ptr_null(c);
	ck_assert_ptr_nonnull(strstr(err, "not a SQLite database"));
	ck_assert_ptr_nonnull(strstr(err, "nothing was deleted"));
	ck_assert_int_eq(cfs_test_size(dir, "catalog.db"), 8192);
	ck_assert_int_eq(cfs_catalog_open(&c, dbpath, CFS_CATALOG_READONLY, err, sizeof(err)),
			 -EBADMSG);
}
END_TEST

START_TEST(readonly_open)
{
	struct cfs_catalog *c = NULL, *w;
	struct cfs_shard_info *arr;
	size_t n;

	/* a missing file: read-only open fails and creates nothing */
	ck_assert_int_lt(cfs_catalog_open(&c, dbpath, CFS_CATALOG_READONLY, err, sizeof(err)), 0);
	ck_assert(!cfs_test_exists(dir, "catalog.db"));
	w = open_rw();
	add_shard(w, 0, 3, 10);
	/* a reader beside the writer (WAL), as `rollcache report` is */
	ck_assert_int_eq(cfs_catalog_open(&c, dbpath, CFS_CATALOG_READONLY, err, sizeof(err)), 0);
	ck_assert_int_eq(cfs_catalog_shards_list(c, 1u << CFS_SHARD_SEALED, &arr, &n), 0);
	ck_assert_uint_eq(n, 1);
	cfs_shard_info_free(arr, n);
	ck_assert_int_lt(cfs_catalog_shards_gone(c, &(int64_t){1}, 1), 0);
	cfs_catalog_close(c);
	cfs_catalog_close(w);
}
END_TEST

START_TEST(shard_and_samples_roundtrip)
{
	struct cfs_catalog *c = open_rw();
	struct cfs_shard_info *arr, one;
	struct cfs_sample *smp;
	struct cfs_resident res;
	size_t n;
	int64_t a = add_shard(c, 0, 100, 50);
	int64_t b = add_shard(c, 1, 10, 5);

	ck_assert_int_gt(b, a);
	ck_assert_int_eq(cfs_catalog_shards_list(c, 1u << CFS_SHARD_SEALED, &arr, &n), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_int_eq(arr[0].id, a);
	ck_assert_uint_eq(arr[0].records, 100);
	ck_assert_uint_eq(arr[0].bytes, 100 * 66);
	ck_assert_int_eq(arr[0].state, CFS_SHARD_SEALED);
	ck_assert_uint_eq(arr[1].created_epoch, 1);
	ck_assert_ptr_null(arr[0].name);
	ck_assert_int_eq(arr[0].evicted_epoch, -1);
	cfs_shard_info_free(arr, n);

	ck_assert_int_eq(cfs_catalog_samples_of(c, a, &smp, &n), 0);
	ck_assert_uint_eq(n, 100);
	ck_assert_uint_eq(smp[99].offset, 99 * 66);
	ck_assert_uint_eq(smp[99].length, 50);
	ck_assert_uint_eq(smp[99].crc, 99);
	ck_assert_int_eq(smp[99].object_id, 7);
	ck_assert_uint_eq(smp[99].object_offset, 9900);
	free(smp);

	ck_assert_int_eq(cfs_catalog_shard_get(c, b, &one), 0);
	ck_assert_uint_eq(one.records, 10);
	free(one.name);
	ck_assert_int_eq(cfs_catalog_shard_get(c, 9999, &one), -ENOENT);
	ck_assert_int_eq(cfs_catalog_resident(c, &res), 0);
	ck_assert_uint_eq(res.files, 2);
	ck_assert_uint_eq(res.records, 110);
	ck_assert_uint_eq(res.bytes, 100 * 66 + 10 * 21);
	cfs_catalog_close(c);
}
END_TEST

START_TEST(resident_row_follows_changes)
{
	struct cfs_catalog *c = open_rw();
	int64_t a = add_shard(c, 0, 2, 10), b = add_shard(c, 0, 3, 10), d = add_shard(c, 0, 4, 10);
	int64_t e = add_shard(c, 0, 5, 10);
	expect_resident(c, 4, 14);
	ck_assert_int_eq(cfs_catalog_begin(c), 0); /* a boundary rolled back: no change */
	ck_assert_int_eq(cfs_catalog_shards_evict(c, &a, 1, 1), 0);
	cfs_catalog_rollback(c);
	expect_resident(c, 4, 14);
	ck_assert_int_eq(cfs_catalog_shards_evict(c, &a, 1, 1), 0);
	expect_resident(c, 3, 12);
	ck_assert_int_eq(cfs_catalog_shards_gone(c, &a, 1), 0);
	expect_resident(c, 3, 12);
	ck_assert_int_eq(cfs_catalog_shard_withdraw(c, b, CFS_WITHDRAW_CORRUPT), 0);
	expect_resident(c, 2, 9);
	ck_assert_int_eq(cfs_catalog_shards_drop(c, &d, 1), 0);
	expect_resident(c, 1, 5);
	ck_assert_int_eq(cfs_catalog_shards_drop(c, &a, 1), 0); /* GONE, no row: no change */
	expect_resident(c, 1, 5);
	(void)e;
	cfs_catalog_close(c);
}
END_TEST

START_TEST(insert_is_one_transaction)
{
	struct cfs_catalog *c = open_rw();
	struct cfs_sample s[3] = {{0, 1, 0, 0, 0}, {17, 1, 0, 0, 0}, {0, 1, 0, 0, 0}};
	struct cfs_shard_new sh = {
	    .id = cfs_catalog_alloc_id(c), .kind = CFS_KIND_TFRECORD, .bytes = 34};
	struct cfs_resident res;

	/* the third sample repeats an offset: the whole insert must vanish */
	ck_assert_int_lt(cfs_catalog_shard_insert(c, &sh, s, 3), 0);
	ck_assert_int_eq(cfs_catalog_resident(c, &res), 0);
	ck_assert_uint_eq(res.files, 0);
	cfs_catalog_close(c);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM samples"), 0);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM epochs"), 0);
}
END_TEST

START_TEST(ids_never_reused)
{
	struct cfs_catalog *c = open_rw();
	int64_t a = add_shard(c, 0, 1, 1);
	int64_t b = add_shard(c, 0, 1, 1);

	ck_assert_int_eq(cfs_catalog_shards_evict(c, &b, 1, 0), 0);
	ck_assert_int_eq(cfs_catalog_shards_gone(c, &b, 1), 0);
	cfs_catalog_note_id(c, 500);
	ck_assert_int_gt(cfs_catalog_alloc_id(c), 500);
	cfs_catalog_close(c);
	/* after reopen: above b, whose row GONE deleted (invariant 1) */
	c = open_rw();
	ck_assert_int_gt(cfs_catalog_alloc_id(c), b);
	ck_assert_int_gt(b, a);
	cfs_catalog_close(c);
}
END_TEST

/*
 * Victims evicted and reaped leave catalog.db (rows, samples, file
 * objects) while the resident totals stay those of the SEALED files, and
 * no new file gets an id of a deleted row: the highest ids here are the
 * victims', before and after a close and reopen (DESIGN 1: the id mark),
 * and after reconciliation's drop of the last row.  What report counts of
 * them stays in their epochs' counters.
 */
START_TEST(gone_deletes_rows_keeps_ids)
{
	struct cfs_catalog *c = open_rw();
	int64_t a = add_shard(c, 0, 2, 10);  /* read to the end, then evicted */
	int64_t b = add_shard(c, 0, 3, 10);  /* stays */
	int64_t d0 = add_shard(c, 1, 1, 10); /* evicted unread */
	int64_t d = add_shard(c, 1, 4, 10);  /* evicted unread: the highest id */
	int64_t v[3] = {a, d0, d};
	struct cfs_shard_stat_delta da = {a, 1, 1, 52, 5};
	struct cfs_epoch_row *ep;
	size_t n;

	ck_assert_int_eq(cfs_catalog_shards_add_stats(c, &da, 1, 1), 0);
	ck_assert_int_eq(cfs_catalog_shards_evict(c, v, 3, 2), 0);
	expect_resident(c, 1, 3);
	ck_assert_int_eq(cfs_catalog_shards_gone(c, v, 3), 0);
	expect_resident(c, 1, 3); /* a GONE row was not SEALED: resident_delete does not fire */
	ck_assert_int_gt(cfs_catalog_alloc_id(c), d);
	ck_assert_int_eq(cfs_catalog_epochs_list(c, &ep, &n), 0);
	ck_assert_uint_eq(n, 3);
	ck_assert_uint_eq(ep[0].admitted_files, 2);
	ck_assert_uint_eq(ep[0].full_files, 1); /* a, counted at its first full read */
	ck_assert_uint_eq(ep[0].full_records, 2);
	ck_assert_uint_eq(ep[1].admitted_files, 2);
	ck_assert_uint_eq(ep[2].evicted_files, 3);
	ck_assert_uint_eq(ep[2].unread_files, 2); /* d0 and d */
	ck_assert_uint_eq(ep[2].unread_bytes, 5 * 26);
	free(ep);
	cfs_catalog_close(c);

	/* the real file: the rows are gone, b's alone is left */
	ck_assert_int_eq(raw_int("SELECT count(*) FROM shards"), 1);
	ck_assert_int_eq(raw_int("SELECT id FROM shards"), b);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM samples"), 3);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM shard_objects"), 1);
	ck_assert_int_eq(raw_int("SELECT files * 1000 + records FROM resident"), 1003);
	ck_assert_int_eq(raw_int("SELECT high FROM id_mark"), d);

	c = open_rw(); /* no row names d: the id mark keeps it taken */
	int64_t x = add_shard(c, 2, 1, 1);
	ck_assert_int_gt(x, d);
	expect_resident(c, 2, 4);
	/* reconciliation's drop (a file missing) keeps the id taken too */
	ck_assert_int_eq(cfs_catalog_shards_drop(c, &x, 1), 0);
	expect_resident(c, 1, 3);
	cfs_catalog_close(c);
	c = open_rw();
	ck_assert_int_gt(cfs_catalog_alloc_id(c), x);
	cfs_catalog_close(c);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM shards"), 1);
}
END_TEST

/*
 * A boundary of more victims than one statement takes (8,192): every one
 * moves and is counted once; a list whose last id is not SEALED changes
 * nothing, the batches before it included.
 */
START_TEST(evict_many_in_batches)
{
	struct cfs_catalog *c = open_rw();
	enum { N = 8200 };
	int64_t *ids = malloc(N * sizeof(*ids));
	ck_assert_ptr_nonnull(ids);
	ck_assert_int_eq(cfs_catalog_begin(c), 0);
	for (int i = 0; i < N; i++)
		ids[i] = add_shard(c, 0, 1, 10); /* 26 bytes each */
	ck_assert_int_eq(cfs_catalog_commit(c), 0);
	int64_t last = ids[N - 1];
	ids[N - 1] = 123456789; /* no such file */
	ck_assert_int_eq(cfs_catalog_shards_evict(c, ids, N, 2), -ENOENT);
	expect_resident(c, N, N);
	ids[N - 1] = last;
	ck_assert_int_eq(cfs_catalog_shards_evict(c, ids, N - 1, 2), 0);
	expect_resident(c, 1, 1);
	struct cfs_shard_info *arr;
	size_t n;
	ck_assert_int_eq(cfs_catalog_shards_list(c, 1u << CFS_SHARD_EVICTING, &arr, &n), 0);
	ck_assert_uint_eq(n, N - 1);
	for (size_t i = 0; i < n; i++)
		ck_assert_int_eq(arr[i].evicted_epoch, 2);
	cfs_shard_info_free(arr, n);
	struct cfs_epoch_row *ep;
	ck_assert_int_eq(cfs_catalog_epochs_list(c, &ep, &n), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(ep[1].evicted_files, N - 1);
	ck_assert_uint_eq(ep[1].evicted_bytes, (uint64_t)(N - 1) * 26);
	ck_assert_uint_eq(ep[1].evicted_records, N - 1);
	free(ep);
	free(ids);
	cfs_catalog_close(c);
}
END_TEST

START_TEST(evict_then_gone)
{
	struct cfs_catalog *c = open_rw();
	int64_t a = add_shard(c, 0, 4, 10), b = add_shard(c, 0, 2, 10), x = 12345;
	int64_t both[2] = {a, b};
	struct cfs_shard_info *arr, one;
	struct cfs_epoch_row *ep;
	size_t n;

	/* an unknown id: nothing changes */
	int64_t bad[2] = {a, x};
	ck_assert_int_eq(cfs_catalog_shards_evict(c, bad, 2, 3), -ENOENT);
	ck_assert_int_eq(cfs_catalog_shards_list(c, 1u << CFS_SHARD_SEALED, &arr, &n), 0);
	ck_assert_uint_eq(n, 2);
	cfs_shard_info_free(arr, n);

	ck_assert_int_eq(cfs_catalog_shards_evict(c, both, 2, 3), 0);
	ck_assert_int_eq(cfs_catalog_shards_list(c, 1u << CFS_SHARD_EVICTING, &arr, &n), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_int_eq(arr[0].evicted_epoch, 3);
	cfs_shard_info_free(arr, n);
	/* evicting twice is refused (not SEALED) */
	ck_assert_int_eq(cfs_catalog_shards_evict(c, &a, 1, 3), -ENOENT);

	/* GONE: the row goes, and a victim never read to the end is counted unread */
	ck_assert_int_eq(cfs_catalog_shards_gone(c, &a, 1), 0);
	ck_assert_int_eq(cfs_catalog_shards_list(c, 1u << CFS_SHARD_GONE, &arr, &n), 0);
	ck_assert_uint_eq(n, 0);
	ck_assert_int_eq(cfs_catalog_shard_get(c, a, &one), -ENOENT);
	ck_assert_int_eq(cfs_catalog_shards_gone(c, &a, 1), 0); /* again: nothing to do */

	ck_assert_int_eq(cfs_catalog_epochs_list(c, &ep, &n), 0);
	ck_assert_uint_eq(n, 2); /* epoch 0 (admitted) and 3 (evicted) */
	ck_assert_uint_eq(ep[0].admitted_records, 6);
	ck_assert_uint_eq(ep[0].admitted_files, 2);
	ck_assert_uint_eq(ep[1].number, 3);
	ck_assert_uint_eq(ep[1].evicted_records, 6);
	ck_assert_uint_eq(ep[1].evicted_bytes, 6 * 26);
	ck_assert_uint_eq(ep[1].evicted_files, 2);
	ck_assert_uint_eq(ep[1].unread_files, 1);
	ck_assert_uint_eq(ep[1].unread_bytes, 4 * 26);
	free(ep);
	cfs_catalog_close(c);
	/* C1: no sample of a GONE file survives; nor its row */
	ck_assert_int_eq(raw_int("SELECT count(*) FROM samples"), 2);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM shards"), 1);
}
END_TEST

START_TEST(stats_batched)
{
	struct cfs_catalog *c = open_rw();
	int64_t a = add_shard(c, 0, 1, 1), b = add_shard(c, 0, 1, 1);
	struct cfs_shard_stat_delta d[3] = {
	    {a, 5, 1, 1000, 111},
	    {b, 2, 0, 10, 222},
	    {99999, 1, 1, 1, 1}, /* gone meanwhile: skipped */
	};
	struct cfs_shard_info one;
	struct cfs_epoch_row *ep;
	size_t n;

	ck_assert_int_eq(cfs_catalog_shards_add_stats(c, d, 3, 2), 0);
	d[0].last_read_ms = 50; /* older: last_read keeps the max */
	ck_assert_int_eq(cfs_catalog_shards_add_stats(c, d, 1, 2), 0);
	ck_assert_int_eq(cfs_catalog_shard_get(c, a, &one), 0);
	ck_assert_uint_eq(one.reads, 10);
	ck_assert_uint_eq(one.full_reads, 2);
	ck_assert_uint_eq(one.last_read_ms, 111);
	ck_assert_int_eq(cfs_catalog_epochs_list(c, &ep, &n), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(ep[1].number, 2);
	ck_assert_uint_eq(ep[1].read_bytes, 2011);
	free(ep);
	cfs_catalog_close(c);
}
END_TEST

START_TEST(raw_names_unique)
{
	struct cfs_catalog *c = open_rw();
	struct cfs_sample s = {0, 10, 0, 1, 0};
	struct cfs_shard_new sh = {.kind = CFS_KIND_RAW, .bytes = 10, .name = "a/b.jpg"};
	struct cfs_shard_info *arr;
	size_t n;

	sh.id = cfs_catalog_alloc_id(c);
	ck_assert_int_eq(cfs_catalog_shard_insert(c, &sh, &s, 1), 0);
	int64_t first = sh.id;
	sh.id = cfs_catalog_alloc_id(c);
	ck_assert_int_eq(cfs_catalog_shard_insert(c, &sh, &s, 1), -EEXIST);
	/* once the first is GONE its name is free again */
	ck_assert_int_eq(cfs_catalog_shards_evict(c, &first, 1, 0), 0);
	ck_assert_int_eq(cfs_catalog_shards_gone(c, &first, 1), 0);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM shards WHERE name = 'a/b.jpg'"), 0);
	ck_assert_int_eq(cfs_catalog_shard_insert(c, &sh, &s, 1), 0);
	ck_assert_int_eq(cfs_catalog_shards_list(c, 1u << CFS_SHARD_SEALED, &arr, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(arr[0].name, "a/b.jpg");
	ck_assert_int_eq(arr[0].kind, CFS_KIND_RAW);
	cfs_shard_info_free(arr, n);
	sh.name = NULL;
	ck_assert_int_eq(cfs_catalog_shard_insert(c, &sh, &s, 1), -EINVAL);
	cfs_catalog_close(c);
}
END_TEST

START_TEST(objects_sync_etags_only_where_both_have_one)
{
	struct cfs_catalog *c = open_rw();
	int64_t src, ids[2];
	struct cfs_sync_result r;
	struct cfs_listing_entry l1[2] = {{"a", 20, "m-20"}, {"b", 10, "e1"}};
	struct cfs_listing_entry l2[2] = {{"a", 20, NULL}, {"b", 10, NULL}}; /* a MANIFEST */
	struct cfs_listing_entry l3[2] = {{"a", 20, "x"}, {"b", 10, "e2"}};

	ck_assert_int_eq(cfs_catalog_source(c, "http://h/p/", &src), 0);
	ck_assert_int_eq(cfs_catalog_objects_sync(c, src, l1, 2, 0, ids, &r), 0);
	ck_assert_uint_eq(r.added, 2);
	/* a listing without etags: the sizes decide, nothing changed */
	ck_assert_int_eq(cfs_catalog_objects_sync(c, src, l2, 2, 1, ids, &r), 0);
	ck_assert_uint_eq(r.unchanged, 2);
	ck_assert_uint_eq(r.changed, 0);
	/* both have one and they differ: changed */
	ck_assert_int_eq(cfs_catalog_objects_sync(c, src, l3, 2, 2, ids, &r), 0);
	ck_assert_uint_eq(r.changed, 2);
	ck_assert_uint_eq(r.unchanged, 0);
	cfs_catalog_close(c);
}
END_TEST

START_TEST(objects_sync_merges_listings)
{
	struct cfs_catalog *c = open_rw();
	int64_t src, src2, ids[3], ids2[3];
	struct cfs_sync_result r;
	struct cfs_object_info *o;
	size_t n;
	struct cfs_listing_entry l1[3] = {{"b", 10, "e1"}, {"a", 20, NULL}, {"c/d", 30, "e3"}};
	struct cfs_listing_entry l2[3] = {{"a", 20, ""}, {"b", 11, "e1"}, {"e", 5, NULL}};
	struct cfs_listing_entry dup[2] = {{"x", 1, NULL}, {"x", 2, NULL}};

	ck_assert_int_eq(cfs_catalog_source(c, "s3://b/p/", &src), 0);
	ck_assert_int_eq(cfs_catalog_source(c, "s3://b/p/", &src2), 0);
	ck_assert_int_eq(src, src2);
	ck_assert_int_eq(cfs_catalog_objects_sync(c, src, l1, 3, 0, ids, &r), 0);
	ck_assert_uint_eq(r.added, 3);
	ck_assert_int_ne(ids[0], ids[1]);

	ck_assert_int_eq(cfs_catalog_objects_sync(c, src, l2, 3, 1, ids2, &r), 0);
	ck_assert_uint_eq(r.unchanged, 1); /* a: NULL and "" etags are the same */
	ck_assert_uint_eq(r.changed, 1);   /* b: size changed */
	ck_assert_uint_eq(r.added, 1);	   /* e */
	ck_assert_uint_eq(r.vanished, 1);  /* c/d */
	ck_assert_int_eq(ids2[0], ids[1]);
	ck_assert_int_ne(ids2[1], ids[0]);

	ck_assert_int_eq(cfs_catalog_objects_list(c, src, 1u << CFS_OBJECT_STALE, &o, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(o[0].id, ids[0]);
	ck_assert_str_eq(o[0].key, "b");
	cfs_object_info_free(o, n);
	ck_assert_int_eq(cfs_catalog_objects_list(c, src, 1u << CFS_OBJECT_LISTED, &o, &n), 0);
	ck_assert_uint_eq(n, 3);
	ck_assert_uint_eq(o[0].listed_epoch, 0); /* a: unchanged, so not rewritten at epoch 1 */
	ck_assert_int_eq(o[0].last_fetched_epoch, -1);
	cfs_object_info_free(o, n);

	ck_assert_int_eq(cfs_catalog_object_fetched(c, ids2[0], 4), 0);
	ck_assert_int_eq(cfs_catalog_object_fetched(c, 987654, 4), -ENOENT);
	ck_assert_int_eq(cfs_catalog_objects_list(c, src, 1u << CFS_OBJECT_LISTED, &o, &n), 0);
	ck_assert_uint_eq(o[0].fetches, 1);
	ck_assert_int_eq(o[0].last_fetched_epoch, 4);
	cfs_object_info_free(o, n);

	/* duplicated keys: refused, nothing changed */
	ck_assert_int_eq(cfs_catalog_objects_sync(c, src, dup, 2, 2, NULL, &r), -EINVAL);
	ck_assert_int_eq(cfs_catalog_objects_list(c, src, ~0u, &o, &n), 0);
	ck_assert_uint_eq(n, 5);
	cfs_object_info_free(o, n);
	cfs_catalog_close(c);
}
END_TEST

/*
 * The merge walks the current rows in the index's key order (bytewise):
 * keys that are prefixes of others, bytes over 0x7f, a VANISHED row that
 * comes back (seen again, not added) and one that stays away (not counted
 * again), over three listings.
 */
START_TEST(objects_sync_walks_in_key_order)
{
	struct cfs_catalog *c = open_rw();
	int64_t src, ids[5], ids2[4], ids3[4];
	struct cfs_sync_result r;
	struct cfs_object_info *o;
	size_t n;
	struct cfs_listing_entry l1[5] = {{"a/b", 1, NULL},
					  {"a", 1, NULL},
					  {"\xc3\xa9", 1, NULL},
					  {"a b", 1, NULL},
					  {"z", 1, NULL}};
	/* "a b" and "z" gone; "\xc3\xa9" changed; "\x7f" new */
	struct cfs_listing_entry l2[4] = {
	    {"\xc3\xa9", 2, NULL}, {"a", 1, NULL}, {"\x7f", 1, NULL}, {"a/b", 1, NULL}};
	/* "z" back with its old size and etag; "a b" still away */
	struct cfs_listing_entry l3[4] = {
	    {"z", 1, NULL}, {"a", 1, NULL}, {"\x7f", 1, NULL}, {"a/b", 1, NULL}};

	ck_assert_int_eq(cfs_catalog_source(c, "http://h/p/", &src), 0);
	ck_assert_int_eq(cfs_catalog_objects_sync(c, src, l1, 5, 0, ids, &r), 0);
	ck_assert_uint_eq(r.added, 5);
	ck_assert_int_eq(cfs_catalog_objects_sync(c, src, l2, 4, 1, ids2, &r), 0);
	ck_assert_uint_eq(r.unchanged, 2);
	ck_assert_uint_eq(r.changed, 1);
	ck_assert_uint_eq(r.added, 1);
	ck_assert_uint_eq(r.vanished, 2);
	ck_assert_int_eq(ids2[1], ids[1]);
	ck_assert_int_eq(ids2[3], ids[0]);
	ck_assert_int_ne(ids2[0], ids[2]);
	ck_assert_int_eq(cfs_catalog_objects_sync(c, src, l3, 4, 2, ids3, &r), 0);
	ck_assert_uint_eq(r.unchanged, 4); /* z: VANISHED, back unchanged */
	ck_assert_uint_eq(r.added, 0);
	ck_assert_uint_eq(r.changed, 0);
	ck_assert_uint_eq(r.vanished, 1); /* the changed key's new row; "a b" is VANISHED already */
	ck_assert_int_eq(ids3[0], ids[4]);
	ck_assert_int_eq(cfs_catalog_objects_list(c, src, 1u << CFS_OBJECT_VANISHED, &o, &n), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(o[0].key, "a b");
	ck_assert_str_eq(o[1].key, "\xc3\xa9");
	cfs_object_info_free(o, n);
	/* "z" LISTED again at the epoch of its return; "a", never away, keeps epoch 0 */
	ck_assert_int_eq(cfs_catalog_objects_list(c, src, 1u << CFS_OBJECT_LISTED, &o, &n), 0);
	int found = 0;
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(o[i].key, "z") && ++found)
			ck_assert_uint_eq(o[i].listed_epoch, 2);
		if (!strcmp(o[i].key, "a") && ++found)
			ck_assert_uint_eq(o[i].listed_epoch, 0);
	}
	ck_assert_int_eq(found, 2);
	cfs_object_info_free(o, n);
	cfs_catalog_close(c);
}
END_TEST

static void array_entry(void *ctx, size_t k, struct cfs_listing_entry *e)
{
	*e = ((const struct cfs_listing_entry *)ctx)[k];
}

/* The sorted variant reads through its getter and refuses keys out of order. */
START_TEST(objects_sync_sorted_reads_in_place)
{
	struct cfs_catalog *c = open_rw();
	int64_t src, ids[3], ids2[3];
	struct cfs_sync_result r;
	struct cfs_listing_entry l1[3] = {{"a", 1, "e"}, {"b", 2, "y"}, {"c", 3, NULL}};
	struct cfs_listing_entry l2[3] = {{"a", 1, "e"}, {"b", 2, "x"}, {"d", 4, NULL}};
	struct cfs_listing_entry bad[2] = {{"b", 1, NULL}, {"a", 1, NULL}};
	struct cfs_listing_entry dup[2] = {{"a", 1, NULL}, {"a", 1, NULL}};

	ck_assert_int_eq(cfs_catalog_source(c, "http://h/q/", &src), 0);
	ck_assert_int_eq(cfs_catalog_objects_sync_sorted(c, src, array_entry, l1, 3, 0, ids, &r),
			 0);
	ck_assert_uint_eq(r.added, 3);
	ck_assert_int_eq(cfs_catalog_objects_sync_sorted(c, src, array_entry, l2, 3, 1, ids2, &r),
			 0);
	ck_assert_uint_eq(r.unchanged, 1);
	ck_assert_uint_eq(r.changed, 1);
	ck_assert_uint_eq(r.added, 1);
	ck_assert_uint_eq(r.vanished, 1);
	ck_assert_int_eq(ids2[0], ids[0]);
	ck_assert_int_ne(ids2[1], ids[1]);
	ck_assert_int_eq(cfs_catalog_objects_sync_sorted(c, src, array_entry, bad, 2, 2, NULL, &r),
			 -EINVAL);
	ck_assert_int_eq(cfs_catalog_objects_sync_sorted(c, src, array_entry, dup, 2, 2, NULL, &r),
			 -EINVAL);
	ck_assert_int_eq(cfs_catalog_objects_sync_sorted(c, src, array_entry, l2, 0, 2, NULL, &r),
			 0);
	ck_assert_uint_eq(r.vanished, 3); /* an empty listing */
	cfs_catalog_close(c);
}
END_TEST

START_TEST(stale_objects_name_their_shards)
{
	struct cfs_catalog *c = open_rw();
	int64_t src, ids[2], *out;
	size_t n;
	struct cfs_listing_entry l1[2] = {{"x", 10, "v1"}, {"y", 10, "v1"}};
	struct cfs_listing_entry l2[2] = {{"x", 10, "v2"}, {"y", 10, "v1"}};
	struct cfs_sample s = {0, 4, 0, 0, 0};
	struct cfs_shard_new sh = {.kind = CFS_KIND_TFRECORD, .bytes = 20};

	ck_assert_int_eq(cfs_catalog_source(c, "file:///d/", &src), 0);
	ck_assert_int_eq(cfs_catalog_objects_sync(c, src, l1, 2, 0, ids, NULL), 0);
	s.object_id = ids[0];
	sh.id = cfs_catalog_alloc_id(c);
	ck_assert_int_eq(cfs_catalog_shard_insert(c, &sh, &s, 1), 0);
	int64_t with_x = sh.id;
	s.object_id = ids[1];
	sh.id = cfs_catalog_alloc_id(c);
	ck_assert_int_eq(cfs_catalog_shard_insert(c, &sh, &s, 1), 0);

	/* a file mixing both objects: x's record at 0, y's at 16 */
	struct cfs_sample mix[2] = {{0, 4, 0, ids[0], 0}, {16, 4, 0, ids[1], 0}};
	sh.id = cfs_catalog_alloc_id(c);
	sh.bytes = 32;
	ck_assert_int_eq(cfs_catalog_shard_insert(c, &sh, mix, 2), 0);
	int64_t mixed = sh.id;

	ck_assert_int_eq(cfs_catalog_shards_with_stale_objects(c, &out, &n), 0);
	ck_assert_uint_eq(n, 0);
	free(out);
	uint64_t gen = cfs_catalog_stale_generation(c);
	ck_assert_int_eq(cfs_catalog_objects_sync(c, src, l1, 2, 1, NULL, NULL), 0);
	ck_assert_uint_eq(cfs_catalog_stale_generation(c), gen); /* nothing changed */
	ck_assert_int_eq(cfs_catalog_objects_sync(c, src, l2, 2, 1, NULL, NULL), 0);
	ck_assert_uint_eq(cfs_catalog_stale_generation(c), gen + 1);
	ck_assert_int_eq(cfs_catalog_shards_with_stale_objects(c, &out, &n), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_int_eq(out[0], with_x);
	ck_assert_int_eq(out[1], mixed);
	free(out);

	/* the mixed file's current records: y's only */
	struct cfs_sample *cur;
	ck_assert_int_eq(cfs_catalog_samples_current(c, mixed, &cur, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(cur[0].object_id, ids[1]);
	ck_assert_uint_eq(cur[0].offset, 16);
	free(cur);
	ck_assert_int_eq(cfs_catalog_samples_current(c, with_x, &cur, &n), 0);
	ck_assert_uint_eq(n, 0);
	free(cur);

	/* withdrawn: EVICTING, never shown again, nothing of it left in the index */
	ck_assert_int_eq(cfs_catalog_shard_withdraw(c, mixed, CFS_WITHDRAW_STALE), 0);
	ck_assert_int_eq(cfs_catalog_shard_withdraw(c, with_x, CFS_WITHDRAW_STALE), 0);
	ck_assert_int_eq(cfs_catalog_shard_withdraw(c, with_x, CFS_WITHDRAW_STALE), -ENOENT);
	struct cfs_shard_info one;
	ck_assert_int_eq(cfs_catalog_shard_get(c, mixed, &one), 0);
	ck_assert_int_eq(one.state, CFS_SHARD_EVICTING);
	ck_assert_int_eq(one.evicted_epoch, CFS_EVICTED_WITHDRAWN);
	ck_assert_int_eq(cfs_catalog_shards_with_stale_objects(c, &out, &n), 0);
	ck_assert_uint_eq(n, 0);
	free(out);
	cfs_catalog_close(c);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM shard_objects WHERE shard_id IN (SELECT id "
				 "FROM shards WHERE state != 0)"),
			 0);
}
END_TEST

START_TEST(epochs_begin_and_list)
{
	struct cfs_catalog *c = open_rw();
	struct cfs_epoch_row r = {.number = 0,
				  .limit = 1000,
				  .admit = 100,
				  .policy = "fifo",
				  .min_uses = 2,
				  .resident_files = 3};
	struct cfs_epoch_row *ep;
	uint32_t cur = 77;
	size_t n;

	ck_assert_int_eq(cfs_catalog_current_epoch(c, &cur), -ENOENT);
	add_shard(c, 1, 2, 10); /* admitted into epoch 1 before it began */
	ck_assert_int_eq(cfs_catalog_epoch_begin(c, &r), 0);
	r.number = 1;
	snprintf(r.policy, sizeof(r.policy), "lru");
	ck_assert_int_eq(cfs_catalog_epoch_begin(c, &r), 0);
	ck_assert_int_eq(cfs_catalog_current_epoch(c, &cur), 0);
	ck_assert_uint_eq(cur, 1);
	ck_assert_int_eq(cfs_catalog_epochs_list(c, &ep, &n), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(ep[0].policy, "fifo");
	ck_assert_uint_eq(ep[0].limit, 1000);
	ck_assert_uint_eq(ep[0].min_uses, 2);
	ck_assert_uint_gt(ep[0].started_ms, 0);
	ck_assert_str_eq(ep[1].policy, "lru");
	ck_assert_uint_eq(ep[1].admitted_records, 2); /* counters kept by begin */
	free(ep);
	cfs_catalog_close(c);
}
END_TEST

START_TEST(explicit_transaction_rolls_back)
{
	struct cfs_catalog *c = open_rw();
	int64_t a = add_shard(c, 0, 1, 1);
	struct cfs_shard_info one;

	ck_assert_int_eq(cfs_catalog_begin(c), 0);
	ck_assert_int_eq(cfs_catalog_begin(c), -EINVAL); /* no nesting */
	ck_assert_int_eq(cfs_catalog_shards_evict(c, &a, 1, 0), 0);
	cfs_catalog_rollback(c);
	ck_assert_int_eq(cfs_catalog_shard_get(c, a, &one), 0);
	ck_assert_int_eq(one.state, CFS_SHARD_SEALED);

	ck_assert_int_eq(cfs_catalog_begin(c), 0);
	ck_assert_int_eq(cfs_catalog_shards_evict(c, &a, 1, 0), 0);
	/* an inner failure rolls back only its own savepoint */
	ck_assert_int_eq(cfs_catalog_shards_evict(c, &a, 1, 0), -ENOENT);
	ck_assert_int_eq(cfs_catalog_commit(c), 0);
	ck_assert_int_eq(cfs_catalog_shard_get(c, a, &one), 0);
	ck_assert_int_eq(one.state, CFS_SHARD_EVICTING);
	ck_assert_int_eq(cfs_catalog_commit(c), -EINVAL);
	cfs_catalog_close(c);
}
END_TEST

START_TEST(lists_grow_past_first_block)
{
	struct cfs_catalog *c = open_rw();
	enum { NREC = 200, NOBJ = 150 };
	struct cfs_listing_entry *l = calloc(NOBJ, sizeof(*l));
	char(*keys)[16] = calloc(NOBJ, sizeof(*keys));
	struct cfs_object_info *o;
	struct cfs_sample *smp;
	int64_t src;
	size_t n;
	int64_t a = add_shard(c, 0, NREC, 8);

	ck_assert_int_eq(cfs_catalog_samples_of(c, a, &smp, &n), 0);
	ck_assert_uint_eq(n, NREC);
	for (size_t i = 0; i < n; i++)
		ck_assert_uint_eq(smp[i].object_offset, i * 100);
	free(smp);

	for (size_t i = 0; i < NOBJ; i++) {
		snprintf(keys[i], sizeof(keys[i]), "k%05zu", i);
		l[i] = (struct cfs_listing_entry){keys[i], i + 1, NULL};
	}
	ck_assert_int_eq(cfs_catalog_source(c, "file:///many/", &src), 0);
	ck_assert_int_eq(cfs_catalog_objects_sync(c, src, l, NOBJ, 0, NULL, NULL), 0);
	ck_assert_int_eq(cfs_catalog_objects_list(c, src, ~0u, &o, &n), 0);
	ck_assert_uint_eq(n, NOBJ);
	for (size_t i = 0; i < n; i++) {
		ck_assert_str_eq(o[i].key, keys[i]);
		ck_assert_uint_eq(o[i].size, i + 1);
	}
	cfs_object_info_free(o, n);
	/* the merge reads all of them back: every key unchanged */
	struct cfs_sync_result r;
	ck_assert_int_eq(cfs_catalog_objects_sync(c, src, l, NOBJ, 1, NULL, &r), 0);
	ck_assert_uint_eq(r.unchanged, NOBJ);
	ck_assert_uint_eq(r.added + r.changed + r.vanished, 0);
	free(l);
	free(keys);
	cfs_catalog_close(c);
}
END_TEST

/* cfs_catalog_plan_objects_each into a fixed array (plan_rows). */
struct plan_rows {
	struct cfs_plan_object v[4];
	size_t n;
};

static int plan_row(void *ctx, const struct cfs_plan_object *o)
{
	struct plan_rows *r = ctx;
	ck_assert_ptr_null(o->idx); /* the walk reads no index, only its length */
	if (r->n == 4)
		return -E2BIG;
	r->v[r->n++] = *o;
	return 0;
}

static size_t plan_rows_read(struct cfs_catalog *c, int64_t plan_id, struct plan_rows *r)
{
	r->n = 0;
	ck_assert_int_eq(cfs_catalog_plan_objects_each(c, plan_id, plan_row, r), 0);
	return r->n;
}

START_TEST(plan_rows_roundtrip)
{
	struct cfs_catalog *c = open_rw();
	struct cfs_plan_row p, q;
	struct plan_rows rows;
	const struct cfs_plan_object *po = rows.v;
	uint64_t *units, marked[2] = {3, 1};
	uint8_t idx[5] = {1, 2, 3, 4, 5}, taken[2] = {0x0a, 0x80};
	struct cfs_plan_object add[2] = {{.object_id = 11, .first_unit = 0, .units = 2},
					 {.object_id = 12, .first_unit = 2, .units = 3}};
	struct cfs_plan_marks m = {.pass = 0, .units = marked, .n = 2};
	int64_t src;
	size_t n;

	ck_assert_int_eq(cfs_catalog_source(c, "file:///plan/", &src), 0);
	ck_assert_int_eq(cfs_catalog_plan_get(c, src, 0, 2, CFS_PLAN_RECORDS, 42, &p), 0);
	ck_assert_int_gt(p.id, 0);
	ck_assert_uint_eq(p.seed, 42);
	ck_assert_uint_eq(p.pass, 0);
	ck_assert_ptr_null(p.taken);
	/* the same key finds the same plan; its seed is not replaced */
	ck_assert_int_eq(cfs_catalog_plan_get(c, src, 0, 2, CFS_PLAN_RECORDS, 7, &q), 0);
	ck_assert_int_eq(q.id, p.id);
	ck_assert_uint_eq(q.seed, 42);

	add[1].idx = idx;
	add[1].idx_len = sizeof(idx);
	add[1].record_bytes = 77;
	ck_assert_int_eq(cfs_catalog_plan_objects_add(c, p.id, add, 2, 5), 0);
	ck_assert_int_eq(cfs_catalog_plan_objects_add(c, p.id, add, 1, 9), -EEXIST);
	ck_assert_uint_eq(plan_rows_read(c, p.id, &rows), 2);
	ck_assert_int_eq(po[0].object_id, 11);
	ck_assert_ptr_null(po[0].idx);
	ck_assert_uint_eq(po[0].idx_len, 0);
	ck_assert_int_eq(po[0].record_bytes, -1);
	ck_assert_uint_eq(po[1].units, 3);
	ck_assert_uint_eq(po[1].idx_len, sizeof(idx));
	ck_assert_int_eq(po[1].record_bytes, 77);
	/* one object's index, on demand */
	void *blob;
	size_t blob_len;
	ck_assert_int_eq(cfs_catalog_plan_idx(c, p.id, 12, &blob, &blob_len), 0);
	ck_assert_uint_eq(blob_len, sizeof(idx));
	ck_assert_mem_eq(blob, idx, sizeof(idx));
	free(blob);
	ck_assert_int_eq(cfs_catalog_plan_idx(c, p.id, 11, &blob, &blob_len), 0);
	ck_assert_ptr_null(blob);
	ck_assert_uint_eq(blob_len, 0);
	ck_assert_int_eq(cfs_catalog_plan_idx(c, p.id, 13, &blob, &blob_len), 0);
	ck_assert_ptr_null(blob);
	ck_assert_int_eq(cfs_catalog_plan_set_record_bytes(c, p.id, 11, 5), 0);
	plan_rows_read(c, p.id, &rows);
	ck_assert_int_eq(po[0].record_bytes, 5);
	ck_assert_int_eq(cfs_catalog_plan_get(c, src, 0, 2, CFS_PLAN_RECORDS, 42, &q), 0);
	ck_assert_uint_eq(q.n_units, 5);

	m.plan_id = p.id;
	ck_assert_int_eq(cfs_catalog_plan_mark(c, &m), 0);
	ck_assert_int_eq(cfs_catalog_plan_marks_of(c, p.id, 0, &units, &n), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(units[0] + units[1], 4);
	free(units);

	q.pass = 1;
	q.cursor = 3;
	q.taken = taken;
	q.taken_len = sizeof(taken);
	ck_assert_int_eq(cfs_catalog_plan_save(c, &q), 0);
	ck_assert_int_eq(cfs_catalog_plan_marks_of(c, p.id, 0, &units, &n), 0);
	ck_assert_uint_eq(n, 0); /* the bitmap holds them now */
	free(units);
	ck_assert_int_eq(cfs_catalog_plan_get(c, src, 0, 2, CFS_PLAN_RECORDS, 42, &q), 0);
	ck_assert_uint_eq(q.n_units, 5);
	ck_assert_uint_eq(q.cursor, 3);
	ck_assert_uint_eq(q.taken_len, sizeof(taken));
	ck_assert_mem_eq(q.taken, taken, sizeof(taken));
	cfs_plan_row_free(&q);
	cfs_plan_row_free(&p);
	p.id = 9999;
	ck_assert_int_eq(cfs_catalog_plan_save(c, &p), -ENOENT);
	cfs_catalog_close(c);
}
END_TEST

/* The rows of cfs_catalog_resident_samples, collected (stop_at > 0: -ECANCELED at that many). */
struct refs {
	struct cfs_sample_ref v[8];
	size_t n, stop_at;
};

static int collect_ref(void *ctx, const struct cfs_sample_ref *r)
{
	struct refs *g = ctx;
	ck_assert_uint_lt(g->n, 8);
	g->v[g->n++] = *r;
	return g->stop_at && g->n == g->stop_at ? -ECANCELED : 0;
}

/* Inserts a TFRecord file with one sample of object obj at each offset. */
static int64_t add_object_file(struct cfs_catalog *c, int64_t obj, const uint64_t *offs, size_t n,
			       const struct cfs_plan_marks *marks)
{
	struct cfs_sample s[4];
	struct cfs_shard_new sh = {.id = cfs_catalog_alloc_id(c),
				   .kind = CFS_KIND_TFRECORD,
				   .bytes = n * 20,
				   .marks = marks};

	ck_assert_uint_le(n, 4);
	for (size_t i = 0; i < n; i++)
		s[i] = (struct cfs_sample){i * 20, 4, 0, obj, offs[i]};
	ck_assert_int_eq(cfs_catalog_shard_insert(c, &sh, s, n), 0);
	return sh.id;
}

START_TEST(plan_partial_and_cut)
{
	struct cfs_catalog *c = open_rw();
	struct cfs_listing_entry l[1] = {{"whole.tfrecord", 300, "e"}};
	uint64_t unit0 = 0, low = 100, offs1[2] = {0, 100}, offs2[1] = {200}, *offsets;
	struct cfs_plan_marks m = {.pass = 0, .units = &unit0, .n = 1};
	struct cfs_plan_object po = {.first_unit = 0, .units = 1};
	struct cfs_partial *part;
	struct cfs_plan_row p;
	int64_t src, ox, *ids;
	size_t n;

	ck_assert_int_eq(cfs_catalog_source(c, "file:///whole/", &src), 0);
	ck_assert_int_eq(cfs_catalog_objects_sync(c, src, l, 1, 0, &ox, NULL), 0);
	ck_assert_int_eq(cfs_catalog_plan_get(c, src, 0, 1, CFS_PLAN_OBJECTS, 1, &p), 0);
	po.object_id = ox;
	ck_assert_int_eq(cfs_catalog_plan_objects_add(c, p.id, &po, 1, 1), 0);

	ck_assert_int_eq(cfs_catalog_plan_partial_begin(c, p.id, 0, ox), 0);
	ck_assert_int_eq(cfs_catalog_plan_partial_low(c, p.id, &unit0, &low, 1), 0);
	ck_assert_int_eq(cfs_catalog_plan_partial_objects(c, p.id, &part, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(part[0].object_id, ox);
	ck_assert_uint_eq(part[0].low, 100);
	free(part);

	/* records resident, transfer not finished: not resident for the plan */
	int64_t f1 = add_object_file(c, ox, offs1, 2, NULL);
	ck_assert_int_eq(cfs_catalog_plan_resident_objects(c, p.id, &ids, &n), 0);
	ck_assert_uint_eq(n, 0);
	free(ids);
	ck_assert_int_eq(cfs_catalog_object_offsets(c, ox, &offsets, &n), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(offsets[1], 100);
	free(offsets);

	/* the file with its last record ends the partial row with its mark */
	m.plan_id = p.id;
	add_object_file(c, ox, offs2, 1, &m);
	ck_assert_int_eq(cfs_catalog_plan_partial_objects(c, p.id, &part, &n), 0);
	ck_assert_uint_eq(n, 0);
	free(part);
	ck_assert_int_eq(cfs_catalog_plan_resident_objects(c, p.id, &ids, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(ids[0], ox);
	free(ids);
	struct refs got = {0};
	ck_assert_int_eq(cfs_catalog_resident_samples(c, collect_ref, &got), 0);
	ck_assert_uint_eq(got.n, 3);
	for (size_t i = 0; i < got.n; i++) {
		ck_assert_int_eq(got.v[i].object_id, ox);
		ck_assert_int_eq(got.v[i].ordinal, -1); /* written without one */
		ck_assert_uint_eq(got.v[i].length, 4);
	}
	/* a sample's ordinal (its record's line in the object's index) reads back */
	struct cfs_sample so = {0, 9, 0, ox, 300, .ordinal = 7, .has_ordinal = true};
	struct cfs_shard_new sho = {
	    .id = cfs_catalog_alloc_id(c), .kind = CFS_KIND_TFRECORD, .bytes = 25};
	ck_assert_int_eq(cfs_catalog_shard_insert(c, &sho, &so, 1), 0);
	/* ... and is written into a row without one */
	got.v[0].ordinal = 2;
	ck_assert_int_eq(cfs_catalog_samples_set_ordinals(c, got.v, 1), 0);
	int64_t set_in = got.v[0].shard_id;
	uint64_t set_at = got.v[0].offset;
	got = (struct refs){0};
	ck_assert_int_eq(cfs_catalog_resident_samples(c, collect_ref, &got), 0);
	ck_assert_uint_eq(got.n, 4);
	int seen = 0;
	for (size_t i = 0; i < got.n; i++) {
		if (got.v[i].object_offset == 300) {
			ck_assert_int_eq(got.v[i].shard_id, sho.id);
			ck_assert_uint_eq(got.v[i].offset, 0);
			ck_assert_int_eq(got.v[i].ordinal, 7);
			ck_assert_uint_eq(got.v[i].length, 9);
			seen++;
		} else if (got.v[i].shard_id == set_in && got.v[i].offset == set_at) {
			ck_assert_int_eq(got.v[i].ordinal, 2);
			seen++;
		} else {
			ck_assert_int_eq(got.v[i].ordinal, -1);
		}
	}
	ck_assert_int_eq(seen, 2);
	/* the walk stops at the callback's nonzero return */
	got = (struct refs){.stop_at = 2};
	ck_assert_int_eq(cfs_catalog_resident_samples(c, collect_ref, &got), -ECANCELED);
	ck_assert_uint_eq(got.n, 2);

	/* a file of it leaves: the object is cut until its next transfer begins */
	ck_assert_int_eq(cfs_catalog_shards_evict(c, &f1, 1, 1), 0);
	ck_assert_int_eq(cfs_catalog_plan_cut_objects(c, p.id, &ids, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(ids[0], ox);
	free(ids);
	ck_assert_int_eq(cfs_catalog_plan_partial_begin(c, p.id, 0, ox), 0);
	ck_assert_int_eq(cfs_catalog_plan_cut_objects(c, p.id, &ids, &n), 0);
	ck_assert_uint_eq(n, 0);
	free(ids);
	cfs_plan_row_free(&p);
	cfs_catalog_close(c);
}
END_TEST

START_TEST(corrupt_and_drop_delete_contents)
{
	struct cfs_catalog *c = open_rw();
	int64_t a = add_shard(c, 0, 3, 10), b = add_shard(c, 0, 2, 10);
	struct cfs_shard_info one;
	struct cfs_sample *smp;
	size_t n;

	ck_assert_int_eq(cfs_catalog_shard_withdraw(c, a, CFS_WITHDRAW_CORRUPT), 0);
	ck_assert_int_eq(cfs_catalog_shard_get(c, a, &one), 0);
	ck_assert_int_eq(one.state, CFS_SHARD_EVICTING);
	ck_assert_int_eq(cfs_catalog_samples_of(c, a, &smp, &n), 0);
	ck_assert_uint_eq(n, 0);
	free(smp);
	ck_assert_int_eq(cfs_catalog_shard_withdraw(c, a, CFS_WITHDRAW_CORRUPT), -ENOENT);
	ck_assert_int_eq(cfs_catalog_shards_drop(c, &b, 1), 0);
	ck_assert_int_eq(cfs_catalog_shard_get(c, b, &one), -ENOENT);
	cfs_catalog_close(c);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM samples"), 0);
	ck_assert_int_eq(raw_int("SELECT count(*) FROM shard_objects"), 0);
	/* a corrupt file is not a victim: no eviction counted */
	ck_assert_int_eq(raw_int("SELECT count(*) FROM epochs WHERE evicted_records > 0"), 0);
}
END_TEST

START_TEST(served_counted_once)
{
	struct cfs_catalog *c = open_rw();
	/* two files holding the same three records (object 7, offsets 0, 100, 200) */
	int64_t a = add_shard(c, 0, 3, 1), b = add_shard(c, 0, 3, 1);
	struct cfs_shard_stat_delta da = {a, 1, 1, 10, 5}, db = {b, 1, 1, 10, 6};
	struct cfs_epoch_row *ep;
	size_t n;

	ck_assert_int_eq(cfs_catalog_shards_add_stats(c, &da, 1, 2), 0);
	ck_assert_int_eq(cfs_catalog_shards_add_stats(c, &db, 1, 2), 0);
	ck_assert_int_eq(cfs_catalog_shards_add_stats(c, &da, 1, 2), 0);
	ck_assert_int_eq(cfs_catalog_epochs_list(c, &ep, &n), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(ep[1].number, 2);
	ck_assert_uint_eq(ep[1].served_records, 3);
	ck_assert_uint_eq(ep[1].read_files, 3);
	ck_assert_uint_eq(ep[1].read_bytes, 30);
	free(ep);
	cfs_catalog_close(c);
}
END_TEST

/*
 * The debug checks are live: a trigger that puts a sample back on a file
 * whose row GONE deleted breaks C1, and shards_gone must abort; a counter delta that is
 * negative as an SQL integer breaks C3.  Registered only where asserts are
 * compiled in and the runner forks.
 */
START_TEST(c1_violation_aborts)
{
	struct cfs_catalog *c = open_rw();
	int64_t a = add_shard(c, 0, 1, 1);

	cfs_catalog_close(c);
	raw_sql("CREATE TRIGGER orphan AFTER DELETE ON shards "
		"BEGIN INSERT INTO samples VALUES(old.id, 999, 1, 0, 0, 0, 0, NULL); END");
	c = open_rw();
	ck_assert_int_eq(cfs_catalog_shards_evict(c, &a, 1, 0), 0);
	cfs_catalog_shards_gone(c, &a, 1);
	ck_abort_msg("shards_gone left a sample of a GONE file without aborting");
}
END_TEST

START_TEST(c3_negative_delta_aborts)
{
	struct cfs_catalog *c = open_rw();
	int64_t a = add_shard(c, 0, 1, 1);
	struct cfs_shard_stat_delta d = {a, 1, 0, UINT64_MAX, 1};

	cfs_catalog_shards_add_stats(c, &d, 1, 0);
	ck_abort_msg("a counter delta of 2^64 - 1 did not abort");
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
	    {"new_file_gets_current_schema", new_file_gets_current_schema},
	    {"migrates_version_2", migrates_version_2},
	    {"migrates_version_9_gone_rows", migrates_version_9_gone_rows},
	    {"evict_many_in_batches", evict_many_in_batches},
	    {"migrates_version_10_raw_crc", migrates_version_10_raw_crc},
	    {"gone_deletes_rows_keeps_ids", gone_deletes_rows_keeps_ids},
	    {"journal_is_wal", journal_is_wal},
	    {"newer_schema_refused", newer_schema_refused},
	    {"not_a_database_refused_nothing_deleted", not_a_database_refused_nothing_deleted},
	    {"readonly_open", readonly_open},
	    {"shard_and_samples_roundtrip", shard_and_samples_roundtrip},
	    {"insert_is_one_transaction", insert_is_one_transaction},
	    {"resident_row_follows_changes", resident_row_follows_changes},
	    {"ids_never_reused", ids_never_reused},
	    {"evict_then_gone", evict_then_gone},
	    {"stats_batched", stats_batched},
	    {"raw_names_unique", raw_names_unique},
	    {"objects_sync_merges_listings", objects_sync_merges_listings},
	    {"objects_sync_etags_only_where_both_have_one",
	     objects_sync_etags_only_where_both_have_one},
	    {"objects_sync_walks_in_key_order", objects_sync_walks_in_key_order},
	    {"objects_sync_sorted_reads_in_place", objects_sync_sorted_reads_in_place},
	    {"stale_objects_name_their_shards", stale_objects_name_their_shards},
	    {"epochs_begin_and_list", epochs_begin_and_list},
	    {"explicit_transaction_rolls_back", explicit_transaction_rolls_back},
	    {"lists_grow_past_first_block", lists_grow_past_first_block},
	    {"plan_rows_roundtrip", plan_rows_roundtrip},
	    {"plan_partial_and_cut", plan_partial_and_cut},
	    {"corrupt_and_drop_delete_contents", corrupt_and_drop_delete_contents},
	    {"served_counted_once", served_counted_once},
	};
	struct {
		const char *name;
		const TTest *fn;
	} aborts[] = {
	    {"c1_violation_aborts", c1_violation_aborts},
	    {"c3_negative_delta_aborts", c3_negative_delta_aborts},
	};
	const char *fork_env = getenv("CK_FORK");
	bool forks = !fork_env || strcmp(fork_env, "no") != 0;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		TCase *tc = tcase_create(cases[i].name);
		tcase_add_checked_fixture(tc, setup, teardown);
		tcase_add_test(tc, cases[i].fn);
		suite_add_tcase(s, tc);
	}
#ifndef NDEBUG
	for (size_t i = 0; forks && i < sizeof(aborts) / sizeof(aborts[0]); i++) {
		TCase *tc = tcase_create(aborts[i].name);
		tcase_add_checked_fixture(tc, setup, teardown);
		tcase_add_test_raise_signal(tc, aborts[i].fn, SIGABRT);
		suite_add_tcase(s, tc);
	}
#else
	(void)aborts;
	(void)forks;
#endif
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
