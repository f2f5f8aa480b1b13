/*
 * catalog.c - the SQLite catalog of a cache directory; the only file of
 * rollcache that speaks SQL.
 *
 * DESIGN NOTE
 *
 * Terms.
 *   FILE     a local file of the cache: a TFRecord shard (shards/<id>.tfrecord)
 *            or a raw object (objects/<id>); a row of table `shards`.
 *   SAMPLE   one record of a FILE; a row of `samples`, keyed (shard_id, offset).
 *   SOURCE   a remote dataset URL; a row of `sources`.
 *   OBJECT   one version (etag, size) of one remote key of a SOURCE.
 *   FILE OBJECTS  the distinct OBJECTs a FILE holds samples of; rows of
 *            `shard_objects`, the reverse index that finds the FILEs of a
 *            STALE object without an index entry per SAMPLE.
 *   EPOCH    a row of `epochs`: schedule entry in force and counters.
 *   ID       a FILE id; ids only grow (alloc_id) and are never reused, so
 *            a path never names different bytes.
 *
 * Invariants of shared/DESIGN.md this file upholds.
 *   DESIGN 1  ids are never reused: next_id starts above every id ever in
 *             the table (GONE rows are kept) and every id seen on disk.
 *   DESIGN 2  the last step of sealing: a FILE row and all its SAMPLE rows
 *             are committed in one transaction (cfs_catalog_shard_insert),
 *             after the caller renamed and fsynced the file.
 *   DESIGN 4  the catalog is what the budget is rebuilt from at start
 *             (reconcile.c sums the bytes of the SEALED rows whose files
 *             survive; EVICTING ones are finished then).
 *   DESIGN 6  reconcile.c reads every FILE row in one query
 *             (shards_list) and drops rows in one transaction (shards_drop).
 *   DESIGN 7  keys are stored as data only; display names of raw objects
 *             are unique among non-GONE rows (partial unique index).
 * Local ones.
 *   C1  every SAMPLE row, and every shard_objects row, belongs to a FILE
 *       row that is not GONE (shards_gone and shards_drop delete them in
 *       the same transaction that changes the FILE row).
 *   C2  per (source, key) at most one OBJECT row is not STALE (partial
 *       unique index objects_current).
 *   C3  epochs counters only grow, each in the transaction of the change
 *       it counts (insert -> admitted, evict -> evicted, stats -> read).
 *
 * States of a FILE and the function that moves it.
 *
 *      (tmp/ file, no row)
 *           |  cfs_catalog_shard_insert          (shard_writer.c seal)
 *           v
 *        SEALED --------------------------.
 *           |  cfs_catalog_shards_evict     |  cfs_catalog_shards_drop
 *           |  cfs_catalog_shard_corrupt    |
 *           v                               |  (reconcile: file missing
 *        EVICTING -------------------------|   or wrong size; row deleted)
 *           |  cfs_catalog_shards_gone      |
 *           v                               v
 *         GONE (row kept, samples deleted)  (no row)
 *
 * Schema versions.  PRAGMA user_version holds the schema version.  The
 * array `migrations` below lists, in order, the SQL that takes version
 * i to i + 1; opening runs the missing ones in one transaction and records
 * each in table `migrations`.  A version above CFS_SCHEMA_VERSION is
 * refused, so an old binary never writes a newer catalog.
 *
 * Statements.  Every statement is prepared once (lazily) with
 * SQLITE_PREPARE_PERSISTENT and cached in c->stmt[]; bulk operations run
 * in one transaction, nested calls as savepoints.
 *
 * Locking.  c->mu (recursive) protects the sqlite3 handle, c->stmt[],
 * c->depth and c->explicit_txn.  It is held for a whole call, or from
 * cfs_catalog_begin() to commit/rollback.  Lock order in cachefs (written
 * once, here): catalog mu, then budget mu.  The budget's mutex is a leaf
 * (budget.c calls nothing while holding it); a caller inside
 * cfs_catalog_begin() may touch the budget (cfs_store_evict does), never
 * the reverse.  No function of this file calls the budget.  c->next_id is
 * an atomic and needs no lock.
 */
#include "cachefs/catalog.h"

#include "common/clock.h"
#include "common/fault.h"
#include "common/log.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- schema ------------------------------------------------------------ */

static const char *const migrations[] = {
    /* 0 -> 1 */
    "CREATE TABLE migrations(\n"
    "  version INTEGER PRIMARY KEY,\n"
    "  applied_ms INTEGER NOT NULL);\n"
    "CREATE TABLE sources(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  url TEXT NOT NULL UNIQUE);\n"
    "CREATE TABLE objects(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  source_id INTEGER NOT NULL REFERENCES sources(id),\n"
    "  key TEXT NOT NULL,\n"
    "  size INTEGER NOT NULL,\n"
    "  etag TEXT,\n"
    "  listed_epoch INTEGER NOT NULL,\n"
    "  state INTEGER NOT NULL,\n"
    "  fetches INTEGER NOT NULL DEFAULT 0,\n"
    "  last_fetched_epoch INTEGER NOT NULL DEFAULT -1);\n"
    "CREATE UNIQUE INDEX objects_current ON objects(source_id, key) WHERE state != 2;\n"
    "CREATE TABLE shards(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  kind INTEGER NOT NULL,\n"
    "  state INTEGER NOT NULL,\n"
    "  bytes INTEGER NOT NULL,\n"
    "  records INTEGER NOT NULL,\n"
    "  created_epoch INTEGER NOT NULL,\n"
    "  reads INTEGER NOT NULL DEFAULT 0,\n"
    "  last_read_ms INTEGER NOT NULL DEFAULT 0,\n"
    "  full_reads INTEGER NOT NULL DEFAULT 0,\n"
    "  object_id INTEGER NOT NULL DEFAULT 0,\n"
    "  name TEXT,\n"
    "  evicted_epoch INTEGER NOT NULL DEFAULT -1);\n"
    "CREATE UNIQUE INDEX shards_name ON shards(name) WHERE state != 2 AND name IS NOT NULL;\n"
    "CREATE TABLE samples(\n"
    "  shard_id INTEGER NOT NULL,\n"
    "  offset INTEGER NOT NULL,\n"
    "  length INTEGER NOT NULL,\n"
    "  crc INTEGER NOT NULL,\n"
    "  object_id INTEGER NOT NULL,\n"
    "  object_offset INTEGER NOT NULL,\n"
    "  admitted_epoch INTEGER NOT NULL,\n"
    "  PRIMARY KEY(shard_id, offset)) WITHOUT ROWID;\n"
    "CREATE TABLE shard_objects(\n"
    "  shard_id INTEGER NOT NULL,\n"
    "  object_id INTEGER NOT NULL,\n"
    "  PRIMARY KEY(shard_id, object_id)) WITHOUT ROWID;\n"
    "CREATE INDEX shard_objects_object ON shard_objects(object_id);\n"
    "CREATE TABLE epochs(\n"
    "  number INTEGER PRIMARY KEY,\n"
    "  started_ms INTEGER NOT NULL DEFAULT 0,\n"
    "  admitted_bytes INTEGER NOT NULL DEFAULT 0,\n"
    "  admitted_records INTEGER NOT NULL DEFAULT 0,\n"
    "  evicted_bytes INTEGER NOT NULL DEFAULT 0,\n"
    "  evicted_records INTEGER NOT NULL DEFAULT 0,\n"
    "  read_bytes INTEGER NOT NULL DEFAULT 0,\n"
    "  limit_bytes INTEGER NOT NULL DEFAULT 0,\n"
    "  admit_bytes INTEGER NOT NULL DEFAULT 0,\n"
    "  policy TEXT NOT NULL DEFAULT '',\n"
    "  min_uses INTEGER NOT NULL DEFAULT 0,\n"
    "  resident_files INTEGER NOT NULL DEFAULT 0,\n"
    "  resident_bytes INTEGER NOT NULL DEFAULT 0,\n"
    "  resident_records INTEGER NOT NULL DEFAULT 0);\n",
    /* 1 -> 2: the sampling plan (DESIGN "Sampling"; docs/catalog.md) */
    "CREATE TABLE plans(\n"
    "  id INTEGER PRIMARY KEY,\n"
    "  source_id INTEGER NOT NULL REFERENCES sources(id),\n"
    "  rank INTEGER NOT NULL,\n"
    "  world_size INTEGER NOT NULL,\n"
    "  unit_kind INTEGER NOT NULL,\n"
    "  seed INTEGER NOT NULL,\n"
    "  pass INTEGER NOT NULL DEFAULT 0,\n"
    "  gen INTEGER NOT NULL DEFAULT 0,\n"
    "  n_units INTEGER NOT NULL DEFAULT 0,\n"
    "  cursor INTEGER NOT NULL DEFAULT 0,\n"
    "  taken BLOB,\n"
    "  UNIQUE(source_id, rank, world_size, unit_kind));\n"
    "CREATE TABLE plan_objects(\n"
    "  plan_id INTEGER NOT NULL,\n"
    "  object_id INTEGER NOT NULL,\n"
    "  first_unit INTEGER NOT NULL,\n"
    "  units INTEGER NOT NULL,\n"
    "  idx BLOB,\n"
    "  PRIMARY KEY(plan_id, object_id)) WITHOUT ROWID;\n"
    "CREATE TABLE plan_marks(\n"
    "  plan_id INTEGER NOT NULL,\n"
    "  pass INTEGER NOT NULL,\n"
    "  unit INTEGER NOT NULL,\n"
    "  PRIMARY KEY(plan_id, pass, unit)) WITHOUT ROWID;\n",
    /* 2 -> 3: records served (cfs_catalog_shards_add_stats; docs/catalog.md) */
    "CREATE TABLE served(\n"
    "  object_id INTEGER NOT NULL,\n"
    "  object_offset INTEGER NOT NULL,\n"
    "  PRIMARY KEY(object_id, object_offset)) WITHOUT ROWID;\n"
    "ALTER TABLE epochs ADD COLUMN served_records INTEGER NOT NULL DEFAULT 0;\n"
    "ALTER TABLE epochs ADD COLUMN read_files INTEGER NOT NULL DEFAULT 0;\n",
    /* 3 -> 4: whole objects not whole in the cache (docs/catalog.md, version 4) */
    "CREATE TABLE plan_partial(\n"
    "  plan_id INTEGER NOT NULL,\n"
    "  unit INTEGER NOT NULL,\n"
    "  object_id INTEGER NOT NULL,\n"
    "  low INTEGER NOT NULL DEFAULT 0,\n"
    "  PRIMARY KEY(plan_id, unit)) WITHOUT ROWID;\n"
    "CREATE TABLE plan_cut(\n"
    "  plan_id INTEGER NOT NULL,\n"
    "  object_id INTEGER NOT NULL,\n"
    "  PRIMARY KEY(plan_id, object_id)) WITHOUT ROWID;\n",
};
_Static_assert(sizeof(migrations) / sizeof(migrations[0]) == CFS_SCHEMA_VERSION,
	       "one migration per schema version");

/* ---- cached statements ------------------------------------------------- */

enum stmt_id {
	S_SOURCE_GET,
	S_SOURCE_ADD,
	S_OBJ_CURRENT,
	S_OBJ_ADD,
	S_OBJ_SEEN,
	S_OBJ_STALE,
	S_OBJ_VANISH,
	S_OBJ_LIST,
	S_OBJ_FETCHED,
	S_SHARD_ADD,
	S_SAMPLE_ADD,
	S_SHOBJ_ADD,
	S_SHOBJ_DEL,
	S_EPOCH_ADMIT,
	S_SHARD_LIST,
	S_SHARD_GET,
	S_SHARD_STATS,
	S_EPOCH_READ,
	S_SHARD_EVICT,
	S_EPOCH_EVICT,
	S_SHARD_GONE,
	S_SAMPLES_DEL,
	S_SHARD_DEL,
	S_STALE_SHARDS,
	S_SAMPLES_OF,
	S_RESIDENT,
	S_EPOCH_BEGIN,
	S_EPOCH_LIST,
	S_EPOCH_CURRENT,
	S_MAX_ID,
	S_PLAN_GET,
	S_PLAN_ADD,
	S_PLAN_SAVE,
	S_MARKS_CLEAR,
	S_MARK_ADD,
	S_MARKS_OF,
	S_POBJ_LIST,
	S_POBJ_ADD,
	S_RES_OBJECTS,
	S_RES_SAMPLES,
	S_PARTIAL_ADD,
	S_PARTIAL_DEL,
	S_PARTIAL_CUT,
	S_CUT_DEL,
	S_CUT_LIST,
	S_RES_PARTIAL,
	S_PARTIAL_LOW,
	S_OBJ_OFFSETS,
	S_SERVED_ADD,
	S_EPOCH_SERVED,
	S__COUNT
};

static const char *const stmt_sql[S__COUNT] = {
    [S_SOURCE_GET] = "SELECT id FROM sources WHERE url = ?1",
    [S_SOURCE_ADD] = "INSERT INTO sources(url) VALUES(?1)",
    [S_OBJ_CURRENT] = "SELECT id, key, size, etag, state FROM objects "
		      "WHERE source_id = ?1 AND state != 2",
    [S_OBJ_ADD] = "INSERT INTO objects(source_id, key, size, etag, listed_epoch, state) "
		  "VALUES(?1, ?2, ?3, ?4, ?5, 0)",
    [S_OBJ_SEEN] = "UPDATE objects SET listed_epoch = ?2, state = 0 WHERE id = ?1",
    [S_OBJ_STALE] = "UPDATE objects SET state = 2 WHERE id = ?1",
    [S_OBJ_VANISH] = "UPDATE objects SET state = 1 WHERE id = ?1",
    [S_OBJ_LIST] = "SELECT id, source_id, key, etag, size, listed_epoch, state, fetches, "
		   "last_fetched_epoch FROM objects "
		   "WHERE source_id = ?1 AND ((1 << state) & ?2) != 0 ORDER BY id",
    [S_OBJ_FETCHED] = "UPDATE objects SET fetches = fetches + 1, last_fetched_epoch = ?2 "
		      "WHERE id = ?1",
    [S_SHARD_ADD] = "INSERT INTO shards(id, kind, state, bytes, records, created_epoch, "
		    "object_id, name) VALUES(?1, ?2, 0, ?3, ?4, ?5, ?6, ?7)",
    [S_SAMPLE_ADD] = "INSERT INTO samples(shard_id, offset, length, crc, object_id, "
		     "object_offset, admitted_epoch) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    [S_SHOBJ_ADD] = "INSERT OR IGNORE INTO shard_objects(shard_id, object_id) VALUES(?1, ?2)",
    [S_SHOBJ_DEL] = "DELETE FROM shard_objects WHERE shard_id = ?1",
    [S_EPOCH_ADMIT] = "INSERT INTO epochs(number, admitted_bytes, admitted_records) "
		      "VALUES(?1, ?2, ?3) ON CONFLICT(number) DO UPDATE SET "
		      "admitted_bytes = admitted_bytes + excluded.admitted_bytes, "
		      "admitted_records = admitted_records + excluded.admitted_records",
    [S_SHARD_LIST] = "SELECT id, kind, state, bytes, records, created_epoch, reads, "
		     "last_read_ms, full_reads, object_id, name, evicted_epoch FROM shards "
		     "WHERE ((1 << state) & ?1) != 0 ORDER BY id",
    [S_SHARD_GET] = "SELECT id, kind, state, bytes, records, created_epoch, reads, "
		    "last_read_ms, full_reads, object_id, name, evicted_epoch FROM shards "
		    "WHERE id = ?1",
    [S_SHARD_STATS] = "UPDATE shards SET reads = reads + ?2, full_reads = full_reads + ?3, "
		      "last_read_ms = max(last_read_ms, ?4) WHERE id = ?1 RETURNING full_reads",
    [S_EPOCH_READ] = "INSERT INTO epochs(number, read_bytes, read_files) VALUES(?1, ?2, ?3) "
		     "ON CONFLICT(number) DO UPDATE SET "
		     "read_bytes = read_bytes + excluded.read_bytes, "
		     "read_files = read_files + excluded.read_files",
    [S_SHARD_EVICT] = "UPDATE shards SET state = 1, evicted_epoch = ?2 "
		      "WHERE id = ?1 AND state = 0 RETURNING bytes, records",
    [S_EPOCH_EVICT] = "INSERT INTO epochs(number, evicted_bytes, evicted_records) "
		      "VALUES(?1, ?2, ?3) ON CONFLICT(number) DO UPDATE SET "
		      "evicted_bytes = evicted_bytes + excluded.evicted_bytes, "
		      "evicted_records = evicted_records + excluded.evicted_records",
    [S_SHARD_GONE] = "UPDATE shards SET state = 2 WHERE id = ?1 AND state != 2",
    [S_SAMPLES_DEL] = "DELETE FROM samples WHERE shard_id = ?1",
    [S_SHARD_DEL] = "DELETE FROM shards WHERE id = ?1",
    [S_STALE_SHARDS] = "SELECT DISTINCT so.shard_id FROM objects o "
		       "JOIN shard_objects so ON so.object_id = o.id "
		       "JOIN shards f ON f.id = so.shard_id "
		       "WHERE o.state = 2 AND f.state = 0 ORDER BY so.shard_id",
    [S_SAMPLES_OF] = "SELECT offset, length, crc, object_id, object_offset FROM samples "
		     "WHERE shard_id = ?1 ORDER BY offset",
    [S_RESIDENT] = "SELECT count(*), coalesce(sum(bytes), 0), coalesce(sum(records), 0) "
		   "FROM shards WHERE state = 0",
    [S_EPOCH_BEGIN] = "INSERT INTO epochs(number, started_ms, limit_bytes, admit_bytes, "
		      "policy, min_uses, resident_files, resident_bytes, resident_records) "
		      "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) "
		      "ON CONFLICT(number) DO UPDATE SET started_ms = excluded.started_ms, "
		      "limit_bytes = excluded.limit_bytes, admit_bytes = excluded.admit_bytes, "
		      "policy = excluded.policy, min_uses = excluded.min_uses, "
		      "resident_files = excluded.resident_files, "
		      "resident_bytes = excluded.resident_bytes, "
		      "resident_records = excluded.resident_records",
    [S_EPOCH_LIST] = "SELECT number, started_ms, admitted_bytes, admitted_records, "
		     "evicted_bytes, evicted_records, read_bytes, limit_bytes, admit_bytes, "
		     "policy, min_uses, resident_files, resident_bytes, resident_records, "
		     "served_records, read_files FROM epochs ORDER BY number",
    [S_EPOCH_CURRENT] = "SELECT max(number) FROM epochs WHERE started_ms > 0",
    [S_MAX_ID] = "SELECT coalesce(max(id), 0) FROM shards",
    [S_PLAN_GET] = "SELECT id, seed, pass, gen, n_units, cursor, taken FROM plans "
		   "WHERE source_id = ?1 AND rank = ?2 AND world_size = ?3 AND unit_kind = ?4",
    [S_PLAN_ADD] = "INSERT INTO plans(source_id, rank, world_size, unit_kind, seed) "
		   "VALUES(?1, ?2, ?3, ?4, ?5)",
    [S_PLAN_SAVE] = "UPDATE plans SET pass = ?2, gen = ?3, n_units = ?4, cursor = ?5, "
		    "taken = ?6 WHERE id = ?1",
    [S_MARKS_CLEAR] = "DELETE FROM plan_marks WHERE plan_id = ?1",
    [S_MARK_ADD] = "INSERT OR IGNORE INTO plan_marks(plan_id, pass, unit) VALUES(?1, ?2, ?3)",
    [S_MARKS_OF] = "SELECT unit FROM plan_marks WHERE plan_id = ?1 AND pass = ?2",
    [S_POBJ_LIST] = "SELECT object_id, first_unit, units, idx FROM plan_objects "
		    "WHERE plan_id = ?1 ORDER BY first_unit",
    [S_POBJ_ADD] = "INSERT INTO plan_objects(plan_id, object_id, first_unit, units, idx) "
		   "VALUES(?1, ?2, ?3, ?4, ?5)",
    [S_RES_OBJECTS] = "SELECT DISTINCT so.object_id FROM shard_objects so "
		      "JOIN plan_objects po ON po.object_id = so.object_id AND po.plan_id = ?1 "
		      "WHERE NOT EXISTS (SELECT 1 FROM plan_partial pp "
		      "WHERE pp.plan_id = ?1 AND pp.unit = po.first_unit)",
    [S_PARTIAL_ADD] = "INSERT OR IGNORE INTO plan_partial(plan_id, unit, object_id) "
		      "VALUES(?1, ?2, ?3)",
    [S_PARTIAL_LOW] = "UPDATE plan_partial SET low = ?3 WHERE plan_id = ?1 AND unit = ?2",
    [S_PARTIAL_DEL] = "DELETE FROM plan_partial WHERE plan_id = ?1 AND unit = ?2",
    [S_PARTIAL_CUT] = "INSERT OR IGNORE INTO plan_cut(plan_id, object_id) "
		      "SELECT po.plan_id, po.object_id FROM shard_objects so "
		      "JOIN plan_objects po ON po.plan_id IN (SELECT id FROM plans) "
		      "AND po.object_id = so.object_id AND po.idx IS NULL "
		      "JOIN shards f ON f.id = so.shard_id AND f.kind = 0 "
		      "WHERE so.shard_id = ?1",
    [S_CUT_DEL] = "DELETE FROM plan_cut WHERE plan_id = ?1 AND object_id = ?2",
    [S_CUT_LIST] = "SELECT object_id FROM plan_cut WHERE plan_id = ?1",
    [S_RES_PARTIAL] = "SELECT object_id, low FROM plan_partial WHERE plan_id = ?1",
    [S_OBJ_OFFSETS] = "SELECT s.object_offset FROM shard_objects so "
		      "JOIN samples s ON s.shard_id = so.shard_id AND s.object_id = ?1 "
		      "WHERE so.object_id = ?1 ORDER BY s.object_offset",
    [S_RES_SAMPLES] = "SELECT s.object_id, s.object_offset FROM samples s "
		      "JOIN plan_objects po ON po.object_id = s.object_id AND po.plan_id = ?1",
    [S_SERVED_ADD] = "INSERT OR IGNORE INTO served(object_id, object_offset) "
		     "SELECT object_id, object_offset FROM samples WHERE shard_id = ?1",
    [S_EPOCH_SERVED] = "INSERT INTO epochs(number, served_records) VALUES(?1, ?2) "
		       "ON CONFLICT(number) DO UPDATE SET "
		       "served_records = served_records + excluded.served_records",
};

struct cfs_catalog {
	pthread_mutex_t mu;	      /* recursive; see the design note */
	sqlite3 *db;		      /* protected by mu */
	sqlite3_stmt *stmt[S__COUNT]; /* protected by mu; NULL until first use */
	int depth;		      /* protected by mu: 0, or open transaction levels */
	bool explicit_txn;	      /* protected by mu: cfs_catalog_begin() is open */
	bool read_txn;		      /* protected by mu: cfs_catalog_read_begin() is open */
	bool readonly;		      /* set at open */
	int found_version;	      /* set at open */
	char *path;		      /* set at open */
	_Atomic int64_t next_id;      /* atomic */
};

/* ---- helpers ----------------------------------------------------------- */

/* Maps an SQLite result code to a negative errno. */
static int sqlerr(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_OK:
	case SQLITE_ROW:
	case SQLITE_DONE:
		return 0;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_READONLY:
		return -EROFS;
	case SQLITE_CONSTRAINT:
		return -EEXIST;
	case SQLITE_NOTADB:
	case SQLITE_CORRUPT:
		return -EBADMSG;
	case SQLITE_CANTOPEN:
		return -ENOENT;
	case SQLITE_PERM:
	case SQLITE_AUTH:
		return -EACCES;
	default:
		return -EIO;
	}
}

/* Logs the handle's last error for `what`; returns sqlerr(rc). mu held. */
static int fail(struct cfs_catalog *c, int rc, const char *what)
{
	cmn_log(CMN_LOG_ERROR, "catalog %s: %s: %s", c->path, what, sqlite3_errmsg(c->db));
	return sqlerr(rc);
}

/* The cached statement `id`, reset and unbound; NULL on error. mu held. */
static sqlite3_stmt *stmt(struct cfs_catalog *c, enum stmt_id id)
{
	sqlite3_stmt *st = c->stmt[id];

	if (!st) {
		int rc = sqlite3_prepare_v3(c->db, stmt_sql[id], -1, SQLITE_PREPARE_PERSISTENT, &st,
					    NULL);
		if (rc != SQLITE_OK) {
			fail(c, rc, "prepare");
			return NULL;
		}
		c->stmt[id] = st;
		return st;
	}
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return st;
}

/* Runs a prepared statement to completion (no rows expected).  mu held. */
static int run(struct cfs_catalog *c, sqlite3_stmt *st, const char *what)
{
	int rc = sqlite3_step(st);

	if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
		int e = (rc & 0xff) == SQLITE_CONSTRAINT ? sqlerr(rc) : fail(c, rc, what);
		sqlite3_reset(st);
		return e;
	}
	sqlite3_reset(st);
	return 0;
}

/* Runs literal SQL (pragmas, transaction control).  mu held. */
static int exec(struct cfs_catalog *c, const char *sql)
{
	char *msg = NULL;
	int rc = sqlite3_exec(c->db, sql, NULL, NULL, &msg);

	if (rc != SQLITE_OK) {
		cmn_log(CMN_LOG_ERROR, "catalog %s: %s: %s", c->path, sql,
			msg ? msg : sqlite3_errstr(rc));
		sqlite3_free(msg);
		return sqlerr(rc);
	}
	return 0;
}

static void lock(struct cfs_catalog *c)
{
	pthread_mutex_lock(&c->mu);
}

static void unlock(struct cfs_catalog *c)
{
	pthread_mutex_unlock(&c->mu);
}

/*
 * Opens one transaction level: BEGIN IMMEDIATE at depth 0, a savepoint
 * inside an open transaction.  Takes mu (kept until txn_end).
 */
static int txn_begin(struct cfs_catalog *c)
{
	int rc;

	lock(c);
	rc = exec(c, c->depth == 0 ? "BEGIN IMMEDIATE" : "SAVEPOINT cfs_sp");
	if (rc < 0) {
		unlock(c);
		return rc;
	}
	c->depth++;
	return 0;
}

/* Closes the level txn_begin opened: commit when ok, else roll it back. */
static int txn_end(struct cfs_catalog *c, int ok)
{
	int rc = 0;

	c->depth--;
	if (c->depth == 0) {
		if (ok == 0) {
			cmn_fault("in_commit");
			rc = exec(c, "COMMIT");
			if (rc < 0)
				exec(c, "ROLLBACK");
		} else {
			exec(c, "ROLLBACK");
		}
	} else {
		if (ok == 0) {
			rc = exec(c, "RELEASE cfs_sp");
		} else {
			exec(c, "ROLLBACK TO cfs_sp");
			exec(c, "RELEASE cfs_sp");
		}
	}
	unlock(c);
	return ok < 0 ? ok : rc;
}

static void note_id(struct cfs_catalog *c, int64_t id)
{
	int64_t cur = atomic_load(&c->next_id);
	while (id >= cur && !atomic_compare_exchange_weak(&c->next_id, &cur, id + 1))
		;
}

/* ---- open / close ------------------------------------------------------ */

static int read_user_version(struct cfs_catalog *c, int *v)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(c->db, "PRAGMA user_version", -1, &st, NULL);

	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*v = sqlite3_column_int(st, 0);
		rc = SQLITE_OK;
	}
	sqlite3_finalize(st);
	return rc;
}

/* Runs the missing migrations in one transaction.  mu held or not shared yet. */
static int migrate(struct cfs_catalog *c, char *err, size_t errlen)
{
	int v = 0, rc;
	char sql[128];

	rc = exec(c, "BEGIN IMMEDIATE");
	if (rc < 0)
		goto fail;
	/* re-read under the write lock: another opener may have migrated */
	if (read_user_version(c, &v) != SQLITE_OK) {
		rc = -EIO;
		goto rollback;
	}
	for (int i = v; i < CFS_SCHEMA_VERSION; i++) {
		rc = exec(c, migrations[i]);
		if (rc < 0)
			goto rollback;
		snprintf(sql, sizeof(sql),
			 "INSERT INTO migrations(version, applied_ms) VALUES(%d, %" PRIu64 ")",
			 i + 1, cmn_wall_ms());
		rc = exec(c, sql);
		if (rc < 0)
			goto rollback;
	}
	snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", CFS_SCHEMA_VERSION);
	rc = exec(c, sql);
	if (rc < 0)
		goto rollback;
	rc = exec(c, "COMMIT");
	if (rc < 0)
		goto rollback;
	return 0;

rollback:
	exec(c, "ROLLBACK");
fail:
	snprintf(err, errlen,
		 "%s: cannot create or migrate the catalog schema (%s): check the disk "
		 "and permissions of the cache directory",
		 c->path, sqlite3_errmsg(c->db));
	return rc;
}

int cfs_catalog_open(struct cfs_catalog **out, const char *path, unsigned flags, char *err,
		     size_t errlen)
{
	struct cfs_catalog *c = calloc(1, sizeof(*c));
	pthread_mutexattr_t ma;
	int rc, v = 0, oflags;

	if (!c) {
		snprintf(err, errlen, "%s: out of memory", path);
		return -ENOMEM;
	}
	c->path = strdup(path);
	if (!c->path) {
		free(c);
		snprintf(err, errlen, "%s: out of memory", path);
		return -ENOMEM;
	}
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&c->mu, &ma);
	pthread_mutexattr_destroy(&ma);
	c->readonly = (flags & CFS_CATALOG_READONLY) != 0;

	/* Our own mutex serializes use, so SQLite needs none of its own. */
	oflags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE;
	oflags |= c->readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
	rc = sqlite3_open_v2(path, &c->db, oflags, NULL);
	if (rc != SQLITE_OK) {
		snprintf(err, errlen,
			 "%s: cannot open the catalog: %s: check that the cache "
			 "directory exists and is writable",
			 path, c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc));
		rc = sqlerr(rc);
		goto fail;
	}
	sqlite3_busy_timeout(c->db, 10000);

	rc = read_user_version(c, &v);
	if ((rc & 0xff) == SQLITE_NOTADB || (rc & 0xff) == SQLITE_CORRUPT) {
		snprintf(err, errlen,
			 "%s: not a SQLite database (damaged or foreign file); "
			 "nothing was deleted: move it away (or point cache_dir elsewhere) to "
			 "start a fresh cache",
			 path);
		rc = -EBADMSG;
		goto fail;
	}
	if (rc != SQLITE_OK) {
		snprintf(err, errlen, "%s: cannot read the catalog: %s", path,
			 sqlite3_errmsg(c->db));
		rc = sqlerr(rc);
		goto fail;
	}
	c->found_version = v;
	if (v > CFS_SCHEMA_VERSION) {
		snprintf(err, errlen,
			 "%s: catalog schema version %d is newer than this rollcache "
			 "understands (%d): upgrade rollcache, or use another cache_dir",
			 path, v, CFS_SCHEMA_VERSION);
		rc = -EPROTONOSUPPORT;
		goto fail;
	}
	if (c->readonly) {
		if (v < CFS_SCHEMA_VERSION) {
			snprintf(err, errlen,
				 "%s: catalog schema version %d, expected %d: open the "
				 "cache once with `rollcache mount` or `ingest` to migrate it",
				 path, v, CFS_SCHEMA_VERSION);
			rc = v == 0 ? -ENOENT : -EPROTONOSUPPORT;
			goto fail;
		}
		exec(c, "PRAGMA query_only = ON");
	} else {
		rc = exec(c, "PRAGMA journal_mode = WAL");
		if (rc == 0)
			rc = exec(c, "PRAGMA synchronous = NORMAL");
		if (rc == 0)
			rc = exec(c, "PRAGMA foreign_keys = ON");
		/* 32 MiB of page cache: sample inserts touch the object index at random */
		if (rc == 0)
			rc = exec(c, "PRAGMA cache_size = -32768");
		if (rc < 0) {
			snprintf(err, errlen,
				 "%s: cannot set up the catalog (WAL journal): %s: "
				 "check that the cache directory is writable",
				 path, sqlite3_errmsg(c->db));
			goto fail;
		}
		if (v < CFS_SCHEMA_VERSION) {
			rc = migrate(c, err, errlen);
			if (rc < 0)
				goto fail;
		}
	}
	{
		sqlite3_stmt *st = stmt(c, S_MAX_ID);
		int64_t max = 0;
		if (st && sqlite3_step(st) == SQLITE_ROW)
			max = sqlite3_column_int64(st, 0);
		if (st)
			sqlite3_reset(st);
		atomic_store(&c->next_id, max + 1);
	}
	*out = c;
	return 0;

fail:
	cfs_catalog_close(c);
	return rc;
}

void cfs_catalog_close(struct cfs_catalog *c)
{
	if (!c)
		return;
	for (int i = 0; i < S__COUNT; i++)
		sqlite3_finalize(c->stmt[i]);
	if (c->db)
		sqlite3_close_v2(c->db);
	pthread_mutex_destroy(&c->mu);
	free(c->path);
	free(c);
}

const char *cfs_catalog_sqlite_version(void)
{
	return sqlite3_libversion();
}

int cfs_catalog_schema_version(const struct cfs_catalog *c)
{
	return c->found_version;
}

/* ---- explicit transactions -------------------------------------------- */

int cfs_catalog_begin(struct cfs_catalog *c)
{
	int rc;

	lock(c);
	if (c->depth != 0) {
		unlock(c);
		return -EINVAL;
	}
	rc = txn_begin(c); /* takes mu a second time: released by commit */
	if (rc < 0) {
		unlock(c);
		return rc;
	}
	c->explicit_txn = true;
	return 0; /* mu stays held twice until commit/rollback */
}

int cfs_catalog_commit(struct cfs_catalog *c)
{
	int rc;

	if (!c->explicit_txn || c->depth != 1)
		return -EINVAL;
	c->explicit_txn = false;
	rc = txn_end(c, 0);
	unlock(c);
	return rc;
}

void cfs_catalog_rollback(struct cfs_catalog *c)
{
	if (!c->explicit_txn || c->depth != 1)
		return;
	c->explicit_txn = false;
	txn_end(c, -ECANCELED);
	unlock(c);
}

/*
 * The snapshot is taken by the first read after BEGIN and kept until
 * COMMIT; depth 1 makes cfs_catalog_begin() refuse meanwhile, and
 * explicit_txn stays false so commit/rollback refuse too.
 */
int cfs_catalog_read_begin(struct cfs_catalog *c)
{
	lock(c);
	if (c->depth != 0) {
		unlock(c);
		return -EINVAL;
	}
	int rc = exec(c, "BEGIN DEFERRED");
	if (rc < 0) {
		unlock(c);
		return rc;
	}
	c->depth = 1;
	c->read_txn = true;
	return 0; /* mu stays held until read_end */
}

void cfs_catalog_read_end(struct cfs_catalog *c)
{
	if (!c->read_txn)
		return;
	c->read_txn = false;
	c->depth = 0;
	exec(c, "COMMIT");
	unlock(c);
}

/* ---- sources and objects ---------------------------------------------- */

int cfs_catalog_source(struct cfs_catalog *c, const char *url, int64_t *source_id)
{
	sqlite3_stmt *st;
	int rc;

	rc = txn_begin(c);
	if (rc < 0)
		return rc;
	st = stmt(c, S_SOURCE_GET);
	if (!st) {
		rc = -EIO;
		goto out;
	}
	sqlite3_bind_text(st, 1, url, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*source_id = sqlite3_column_int64(st, 0);
		sqlite3_reset(st);
		rc = 0;
		goto out;
	}
	sqlite3_reset(st);
	if (rc != SQLITE_DONE) {
		rc = fail(c, rc, "source lookup");
		goto out;
	}
	st = stmt(c, S_SOURCE_ADD);
	if (!st) {
		rc = -EIO;
		goto out;
	}
	sqlite3_bind_text(st, 1, url, -1, SQLITE_STATIC);
	rc = run(c, st, "source insert");
	if (rc == 0)
		*source_id = sqlite3_last_insert_rowid(c->db);
out:
	return txn_end(c, rc);
}

/* An existing current object row, for the merge in objects_sync. */
struct cur_obj {
	int64_t id;
	char *key;
	uint64_t size;
	char *etag;
	int state;
	bool seen;
};

static int cmp_cur(const void *a, const void *b)
{
	return strcmp(((const struct cur_obj *)a)->key, ((const struct cur_obj *)b)->key);
}

struct ent_ref {
	const struct cfs_listing_entry *e;
	size_t idx;
};

static int cmp_ent(const void *a, const void *b)
{
	return strcmp(((const struct ent_ref *)a)->e->key, ((const struct ent_ref *)b)->e->key);
}

static bool etag_eq(const char *a, const char *b)
{
	if (!a || !*a)
		return !b || !*b;
	return b && strcmp(a, b) == 0;
}

static int obj_add(struct cfs_catalog *c, int64_t source_id, const struct cfs_listing_entry *e,
		   uint32_t epoch, int64_t *id)
{
	sqlite3_stmt *st = stmt(c, S_OBJ_ADD);
	int rc;

	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, source_id);
	sqlite3_bind_text(st, 2, e->key, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, (sqlite3_int64)e->size);
	if (e->etag && *e->etag)
		sqlite3_bind_text(st, 4, e->etag, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 5, epoch);
	rc = run(c, st, "object insert");
	if (rc == 0)
		*id = sqlite3_last_insert_rowid(c->db);
	return rc;
}

static int obj_set(struct cfs_catalog *c, enum stmt_id sid, int64_t id, int64_t arg)
{
	sqlite3_stmt *st = stmt(c, sid);

	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, id);
	if (sid == S_OBJ_SEEN)
		sqlite3_bind_int64(st, 2, arg);
	return run(c, st, "object update");
}

/*
 * Makes room for element `cnt` of a doubling array of `elem`-byte elements.
 * Returns 0, or -ENOMEM with *arr and *cap unchanged (the caller frees).
 */
static int grow_array(void **arr, size_t *cap, size_t cnt, size_t elem)
{
	if (cnt < *cap)
		return 0;
	size_t ncap = *cap ? *cap * 2 : 64;
	void *na = realloc(*arr, ncap * elem);
	if (!na)
		return -ENOMEM;
	*arr = na;
	*cap = ncap;
	return 0;
}

/*
 * The idea: read the source's current rows in one query, sort them and the
 * listing by key, and walk both in step (a merge join), so a listing of N
 * keys costs one query plus N small statements in one transaction.
 */
int cfs_catalog_objects_sync(struct cfs_catalog *c, int64_t source_id,
			     const struct cfs_listing_entry *ents, size_t n, uint32_t epoch,
			     int64_t *ids, struct cfs_sync_result *res)
{
	struct cur_obj *cur = NULL;
	struct ent_ref *refs = NULL;
	size_t ncur = 0, cap = 0, i, j;
	struct cfs_sync_result r = {0};
	sqlite3_stmt *st;
	int rc;

	refs = n ? malloc(n * sizeof(*refs)) : NULL;
	if (n && !refs)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		if (!ents[i].key) {
			free(refs);
			return -EINVAL;
		}
		refs[i].e = &ents[i];
		refs[i].idx = i;
	}
	if (n > 1) /* qsort(NULL, 0) is undefined */
		qsort(refs, n, sizeof(*refs), cmp_ent);
	for (i = 1; i < n; i++) {
		if (strcmp(refs[i - 1].e->key, refs[i].e->key) == 0) {
			free(refs);
			return -EINVAL;
		}
	}

	rc = txn_begin(c);
	if (rc < 0) {
		free(refs);
		return rc;
	}
	st = stmt(c, S_OBJ_CURRENT);
	if (!st) {
		rc = -EIO;
		goto out;
	}
	sqlite3_bind_int64(st, 1, source_id);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (grow_array((void **)&cur, &cap, ncur, sizeof(*cur)) != 0) {
			rc = -ENOMEM;
			sqlite3_reset(st);
			goto out;
		}
		struct cur_obj *o = &cur[ncur];
		const char *et = (const char *)sqlite3_column_text(st, 3);
		o->id = sqlite3_column_int64(st, 0);
		o->key = strdup((const char *)sqlite3_column_text(st, 1));
		o->size = (uint64_t)sqlite3_column_int64(st, 2);
		o->etag = et ? strdup(et) : NULL;
		o->state = sqlite3_column_int(st, 4);
		o->seen = false;
		ncur++;
		if (!o->key || (et && !o->etag)) {
			rc = -ENOMEM;
			sqlite3_reset(st);
			goto out;
		}
	}
	sqlite3_reset(st);
	if (rc != SQLITE_DONE) {
		rc = fail(c, rc, "object listing");
		goto out;
	}
	rc = 0;
	if (ncur > 1)
		qsort(cur, ncur, sizeof(*cur), cmp_cur);

	for (i = 0, j = 0; i < n; i++) {
		const struct cfs_listing_entry *e = refs[i].e;
		int64_t id = 0;
		int d = 1;

		while (j < ncur && (d = strcmp(cur[j].key, e->key)) < 0)
			j++;
		if (j < ncur && d == 0) {
			struct cur_obj *o = &cur[j];
			o->seen = true;
			if (o->size == e->size && etag_eq(o->etag, e->etag)) {
				rc = obj_set(c, S_OBJ_SEEN, o->id, epoch);
				id = o->id;
				r.unchanged++;
			} else {
				rc = obj_set(c, S_OBJ_STALE, o->id, 0);
				if (rc == 0)
					rc = obj_add(c, source_id, e, epoch, &id);
				r.changed++;
			}
		} else {
			rc = obj_add(c, source_id, e, epoch, &id);
			r.added++;
		}
		if (rc < 0)
			goto out;
		if (ids)
			ids[refs[i].idx] = id;
	}
	for (j = 0; j < ncur; j++) {
		if (cur[j].seen || cur[j].state == CFS_OBJECT_VANISHED)
			continue;
		rc = obj_set(c, S_OBJ_VANISH, cur[j].id, 0);
		if (rc < 0)
			goto out;
		r.vanished++;
	}
out:
	rc = txn_end(c, rc);
	for (j = 0; j < ncur; j++) {
		free(cur[j].key);
		free(cur[j].etag);
	}
	free(cur);
	free(refs);
	if (rc == 0 && res)
		*res = r;
	return rc;
}

static char *dup_col(sqlite3_stmt *st, int col, bool *oom)
{
	const unsigned char *t = sqlite3_column_text(st, col);
	char *s;

	if (!t)
		return NULL;
	s = strdup((const char *)t);
	if (!s)
		*oom = true;
	return s;
}

void cfs_object_info_free(struct cfs_object_info *arr, size_t n)
{
	if (!arr)
		return;
	for (size_t i = 0; i < n; i++) {
		free(arr[i].key);
		free(arr[i].etag);
	}
	free(arr);
}

int cfs_catalog_objects_list(struct cfs_catalog *c, int64_t source_id, unsigned state_mask,
			     struct cfs_object_info **out, size_t *n)
{
	struct cfs_object_info *arr = NULL;
	size_t cnt = 0, cap = 0;
	sqlite3_stmt *st;
	bool oom = false;
	int rc;

	lock(c);
	st = stmt(c, S_OBJ_LIST);
	if (!st) {
		unlock(c);
		return -EIO;
	}
	sqlite3_bind_int64(st, 1, source_id);
	sqlite3_bind_int64(st, 2, state_mask);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (grow_array((void **)&arr, &cap, cnt, sizeof(*arr)) != 0) {
			oom = true;
			break;
		}
		struct cfs_object_info *o = &arr[cnt++];
		o->id = sqlite3_column_int64(st, 0);
		o->source_id = sqlite3_column_int64(st, 1);
		o->key = dup_col(st, 2, &oom);
		o->etag = dup_col(st, 3, &oom);
		o->size = (uint64_t)sqlite3_column_int64(st, 4);
		o->listed_epoch = (uint32_t)sqlite3_column_int64(st, 5);
		o->state = (enum cfs_object_state)sqlite3_column_int(st, 6);
		o->fetches = (uint32_t)sqlite3_column_int64(st, 7);
		o->last_fetched_epoch = sqlite3_column_int64(st, 8);
		if (oom)
			break;
	}
	sqlite3_reset(st);
	if (oom || (rc != SQLITE_DONE && rc != SQLITE_ROW)) {
		rc = oom ? -ENOMEM : fail(c, rc, "object list");
		unlock(c);
		cfs_object_info_free(arr, cnt);
		return rc;
	}
	unlock(c);
	*out = arr;
	*n = cnt;
	return 0;
}

int cfs_catalog_object_fetched(struct cfs_catalog *c, int64_t id, uint32_t epoch)
{
	sqlite3_stmt *st;
	int rc;

	lock(c);
	st = stmt(c, S_OBJ_FETCHED);
	if (!st) {
		unlock(c);
		return -EIO;
	}
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_int64(st, 2, epoch);
	rc = run(c, st, "object fetched");
	if (rc == 0 && sqlite3_changes(c->db) == 0)
		rc = -ENOENT;
	unlock(c);
	return rc;
}

/* ---- files and samples ------------------------------------------------- */

int64_t cfs_catalog_alloc_id(struct cfs_catalog *c)
{
	return atomic_fetch_add(&c->next_id, 1);
}

void cfs_catalog_note_id(struct cfs_catalog *c, int64_t id)
{
	note_id(c, id);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/*
 * Records which objects file `id` holds samples of (one row per distinct
 * object, not per sample): the reverse index that finds the files of a
 * STALE object without indexing every sample row.  mu held, in a txn.
 */
static int add_shard_objects(struct cfs_catalog *c, int64_t id, const struct cfs_sample *smp,
			     size_t n)
{
	int64_t *objs;
	size_t k = 0;
	sqlite3_stmt *st;
	int rc = 0;

	if (n == 0)
		return 0;
	objs = malloc(n * sizeof(*objs));
	if (!objs)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (smp[i].object_id != 0)
			objs[k++] = smp[i].object_id;
	if (k > 1)
		qsort(objs, k, sizeof(*objs), cmp_i64);
	st = k ? stmt(c, S_SHOBJ_ADD) : NULL;
	if (k && !st)
		rc = -EIO;
	for (size_t i = 0; i < k && rc == 0; i++) {
		if (i && objs[i] == objs[i - 1])
			continue;
		sqlite3_bind_int64(st, 1, id);
		sqlite3_bind_int64(st, 2, objs[i]);
		rc = run(c, st, "file objects");
	}
	free(objs);
	return rc;
}

/* Inserts plan marks.  mu held, in a txn. */
static int marks_add(struct cfs_catalog *c, const struct cfs_plan_marks *m)
{
	sqlite3_stmt *st = m->n ? stmt(c, S_MARK_ADD) : NULL;
	int rc = 0;

	if (m->n && !st)
		return -EIO;
	for (size_t i = 0; i < m->n && rc == 0; i++) {
		sqlite3_bind_int64(st, 1, m->plan_id);
		sqlite3_bind_int64(st, 2, (sqlite3_int64)m->pass);
		sqlite3_bind_int64(st, 3, (sqlite3_int64)m->units[i]);
		rc = run(c, st, "plan mark");
	}
	/* a whole object's end commits with its mark: it is no longer partial */
	st = m->n ? stmt(c, S_PARTIAL_DEL) : NULL;
	if (m->n && !st)
		return -EIO;
	for (size_t i = 0; i < m->n && rc == 0; i++) {
		sqlite3_bind_int64(st, 1, m->plan_id);
		sqlite3_bind_int64(st, 2, (sqlite3_int64)m->units[i]);
		rc = run(c, st, "plan partial end");
	}
	st = m->nlows && rc == 0 ? stmt(c, S_PARTIAL_LOW) : NULL;
	if (m->nlows && rc == 0 && !st)
		return -EIO;
	for (size_t i = 0; i < m->nlows && rc == 0; i++) {
		sqlite3_bind_int64(st, 1, m->plan_id);
		sqlite3_bind_int64(st, 2, (sqlite3_int64)m->low_units[i]);
		sqlite3_bind_int64(st, 3, (sqlite3_int64)m->lows[i]);
		rc = run(c, st, "plan partial low");
	}
	return rc;
}

int cfs_catalog_shard_insert(struct cfs_catalog *c, const struct cfs_shard_new *sh,
			     const struct cfs_sample *samples, size_t n_samples)
{
	sqlite3_stmt *st;
	int rc;

	if (sh->id <= 0 || (sh->kind != CFS_KIND_TFRECORD && sh->kind != CFS_KIND_RAW) ||
	    (sh->kind == CFS_KIND_RAW && !sh->name))
		return -EINVAL;
	rc = txn_begin(c);
	if (rc < 0)
		return rc;
	st = stmt(c, S_SHARD_ADD);
	if (!st) {
		rc = -EIO;
		goto out;
	}
	sqlite3_bind_int64(st, 1, sh->id);
	sqlite3_bind_int(st, 2, sh->kind);
	sqlite3_bind_int64(st, 3, (sqlite3_int64)sh->bytes);
	sqlite3_bind_int64(st, 4, (sqlite3_int64)n_samples);
	sqlite3_bind_int64(st, 5, sh->created_epoch);
	sqlite3_bind_int64(st, 6, sh->object_id);
	if (sh->name)
		sqlite3_bind_text(st, 7, sh->name, -1, SQLITE_STATIC);
	rc = run(c, st, "file insert");
	if (rc < 0)
		goto out;

	st = stmt(c, S_SAMPLE_ADD);
	if (!st) {
		rc = -EIO;
		goto out;
	}
	for (size_t i = 0; i < n_samples; i++) {
		const struct cfs_sample *s = &samples[i];
		sqlite3_bind_int64(st, 1, sh->id);
		sqlite3_bind_int64(st, 2, (sqlite3_int64)s->offset);
		sqlite3_bind_int64(st, 3, (sqlite3_int64)s->length);
		sqlite3_bind_int64(st, 4, s->crc);
		sqlite3_bind_int64(st, 5, s->object_id);
		sqlite3_bind_int64(st, 6, (sqlite3_int64)s->object_offset);
		sqlite3_bind_int64(st, 7, sh->created_epoch);
		rc = sqlite3_step(st);
		sqlite3_reset(st);
		if (rc != SQLITE_DONE) {
			rc = (rc & 0xff) == SQLITE_CONSTRAINT ? -EINVAL
							      : fail(c, rc, "sample insert");
			goto out;
		}
	}
	rc = add_shard_objects(c, sh->id, samples, n_samples);
	if (rc < 0)
		goto out;
	if (sh->marks) { /* the plan's units this file completes: same transaction */
		rc = marks_add(c, sh->marks);
		if (rc < 0)
			goto out;
	}

	st = stmt(c, S_EPOCH_ADMIT);
	if (!st) {
		rc = -EIO;
		goto out;
	}
	sqlite3_bind_int64(st, 1, sh->created_epoch);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)sh->bytes);
	sqlite3_bind_int64(st, 3, (sqlite3_int64)n_samples);
	rc = run(c, st, "epoch admitted");
out:
	rc = txn_end(c, rc);
	if (rc == 0)
		note_id(c, sh->id);
	return rc;
}

static int read_shard_row(sqlite3_stmt *st, struct cfs_shard_info *f)
{
	bool oom = false;

	f->id = sqlite3_column_int64(st, 0);
	f->kind = (enum cfs_kind)sqlite3_column_int(st, 1);
	f->state = (enum cfs_shard_state)sqlite3_column_int(st, 2);
	f->bytes = (uint64_t)sqlite3_column_int64(st, 3);
	f->records = (uint64_t)sqlite3_column_int64(st, 4);
	f->created_epoch = (uint32_t)sqlite3_column_int64(st, 5);
	f->reads = (uint64_t)sqlite3_column_int64(st, 6);
	f->last_read_ms = (uint64_t)sqlite3_column_int64(st, 7);
	f->full_reads = (uint64_t)sqlite3_column_int64(st, 8);
	f->object_id = sqlite3_column_int64(st, 9);
	f->name = dup_col(st, 10, &oom);
	f->evicted_epoch = sqlite3_column_int64(st, 11);
	return oom ? -ENOMEM : 0;
}

void cfs_shard_info_free(struct cfs_shard_info *arr, size_t n)
{
	if (!arr)
		return;
	for (size_t i = 0; i < n; i++)
		free(arr[i].name);
	free(arr);
}

int cfs_catalog_shards_list(struct cfs_catalog *c, unsigned state_mask, struct cfs_shard_info **out,
			    size_t *n)
{
	struct cfs_shard_info *arr = NULL;
	size_t cnt = 0, cap = 0;
	sqlite3_stmt *st;
	int rc, e = 0;

	lock(c);
	st = stmt(c, S_SHARD_LIST);
	if (!st) {
		unlock(c);
		return -EIO;
	}
	sqlite3_bind_int64(st, 1, state_mask);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (grow_array((void **)&arr, &cap, cnt, sizeof(*arr)) != 0) {
			e = -ENOMEM;
			break;
		}
		e = read_shard_row(st, &arr[cnt++]);
		if (e < 0)
			break;
	}
	sqlite3_reset(st);
	if (e == 0 && rc != SQLITE_DONE)
		e = fail(c, rc, "file list");
	unlock(c);
	if (e < 0) {
		cfs_shard_info_free(arr, cnt);
		return e;
	}
	*out = arr;
	*n = cnt;
	return 0;
}

int cfs_catalog_shard_get(struct cfs_catalog *c, int64_t id, struct cfs_shard_info *out)
{
	sqlite3_stmt *st;
	int rc;

	lock(c);
	st = stmt(c, S_SHARD_GET);
	if (!st) {
		unlock(c);
		return -EIO;
	}
	sqlite3_bind_int64(st, 1, id);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		rc = read_shard_row(st, out);
	else if (rc == SQLITE_DONE)
		rc = -ENOENT;
	else
		rc = fail(c, rc, "file get");
	sqlite3_reset(st);
	unlock(c);
	return rc;
}

/* Adds to one counter column of the epochs row through statement sid. */
static int epoch_add(struct cfs_catalog *c, enum stmt_id sid, uint32_t epoch, uint64_t a,
		     uint64_t b)
{
	sqlite3_stmt *st = stmt(c, sid);

	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, epoch);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)a);
	if (sid != S_EPOCH_SERVED)
		sqlite3_bind_int64(st, 3, (sqlite3_int64)b);
	return run(c, st, "epoch counters");
}

int cfs_catalog_shards_add_stats(struct cfs_catalog *c, const struct cfs_shard_stat_delta *d,
				 size_t n, uint32_t epoch)
{
	uint64_t read_bytes = 0, read_files = 0, newly = 0;
	sqlite3_stmt *st;
	int rc;

	if (n == 0)
		return 0;
	rc = txn_begin(c);
	if (rc < 0)
		return rc;
	st = stmt(c, S_SHARD_STATS);
	if (!st) {
		rc = -EIO;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		sqlite3_bind_int64(st, 1, d[i].id);
		sqlite3_bind_int64(st, 2, (sqlite3_int64)d[i].reads);
		sqlite3_bind_int64(st, 3, (sqlite3_int64)d[i].full_reads);
		sqlite3_bind_int64(st, 4, (sqlite3_int64)d[i].last_read_ms);
		int src = sqlite3_step(st);
		/* the file's count after this delta: equal to it on the first full read */
		bool first = src == SQLITE_ROW && d[i].full_reads &&
			     (uint64_t)sqlite3_column_int64(st, 0) == d[i].full_reads;
		if (src == SQLITE_ROW)
			src = sqlite3_step(st);
		if (src != SQLITE_DONE) {
			rc = fail(c, src, "file stats");
			sqlite3_reset(st);
			goto out;
		}
		sqlite3_reset(st);
		read_bytes += d[i].read_bytes;
		read_files += d[i].reads;
		if (first) {
			/*
			 * Read to the end for the first time: its records are
			 * served (a later full read serves nothing new).  The
			 * ones never served before (from any file, in any pass)
			 * count into the epoch's served_records.
			 */
			sqlite3_stmt *sv = stmt(c, S_SERVED_ADD);
			if (!sv) {
				rc = -EIO;
				goto out;
			}
			sqlite3_bind_int64(sv, 1, d[i].id);
			rc = run(c, sv, "records served");
			if (rc < 0)
				goto out;
			newly += (uint64_t)sqlite3_changes(c->db);
		}
	}
	rc = read_bytes || read_files ? epoch_add(c, S_EPOCH_READ, epoch, read_bytes, read_files)
				      : 0;
	if (rc == 0 && newly)
		rc = epoch_add(c, S_EPOCH_SERVED, epoch, newly, 0);
out:
	return txn_end(c, rc);
}

/*
 * The whole objects with records in file `id`, which is leaving, are whole
 * in the cache no more (plan_cut): the plan still takes them as resident
 * while a record of them is (nothing is fetched twice), and counts their
 * bytes as wanted, so that a boundary makes room for them.  mu held, in a
 * txn.
 */
static int cut_objects(struct cfs_catalog *c, int64_t id)
{
	sqlite3_stmt *st = stmt(c, S_PARTIAL_CUT);
	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, id);
	return run(c, st, "plan partial cut");
}

int cfs_catalog_shards_evict(struct cfs_catalog *c, const int64_t *ids, size_t n, uint32_t epoch)
{
	uint64_t bytes = 0, records = 0;
	sqlite3_stmt *st;
	int rc;

	if (n == 0)
		return 0;
	rc = txn_begin(c);
	if (rc < 0)
		return rc;
	st = stmt(c, S_SHARD_EVICT);
	if (!st) {
		rc = -EIO;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		sqlite3_bind_int64(st, 1, ids[i]);
		sqlite3_bind_int64(st, 2, epoch);
		rc = sqlite3_step(st);
		if (rc == SQLITE_ROW) {
			bytes += (uint64_t)sqlite3_column_int64(st, 0);
			records += (uint64_t)sqlite3_column_int64(st, 1);
			rc = sqlite3_step(st);
		} else if (rc == SQLITE_DONE) {
			sqlite3_reset(st);
			rc = -ENOENT; /* not SEALED: nothing changes */
			goto out;
		}
		sqlite3_reset(st);
		if (rc != SQLITE_DONE) {
			rc = fail(c, rc, "file evict");
			goto out;
		}
		rc = cut_objects(c, ids[i]);
		if (rc < 0)
			goto out;
	}
	rc = epoch_add(c, S_EPOCH_EVICT, epoch, bytes, records);
out:
	return txn_end(c, rc);
}

int cfs_catalog_shard_corrupt(struct cfs_catalog *c, int64_t id, uint32_t epoch)
{
	sqlite3_stmt *st;
	int rc = txn_begin(c);

	if (rc < 0)
		return rc;
	st = stmt(c, S_SHARD_EVICT); /* no epoch counters: a corrupt file is not a victim */
	if (!st) {
		rc = -EIO;
		goto out;
	}
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_int64(st, 2, epoch);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		rc = sqlite3_step(st);
	else if (rc == SQLITE_DONE)
		rc = -ENOENT; /* not SEALED: nothing changes */
	sqlite3_reset(st);
	if (rc == -ENOENT)
		goto out;
	if (rc != SQLITE_DONE) {
		rc = fail(c, rc, "file corrupt");
		goto out;
	}
	/* its records are resident no more: the sampling plan may fetch them again */
	rc = cut_objects(c, id);
	if (rc < 0)
		goto out;
	st = stmt(c, S_SAMPLES_DEL);
	if (!st) {
		rc = -EIO;
		goto out;
	}
	sqlite3_bind_int64(st, 1, id);
	rc = run(c, st, "samples delete");
	if (rc < 0)
		goto out;
	st = stmt(c, S_SHOBJ_DEL);
	if (!st) {
		rc = -EIO;
		goto out;
	}
	sqlite3_bind_int64(st, 1, id);
	rc = run(c, st, "file objects delete");
out:
	return txn_end(c, rc);
}

/* Runs statement sid with ?1 = each id; deletes their samples first. */
static int each_id(struct cfs_catalog *c, enum stmt_id sid, const int64_t *ids, size_t n)
{
	int rc;

	for (size_t i = 0; i < n; i++) {
		sqlite3_stmt *st = stmt(c, S_SAMPLES_DEL);
		if (!st)
			return -EIO;
		sqlite3_bind_int64(st, 1, ids[i]);
		rc = run(c, st, "samples delete");
		if (rc < 0)
			return rc;
		st = stmt(c, S_SHOBJ_DEL);
		if (!st)
			return -EIO;
		sqlite3_bind_int64(st, 1, ids[i]);
		rc = run(c, st, "file objects delete");
		if (rc < 0)
			return rc;
		st = stmt(c, sid);
		if (!st)
			return -EIO;
		sqlite3_bind_int64(st, 1, ids[i]);
		rc = run(c, st, sid == S_SHARD_GONE ? "file gone" : "file drop");
		if (rc < 0)
			return rc;
	}
	return 0;
}

int cfs_catalog_shards_gone(struct cfs_catalog *c, const int64_t *ids, size_t n)
{
	int rc;

	if (n == 0)
		return 0;
	rc = txn_begin(c);
	if (rc < 0)
		return rc;
	return txn_end(c, each_id(c, S_SHARD_GONE, ids, n));
}

int cfs_catalog_shards_drop(struct cfs_catalog *c, const int64_t *ids, size_t n)
{
	int rc;

	if (n == 0)
		return 0;
	rc = txn_begin(c);
	if (rc < 0)
		return rc;
	return txn_end(c, each_id(c, S_SHARD_DEL, ids, n));
}

/* Collects column 0 (int64) of every row of a bound statement. */
/*
 * The row reader: steps st (bound, mu held) to its end, each row filled
 * into one more element of elem bytes by row(), and resets it.  0 with
 * *out (malloc'd, NULL when no row) and *n; -ENOMEM or -EIO (logged as
 * `what`), nothing returned.
 */
static int collect_rows(struct cfs_catalog *c, sqlite3_stmt *st, size_t elem,
			void (*row)(sqlite3_stmt *st, void *el), const char *what, void **out,
			size_t *n)
{
	char *arr = NULL;
	size_t cnt = 0, cap = 0;
	int rc;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (grow_array((void **)&arr, &cap, cnt, elem) != 0) {
			sqlite3_reset(st);
			free(arr);
			return -ENOMEM;
		}
		row(st, arr + cnt++ * elem);
	}
	sqlite3_reset(st);
	if (rc != SQLITE_DONE) {
		free(arr);
		return fail(c, rc, what);
	}
	*out = arr;
	*n = cnt;
	return 0;
}

static void row_id(sqlite3_stmt *st, void *el)
{
	*(int64_t *)el = sqlite3_column_int64(st, 0);
}

static int collect_ids(struct cfs_catalog *c, sqlite3_stmt *st, int64_t **out, size_t *n)
{
	return collect_rows(c, st, sizeof(**out), row_id, "id query", (void **)out, n);
}

int cfs_catalog_shards_with_stale_objects(struct cfs_catalog *c, int64_t **out, size_t *n)
{
	sqlite3_stmt *st;
	int rc;

	lock(c);
	st = stmt(c, S_STALE_SHARDS);
	rc = st ? collect_ids(c, st, out, n) : -EIO;
	unlock(c);
	return rc;
}

int cfs_catalog_samples_of(struct cfs_catalog *c, int64_t id, struct cfs_sample **out, size_t *n)
{
	struct cfs_sample *arr = NULL;
	size_t cnt = 0, cap = 0;
	sqlite3_stmt *st;
	int rc;

	lock(c);
	st = stmt(c, S_SAMPLES_OF);
	if (!st) {
		unlock(c);
		return -EIO;
	}
	sqlite3_bind_int64(st, 1, id);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (grow_array((void **)&arr, &cap, cnt, sizeof(*arr)) != 0) {
			rc = SQLITE_NOMEM;
			break;
		}
		struct cfs_sample *s = &arr[cnt++];
		s->offset = (uint64_t)sqlite3_column_int64(st, 0);
		s->length = (uint64_t)sqlite3_column_int64(st, 1);
		s->crc = (uint32_t)sqlite3_column_int64(st, 2);
		s->object_id = sqlite3_column_int64(st, 3);
		s->object_offset = (uint64_t)sqlite3_column_int64(st, 4);
	}
	sqlite3_reset(st);
	if (rc != SQLITE_DONE) {
		rc = rc == SQLITE_NOMEM ? -ENOMEM : fail(c, rc, "samples of file");
		unlock(c);
		free(arr);
		return rc;
	}
	unlock(c);
	*out = arr;
	*n = cnt;
	return 0;
}

int cfs_catalog_resident(struct cfs_catalog *c, struct cfs_resident *out)
{
	sqlite3_stmt *st;
	int rc;

	lock(c);
	st = stmt(c, S_RESIDENT);
	if (!st) {
		unlock(c);
		return -EIO;
	}
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		out->files = (uint64_t)sqlite3_column_int64(st, 0);
		out->bytes = (uint64_t)sqlite3_column_int64(st, 1);
		out->records = (uint64_t)sqlite3_column_int64(st, 2);
		rc = 0;
	} else {
		rc = fail(c, rc, "resident totals");
	}
	sqlite3_reset(st);
	unlock(c);
	return rc;
}

/* ---- epochs ------------------------------------------------------------ */

int cfs_catalog_epoch_begin(struct cfs_catalog *c, const struct cfs_epoch_row *r)
{
	sqlite3_stmt *st;
	int rc;

	lock(c);
	st = stmt(c, S_EPOCH_BEGIN);
	if (!st) {
		unlock(c);
		return -EIO;
	}
	sqlite3_bind_int64(st, 1, r->number);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)(r->started_ms ? r->started_ms : cmn_wall_ms()));
	sqlite3_bind_int64(st, 3, (sqlite3_int64)r->limit);
	sqlite3_bind_int64(st, 4, (sqlite3_int64)r->admit);
	sqlite3_bind_text(st, 5, r->policy, (int)strnlen(r->policy, sizeof(r->policy)),
			  SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 6, r->min_uses);
	sqlite3_bind_int64(st, 7, (sqlite3_int64)r->resident_files);
	sqlite3_bind_int64(st, 8, (sqlite3_int64)r->resident_bytes);
	sqlite3_bind_int64(st, 9, (sqlite3_int64)r->resident_records);
	rc = run(c, st, "epoch begin");
	unlock(c);
	return rc;
}

int cfs_catalog_epochs_list(struct cfs_catalog *c, struct cfs_epoch_row **out, size_t *n)
{
	struct cfs_epoch_row *arr = NULL;
	size_t cnt = 0, cap = 0;
	sqlite3_stmt *st;
	int rc;

	lock(c);
	st = stmt(c, S_EPOCH_LIST);
	if (!st) {
		unlock(c);
		return -EIO;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (grow_array((void **)&arr, &cap, cnt, sizeof(*arr)) != 0) {
			rc = SQLITE_NOMEM;
			break;
		}
		struct cfs_epoch_row *e = &arr[cnt++];
		const unsigned char *pol = sqlite3_column_text(st, 9);
		memset(e, 0, sizeof(*e));
		e->number = (uint32_t)sqlite3_column_int64(st, 0);
		e->started_ms = (uint64_t)sqlite3_column_int64(st, 1);
		e->admitted_bytes = (uint64_t)sqlite3_column_int64(st, 2);
		e->admitted_records = (uint64_t)sqlite3_column_int64(st, 3);
		e->evicted_bytes = (uint64_t)sqlite3_column_int64(st, 4);
		e->evicted_records = (uint64_t)sqlite3_column_int64(st, 5);
		e->read_bytes = (uint64_t)sqlite3_column_int64(st, 6);
		e->limit = (uint64_t)sqlite3_column_int64(st, 7);
		e->admit = (uint64_t)sqlite3_column_int64(st, 8);
		snprintf(e->policy, sizeof(e->policy), "%s", pol ? (const char *)pol : "");
		e->min_uses = (uint32_t)sqlite3_column_int64(st, 10);
		e->resident_files = (uint64_t)sqlite3_column_int64(st, 11);
		e->resident_bytes = (uint64_t)sqlite3_column_int64(st, 12);
		e->resident_records = (uint64_t)sqlite3_column_int64(st, 13);
		e->served_records = (uint64_t)sqlite3_column_int64(st, 14);
		e->read_files = (uint64_t)sqlite3_column_int64(st, 15);
	}
	sqlite3_reset(st);
	if (rc != SQLITE_DONE) {
		rc = rc == SQLITE_NOMEM ? -ENOMEM : fail(c, rc, "epoch list");
		unlock(c);
		free(arr);
		return rc;
	}
	unlock(c);
	*out = arr;
	*n = cnt;
	return 0;
}

int cfs_catalog_current_epoch(struct cfs_catalog *c, uint32_t *epoch)
{
	sqlite3_stmt *st;
	int rc;

	lock(c);
	st = stmt(c, S_EPOCH_CURRENT);
	if (!st) {
		unlock(c);
		return -EIO;
	}
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) {
		*epoch = (uint32_t)sqlite3_column_int64(st, 0);
		rc = 0;
	} else if (rc == SQLITE_ROW) {
		rc = -ENOENT;
	} else {
		rc = fail(c, rc, "current epoch");
	}
	sqlite3_reset(st);
	unlock(c);
	return rc;
}

/* ---- maintenance ------------------------------------------------------- */

int cfs_catalog_integrity_check(struct cfs_catalog *c, char *err, size_t errlen)
{
	sqlite3_stmt *st = NULL;
	int rc;

	lock(c);
	rc = sqlite3_prepare_v2(c->db, "PRAGMA integrity_check", -1, &st, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		const char *r = (const char *)sqlite3_column_text(st, 0);
		if (r && strcmp(r, "ok") == 0) {
			rc = 0;
		} else {
			snprintf(err, errlen, "%s: integrity check failed: %s", c->path,
				 r ? r : "(no result)");
			rc = -EBADMSG;
		}
	} else {
		snprintf(err, errlen, "%s: integrity check could not run: %s", c->path,
			 sqlite3_errmsg(c->db));
		rc = sqlerr(rc) ? sqlerr(rc) : -EIO;
	}
	sqlite3_finalize(st);
	unlock(c);
	return rc;
}

/* ---- the sampling plan ------------------------------------------------- */

int cfs_catalog_plan_get(struct cfs_catalog *c, int64_t source_id, uint32_t rank,
			 uint32_t world_size, int unit_kind, uint64_t seed,
			 struct cfs_plan_row *out)
{
	sqlite3_stmt *st;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = txn_begin(c);
	if (rc < 0)
		return rc;
	for (int attempt = 0; attempt < 2; attempt++) {
		st = stmt(c, S_PLAN_GET);
		if (!st) {
			rc = -EIO;
			break;
		}
		sqlite3_bind_int64(st, 1, source_id);
		sqlite3_bind_int64(st, 2, rank);
		sqlite3_bind_int64(st, 3, world_size);
		sqlite3_bind_int(st, 4, unit_kind);
		rc = sqlite3_step(st);
		if (rc == SQLITE_ROW) {
			out->id = sqlite3_column_int64(st, 0);
			out->seed = (uint64_t)sqlite3_column_int64(st, 1);
			out->pass = (uint64_t)sqlite3_column_int64(st, 2);
			out->gen = (uint64_t)sqlite3_column_int64(st, 3);
			out->n_units = (uint64_t)sqlite3_column_int64(st, 4);
			out->cursor = (uint64_t)sqlite3_column_int64(st, 5);
			int len = sqlite3_column_bytes(st, 6);
			const void *b = sqlite3_column_blob(st, 6);
			rc = 0;
			if (len > 0 && b) {
				out->taken = malloc((size_t)len);
				if (!out->taken)
					rc = -ENOMEM;
				else
					memcpy(out->taken, b, (size_t)len);
				out->taken_len = (size_t)len;
			}
			sqlite3_reset(st);
			break;
		}
		sqlite3_reset(st);
		if (rc != SQLITE_DONE) {
			rc = fail(c, rc, "plan");
			break;
		}
		st = stmt(c, S_PLAN_ADD);
		if (!st) {
			rc = -EIO;
			break;
		}
		sqlite3_bind_int64(st, 1, source_id);
		sqlite3_bind_int64(st, 2, rank);
		sqlite3_bind_int64(st, 3, world_size);
		sqlite3_bind_int(st, 4, unit_kind);
		sqlite3_bind_int64(st, 5, (sqlite3_int64)seed);
		rc = run(c, st, "plan insert");
		if (rc < 0)
			break;
		rc = -ENOENT; /* read it back */
	}
	rc = txn_end(c, rc);
	if (rc < 0) {
		free(out->taken);
		memset(out, 0, sizeof(*out));
	}
	return rc;
}

int cfs_catalog_plan_save(struct cfs_catalog *c, const struct cfs_plan_row *r)
{
	sqlite3_stmt *st;
	int rc = txn_begin(c);

	if (rc < 0)
		return rc;
	st = stmt(c, S_PLAN_SAVE);
	if (!st) {
		rc = -EIO;
		goto out;
	}
	sqlite3_bind_int64(st, 1, r->id);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)r->pass);
	sqlite3_bind_int64(st, 3, (sqlite3_int64)r->gen);
	sqlite3_bind_int64(st, 4, (sqlite3_int64)r->n_units);
	sqlite3_bind_int64(st, 5, (sqlite3_int64)r->cursor);
	if (r->taken && r->taken_len)
		sqlite3_bind_blob64(st, 6, r->taken, r->taken_len, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, 6);
	rc = run(c, st, "plan save");
	if (rc == 0 && sqlite3_changes(c->db) == 0)
		rc = -ENOENT;
	if (rc < 0)
		goto out;
	st = stmt(c, S_MARKS_CLEAR);
	if (!st) {
		rc = -EIO;
		goto out;
	}
	sqlite3_bind_int64(st, 1, r->id);
	rc = run(c, st, "plan marks clear");
out:
	return txn_end(c, rc);
}

void cfs_plan_row_free(struct cfs_plan_row *r)
{
	free(r->taken);
	r->taken = NULL;
	r->taken_len = 0;
}

int cfs_catalog_plan_mark(struct cfs_catalog *c, const struct cfs_plan_marks *m)
{
	int rc = txn_begin(c);

	if (rc < 0)
		return rc;
	rc = marks_add(c, m);
	return txn_end(c, rc);
}

int cfs_catalog_plan_marks_of(struct cfs_catalog *c, int64_t plan_id, uint64_t pass, uint64_t **out,
			      size_t *n)
{
	sqlite3_stmt *st;
	int rc;

	lock(c);
	st = stmt(c, S_MARKS_OF);
	if (st) {
		sqlite3_bind_int64(st, 1, plan_id);
		sqlite3_bind_int64(st, 2, (sqlite3_int64)pass);
	}
	rc = st ? collect_ids(c, st, (int64_t **)out, n) : -EIO;
	unlock(c);
	return rc;
}

void cfs_plan_objects_free(struct cfs_plan_object *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i].idx);
	free(v);
}

int cfs_catalog_plan_objects(struct cfs_catalog *c, int64_t plan_id, struct cfs_plan_object **out,
			     size_t *n)
{
	struct cfs_plan_object *arr = NULL;
	size_t cnt = 0, cap = 0;
	sqlite3_stmt *st;
	int rc;

	lock(c);
	st = stmt(c, S_POBJ_LIST);
	if (!st) {
		unlock(c);
		return -EIO;
	}
	sqlite3_bind_int64(st, 1, plan_id);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (grow_array((void **)&arr, &cap, cnt, sizeof(*arr)) != 0) {
			rc = SQLITE_NOMEM;
			break;
		}
		struct cfs_plan_object *o = &arr[cnt++];
		memset(o, 0, sizeof(*o));
		o->object_id = sqlite3_column_int64(st, 0);
		o->first_unit = (uint64_t)sqlite3_column_int64(st, 1);
		o->units = (uint64_t)sqlite3_column_int64(st, 2);
		int len = sqlite3_column_bytes(st, 3);
		const void *b = sqlite3_column_blob(st, 3);
		if (len > 0 && b) {
			o->idx = malloc((size_t)len);
			if (!o->idx) {
				rc = SQLITE_NOMEM;
				break;
			}
			memcpy(o->idx, b, (size_t)len);
			o->idx_len = (size_t)len;
		}
	}
	sqlite3_reset(st);
	if (rc != SQLITE_DONE) {
		rc = rc == SQLITE_NOMEM ? -ENOMEM : fail(c, rc, "plan objects");
		unlock(c);
		cfs_plan_objects_free(arr, cnt);
		return rc;
	}
	unlock(c);
	*out = arr;
	*n = cnt;
	return 0;
}

int cfs_catalog_plan_objects_add(struct cfs_catalog *c, int64_t plan_id,
				 const struct cfs_plan_object *v, size_t n, uint64_t n_units)
{
	sqlite3_stmt *st;
	int rc = txn_begin(c);

	if (rc < 0)
		return rc;
	st = stmt(c, S_POBJ_ADD);
	if (!st)
		rc = -EIO;
	for (size_t i = 0; i < n && rc == 0; i++) {
		sqlite3_bind_int64(st, 1, plan_id);
		sqlite3_bind_int64(st, 2, v[i].object_id);
		sqlite3_bind_int64(st, 3, (sqlite3_int64)v[i].first_unit);
		sqlite3_bind_int64(st, 4, (sqlite3_int64)v[i].units);
		if (v[i].idx && v[i].idx_len)
			sqlite3_bind_blob64(st, 5, v[i].idx, v[i].idx_len, SQLITE_STATIC);
		else
			sqlite3_bind_null(st, 5);
		rc = run(c, st, "plan object");
	}
	if (rc == 0) {
		char sql[128];
		snprintf(sql, sizeof(sql),
			 "UPDATE plans SET n_units = %" PRIu64 " WHERE id = %" PRId64, n_units,
			 plan_id);
		rc = exec(c, sql);
	}
	return txn_end(c, rc);
}

int cfs_catalog_plan_resident_objects(struct cfs_catalog *c, int64_t plan_id, int64_t **out,
				      size_t *n)
{
	sqlite3_stmt *st;
	int rc;

	lock(c);
	st = stmt(c, S_RES_OBJECTS);
	if (st)
		sqlite3_bind_int64(st, 1, plan_id);
	rc = st ? collect_ids(c, st, out, n) : -EIO;
	unlock(c);
	return rc;
}

int cfs_catalog_plan_partial_begin(struct cfs_catalog *c, int64_t plan_id, uint64_t unit,
				   int64_t object_id)
{
	sqlite3_stmt *st;
	int rc = txn_begin(c);

	if (rc < 0)
		return rc;
	st = stmt(c, S_PARTIAL_ADD);
	if (st) {
		sqlite3_bind_int64(st, 1, plan_id);
		sqlite3_bind_int64(st, 2, (sqlite3_int64)unit);
		sqlite3_bind_int64(st, 3, object_id);
	}
	rc = st ? run(c, st, "plan partial begin") : -EIO;
	st = rc == 0 ? stmt(c, S_CUT_DEL) : NULL;
	if (st) {
		sqlite3_bind_int64(st, 1, plan_id);
		sqlite3_bind_int64(st, 2, object_id);
		rc = run(c, st, "plan cut end");
	} else if (rc == 0) {
		rc = -EIO;
	}
	rc = txn_end(c, rc);
	if (rc == 0)
		cmn_fault("plan_partial"); /* the transfer is recorded, none of its bytes fetched */
	return rc;
}

int cfs_catalog_plan_cut_objects(struct cfs_catalog *c, int64_t plan_id, int64_t **out, size_t *n)
{
	sqlite3_stmt *st;
	int rc;

	lock(c);
	st = stmt(c, S_CUT_LIST);
	if (st)
		sqlite3_bind_int64(st, 1, plan_id);
	rc = st ? collect_ids(c, st, out, n) : -EIO;
	unlock(c);
	return rc;
}

static void row_partial(sqlite3_stmt *st, void *el)
{
	struct cfs_partial *p = el;
	p->object_id = sqlite3_column_int64(st, 0);
	p->low = (uint64_t)sqlite3_column_int64(st, 1);
}

int cfs_catalog_plan_partial_objects(struct cfs_catalog *c, int64_t plan_id,
				     struct cfs_partial **out, size_t *n)
{
	sqlite3_stmt *st;
	int rc;

	lock(c);
	st = stmt(c, S_RES_PARTIAL);
	if (st)
		sqlite3_bind_int64(st, 1, plan_id);
	rc =
	    st ? collect_rows(c, st, sizeof(**out), row_partial, "partial objects", (void **)out, n)
	       : -EIO;
	unlock(c);
	return rc;
}

int cfs_catalog_plan_partial_low(struct cfs_catalog *c, int64_t plan_id, const uint64_t *units,
				 const uint64_t *lows, size_t n)
{
	sqlite3_stmt *st;
	int rc = txn_begin(c);

	if (rc < 0)
		return rc;
	st = n ? stmt(c, S_PARTIAL_LOW) : NULL;
	if (n && !st)
		rc = -EIO;
	for (size_t i = 0; i < n && rc == 0; i++) {
		sqlite3_bind_int64(st, 1, plan_id);
		sqlite3_bind_int64(st, 2, (sqlite3_int64)units[i]);
		sqlite3_bind_int64(st, 3, (sqlite3_int64)lows[i]);
		rc = run(c, st, "plan partial low");
	}
	return txn_end(c, rc);
}

int cfs_catalog_object_offsets(struct cfs_catalog *c, int64_t object_id, uint64_t **out, size_t *n)
{
	sqlite3_stmt *st;
	int rc;

	lock(c);
	st = stmt(c, S_OBJ_OFFSETS);
	if (st)
		sqlite3_bind_int64(st, 1, object_id);
	rc = st ? collect_ids(c, st, (int64_t **)out, n) : -EIO;
	unlock(c);
	return rc;
}

static void row_sample_ref(sqlite3_stmt *st, void *el)
{
	struct cfs_sample_ref *r = el;
	r->object_id = sqlite3_column_int64(st, 0);
	r->object_offset = (uint64_t)sqlite3_column_int64(st, 1);
}

int cfs_catalog_plan_resident_samples(struct cfs_catalog *c, int64_t plan_id,
				      struct cfs_sample_ref **out, size_t *n)
{
	sqlite3_stmt *st;
	int rc;

	lock(c);
	st = stmt(c, S_RES_SAMPLES);
	if (st)
		sqlite3_bind_int64(st, 1, plan_id);
	rc = st ? collect_rows(c, st, sizeof(**out), row_sample_ref, "resident samples",
			       (void **)out, n)
		: -EIO;
	unlock(c);
	return rc;
}
