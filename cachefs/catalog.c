/*
 * catalog.c - the SQLite catalog of a cache directory: open, schema and
 * migrations, transactions, the statement cache and the row reader.
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
 *            a path never names different bytes, though the rows of GONE
 *            FILEs are deleted (the id mark keeps their highest id).
 *
 * Invariants of shared/DESIGN.md the catalog upholds.
 *   DESIGN 1  ids are never reused: next_id starts above every id in the
 *             table, the id mark (table id_mark: the highest id of a
 *             deleted row, kept by the trigger id_mark_delete on every
 *             delete from `shards`) and every id seen on disk.
 *   DESIGN 2  the last step of sealing: a FILE row and all its SAMPLE rows
 *             are committed in one transaction (cfs_catalog_shard_insert),
 *             after the caller renamed the file; the row lists the file in
 *             `unsynced` until the store's next sync point.
 *   DESIGN 4  the catalog is what the budget is rebuilt from at start
 *             (reconcile.c sums the bytes of the SEALED rows whose files
 *             survive; EVICTING ones are finished then).
 *   DESIGN 6  reconcile.c reads every FILE row in one query
 *             (shards_list) and drops rows in one transaction (shards_drop).
 *   DESIGN 7  keys are stored as data only; display names of raw objects
 *             are unique among non-GONE rows (partial unique index).
 * Local ones.
 *   C1  every SAMPLE row, and every shard_objects row, belongs to a FILE
 *       row (shards_gone and shards_drop delete them in the same
 *       transaction that deletes the FILE row; no row is GONE).
 *   C2  per (source, key) at most one OBJECT row is not STALE (partial
 *       unique index objects_current).
 *   C3  epochs counters only grow, each in the transaction of the change
 *       it counts (insert -> admitted, evict -> evicted, gone -> unread,
 *       stats -> read, served and full).
 *   C4  the one row of `resident` holds the count, bytes and records of
 *       the SEALED FILE rows: triggers on `shards` keep it in the
 *       transaction of each change, so reading it costs no scan.
 *
 * States of a FILE and the function that moves it.
 *
 *      (tmp/ file, no row)
 *           |  cfs_catalog_shard_insert          (shard_writer.c seal)
 *           v
 *        SEALED --------------------------.
 *           |  cfs_catalog_shards_evict     |  cfs_catalog_shards_drop
 *           |  cfs_catalog_shard_withdraw   |
 *           v                               |  (reconcile: file missing
 *        EVICTING -------------------------|   or wrong size; row deleted)
 *           |  cfs_catalog_shards_gone      |
 *           v                               v
 *         GONE (row deleted with its        (no row)
 *               samples; an unread victim
 *               counted into its epoch)
 *
 * No row stays GONE (version 10): the catalog holds the FILEs resident or
 * leaving, not the history; the epochs counters keep what a report needs
 * of the history (files admitted, evicted, evicted unread, read to the
 * end), and the id mark keeps the ids taken.
 *
 * Schema versions.  PRAGMA user_version holds the schema version.  The
 * array `migrations` below lists, in order, the SQL that takes version
 * i to i + 1; opening runs the missing ones in one transaction and records
 * each in table `migrations`.  A version above CFS_SCHEMA_VERSION is
 * refused, so an old binary never writes a newer catalog.
 *
 * Statements.  Every statement is prepared once (lazily) with
 * SQLITE_PREPARE_PERSISTENT and cached in c->stmt[]; bulk operations run
 * in one transaction, nested calls as savepoints.  The SQL of a statement
 * sits in the file that runs it (catalog_i.h lists the ids per file); the
 * values of the state enums reach SQL only through catalog_i.h's SQL_*
 * literals.  Every query that returns a list reads it through one row
 * reader, cfs__collect_rows.
 *
 * Checks.  Builds without NDEBUG assert C1 after every change that deletes
 * a FILE row (catalog_files.c: the rows of the FILEs just
 * touched, one indexed COUNT each), and C3 at every counter add
 * (catalog_epochs.c: the new value is an integer no smaller than the
 * delta, and the delta is not negative).  C2 is the unique index.  C4 is
 * asserted at every read of the resident totals while at most 4096 files
 * are resident (a scan of the file rows: not in a large cache's `status`).
 *
 * Locking.  c->mu (recursive) protects the sqlite3 handle, c->stmt[],
 * c->depth and c->explicit_txn.  It is held for a whole call, or from
 * cfs_catalog_begin() to commit/rollback.  Lock order in cachefs (written
 * once, here): catalog mu, then budget mu.  The budget's mutex is a leaf
 * (budget.c calls nothing while holding it); a caller inside
 * cfs_catalog_begin() may touch the budget, never the reverse (a boundary
 * moves its victims' bytes only after its commit: cfs_store_evicted).  No function of the catalog
 * calls the budget.  c->next_id is an atomic and needs no lock.
 *
 * Files.  The catalog is split by table family behind catalog_i.h:
 *   catalog.c          this note; open/close, schema and migrations,
 *                      transactions, the statement cache, the row reader,
 *                      integrity check, file ids and the id mark.
 *   catalog_objects.c  sources and objects: listing merge, object lists,
 *                      fetch counts, files of STALE objects.
 *   catalog_files.c    FILE rows, SAMPLE rows and FILE OBJECTS: the state
 *                      moves of the diagram, read statistics, `served`.
 *   catalog_epochs.c   epochs rows and their counters (C3).
 *   catalog_plan.c     the sampling plan: plans, plan_objects, plan_marks,
 *                      plan_partial, plan_cut.
 */
#include "cachefs/catalog_i.h"

#include "common/clock.h"
#include "common/fault.h"
#include "common/log.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    "CREATE UNIQUE INDEX objects_current ON objects(source_id, key) "
    "WHERE state != " SQL_OBJ_STALE ";\n"
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
    "CREATE UNIQUE INDEX shards_name ON shards(name) "
    "WHERE state != " SQL_GONE " AND name IS NOT NULL;\n"
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
    /*
     * 4 -> 5: the resident totals kept as files change (one row, kept by
     * triggers in the transaction of each change), so that reading them
     * is O(1), not a scan of every file row ever sealed
     */
    "CREATE TABLE resident(\n"
    "  id INTEGER PRIMARY KEY CHECK (id = 0),\n"
    "  files INTEGER NOT NULL,\n"
    "  bytes INTEGER NOT NULL,\n"
    "  records INTEGER NOT NULL);\n"
    "INSERT INTO resident SELECT 0, count(*), coalesce(sum(bytes), 0), "
    "coalesce(sum(records), 0) FROM shards WHERE state = " SQL_SEALED ";\n"
    "CREATE TRIGGER resident_insert AFTER INSERT ON shards WHEN NEW.state = " SQL_SEALED
    " BEGIN UPDATE resident SET files = files + 1, bytes = bytes + NEW.bytes, "
    "records = records + NEW.records; END;\n"
    "CREATE TRIGGER resident_delete AFTER DELETE ON shards WHEN OLD.state = " SQL_SEALED
    " BEGIN UPDATE resident SET files = files - 1, bytes = bytes - OLD.bytes, "
    "records = records - OLD.records; END;\n"
    "CREATE TRIGGER resident_update AFTER UPDATE OF state, bytes, records ON shards "
    "WHEN OLD.state = " SQL_SEALED " OR NEW.state = " SQL_SEALED " BEGIN UPDATE resident SET "
    "files = files - (OLD.state = " SQL_SEALED ") + (NEW.state = " SQL_SEALED "), "
    "bytes = bytes - (CASE WHEN OLD.state = " SQL_SEALED " THEN OLD.bytes ELSE 0 END) "
    "+ (CASE WHEN NEW.state = " SQL_SEALED " THEN NEW.bytes ELSE 0 END), "
    "records = records - (CASE WHEN OLD.state = " SQL_SEALED " THEN OLD.records ELSE 0 END) "
    "+ (CASE WHEN NEW.state = " SQL_SEALED " THEN NEW.records ELSE 0 END); END;\n",
    /*
     * 5 -> 6: the STALE objects, few among many, found without a scan of
     * `objects` (cfs_catalog_shards_with_stale_objects runs after each
     * listing that changed an object)
     */
    "CREATE INDEX objects_stale ON objects(id) WHERE state = " SQL_OBJ_STALE ";\n",
    /*
     * 6 -> 7: the digest of a TFRecord file's record CRCs (cfs_digest_add),
     * which the read path's first pass checks; NULL for files sealed before
     */
    "ALTER TABLE shards ADD COLUMN records_crc INTEGER;\n",
    /*
     * 7 -> 8: the files sealed since the last sync point (store.c): a row
     * a file gets in its seal's transaction (trigger), deleted once a
     * fsync made its bytes durable; start-up verifies the files still
     * listed (reconcile.c).  Files of earlier versions were fsynced.
     */
    "CREATE TABLE unsynced(\n"
    "  seq INTEGER PRIMARY KEY,\n"
    "  file_id INTEGER NOT NULL);\n"
    "CREATE TRIGGER unsynced_insert AFTER INSERT ON shards "
    "BEGIN INSERT INTO unsynced(file_id) VALUES (NEW.id); END;\n",
    /*
     * 8 -> 9: the indexes move out of plan_objects into plan_index, so that
     * reading the plan's objects reads no index (a WITHOUT ROWID row's every
     * column after its key is read with its overflow pages); plan_objects
     * gets the length of its index and the bytes of its records (NULL in the
     * rows before: the sampler writes them); a sample gets its record's
     * line in its object's index (NULL in the rows before)
     */
    "CREATE TABLE plan_index(\n"
    "  plan_id INTEGER NOT NULL,\n"
    "  object_id INTEGER NOT NULL,\n"
    "  idx BLOB NOT NULL,\n"
    "  PRIMARY KEY(plan_id, object_id));\n"
    "INSERT INTO plan_index(plan_id, object_id, idx) "
    "SELECT plan_id, object_id, idx FROM plan_objects WHERE idx IS NOT NULL;\n"
    "CREATE TABLE plan_objects_9(\n"
    "  plan_id INTEGER NOT NULL,\n"
    "  object_id INTEGER NOT NULL,\n"
    "  first_unit INTEGER NOT NULL,\n"
    "  units INTEGER NOT NULL,\n"
    "  idx_bytes INTEGER NOT NULL DEFAULT 0,\n"
    "  record_bytes INTEGER,\n"
    "  PRIMARY KEY(plan_id, object_id)) WITHOUT ROWID;\n"
    "INSERT INTO plan_objects_9(plan_id, object_id, first_unit, units, idx_bytes) "
    "SELECT plan_id, object_id, first_unit, units, coalesce(length(idx), 0) "
    "FROM plan_objects;\n"
    "DROP TABLE plan_objects;\n"
    "ALTER TABLE plan_objects_9 RENAME TO plan_objects;\n"
    "ALTER TABLE samples ADD COLUMN ordinal INTEGER;\n",
    /*
     * 9 -> 10: a FILE row is deleted when the FILE is GONE, so the catalog
     * no longer grows with the history.  Ids stay unique (DESIGN 1): the one
     * row of id_mark holds the highest id of a deleted FILE row (starting at
     * the highest id found here), kept by a trigger on every delete (gone,
     * reconciliation's drop, this step), and the allocator starts above it
     * and above every row.  One row and a
     * trigger are simpler than keeping the highest GONE row: no reader of
     * `shards` then has to skip it, nor any path that deletes a row see to
     * it.  What `report` counted from the rows of evicted files becomes
     * counters of `epochs`, filled here from the rows found (the
     * UPDATE ... FROM of a GROUP BY: one scan of `shards` each, not one per
     * epoch), before the GONE rows are deleted.
     */
    "CREATE TABLE id_mark(\n"
    "  id INTEGER PRIMARY KEY CHECK (id = 0),\n"
    "  high INTEGER NOT NULL);\n"
    "INSERT INTO id_mark SELECT 0, coalesce(max(id), 0) FROM shards;\n"
    "CREATE TRIGGER id_mark_delete AFTER DELETE ON shards "
    "BEGIN UPDATE id_mark SET high = max(high, OLD.id); END;\n"
    "ALTER TABLE epochs ADD COLUMN admitted_files INTEGER NOT NULL DEFAULT 0;\n"
    "ALTER TABLE epochs ADD COLUMN evicted_files INTEGER NOT NULL DEFAULT 0;\n"
    "ALTER TABLE epochs ADD COLUMN unread_files INTEGER NOT NULL DEFAULT 0;\n"
    "ALTER TABLE epochs ADD COLUMN unread_bytes INTEGER NOT NULL DEFAULT 0;\n"
    "ALTER TABLE epochs ADD COLUMN full_files INTEGER NOT NULL DEFAULT 0;\n"
    "ALTER TABLE epochs ADD COLUMN full_records INTEGER NOT NULL DEFAULT 0;\n"
    "UPDATE epochs SET admitted_files = a.files, full_files = a.full, "
    "full_records = a.records FROM (SELECT created_epoch AS number, count(*) AS files, "
    "sum(full_reads > 0) AS full, sum(CASE WHEN full_reads > 0 THEN records ELSE 0 END) "
    "AS records FROM shards GROUP BY created_epoch) AS a WHERE epochs.number = a.number;\n"
    "UPDATE epochs SET evicted_files = v.files, unread_files = v.unread, "
    "unread_bytes = v.bytes FROM (SELECT evicted_epoch AS number, count(*) AS files, "
    "sum(state = " SQL_GONE " AND full_reads = 0) AS unread, "
    "sum(CASE WHEN state = " SQL_GONE " AND full_reads = 0 THEN bytes ELSE 0 END) AS bytes "
    "FROM shards WHERE evicted_epoch >= 0 GROUP BY evicted_epoch) AS v "
    "WHERE epochs.number = v.number;\n"
    "DELETE FROM shards WHERE state = " SQL_GONE ";\n",
    /*
     * 10 -> 11: a raw file's CRC (its one sample's) is in its `shards` row
     * too, as records_crc, so that a list of the files (reconciliation,
     * every boundary) reads its rows alone, not a sample per raw file
     */
    "UPDATE shards SET records_crc = (SELECT crc FROM samples "
    "WHERE shard_id = shards.id AND offset = 0) WHERE kind = " SQL_KIND_RAW ";\n",
    /*
     * 11 -> 12: the display name index's predicate names only `name`: its
     * `state != GONE` held for every row since version 10, and an UPDATE
     * of state rewrote the file's entry in it (a boundary's victims: 10 us
     * a row against 3.5 us without, 40,000 rows, sqlite3 3.40)
     */
    "DROP INDEX shards_name;\n"
    "CREATE UNIQUE INDEX shards_name ON shards(name) "
    "WHERE name IS NOT NULL;\n",
};
_Static_assert(sizeof(migrations) / sizeof(migrations[0]) == CFS_SCHEMA_VERSION,
	       "one migration per schema version");

/* ---- cached statements ------------------------------------------------- */

static const char *const sql_catalog[S__COUNT] = {
    /* DESIGN 1: above every row and every deleted row (id_mark, version 10) */
    [S_MAX_ID] = "SELECT max((SELECT coalesce(max(id), 0) FROM shards), "
		 "(SELECT high FROM id_mark))",
};

/* The SQL tables of the catalog's files; each id is defined in exactly one. */
static const char *const *const sql_tables[] = {
    sql_catalog, cfs__sql_objects, cfs__sql_files, cfs__sql_epochs, cfs__sql_plan,
};

/* The SQL of statement id: the one table that defines it; NULL if none. */
static const char *sql_of(enum stmt_id id)
{
	for (size_t t = 0; t < sizeof(sql_tables) / sizeof(sql_tables[0]); t++)
		if (sql_tables[t][id])
			return sql_tables[t][id];
	return NULL;
}

#ifndef NDEBUG
/* Every statement id has its SQL in exactly one file's table. */
static void assert_sql_tables(void)
{
	for (int id = 0; id < S__COUNT; id++) {
		int defs = 0;
		for (size_t t = 0; t < sizeof(sql_tables) / sizeof(sql_tables[0]); t++)
			defs += sql_tables[t][id] != NULL;
		assert(defs == 1);
	}
}
#else
#define assert_sql_tables() ((void)0)
#endif

/* ---- helpers ----------------------------------------------------------- */

int cfs__sqlerr(int rc)
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

int cfs__fail(struct cfs_catalog *c, int rc, const char *what)
{
	cmn_log(CMN_LOG_ERROR, "catalog %s: %s: %s", c->path, what, sqlite3_errmsg(c->db));
	return cfs__sqlerr(rc);
}

sqlite3_stmt *cfs__stmt(struct cfs_catalog *c, enum stmt_id id)
{
	sqlite3_stmt *st = c->stmt[id];

	if (!st) {
		const char *sql = sql_of(id);
		int rc =
		    sql ? sqlite3_prepare_v3(c->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL)
			: SQLITE_INTERNAL;
		if (rc != SQLITE_OK) {
			cfs__fail(c, rc, "prepare");
			return NULL;
		}
		c->stmt[id] = st;
		return st;
	}
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return st;
}

int cfs__run(struct cfs_catalog *c, sqlite3_stmt *st, const char *what)
{
	int rc = sqlite3_step(st);

	if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
		int e = (rc & 0xff) == SQLITE_CONSTRAINT ? cfs__sqlerr(rc) : cfs__fail(c, rc, what);
		sqlite3_reset(st);
		return e;
	}
	sqlite3_reset(st);
	return 0;
}

int cfs__exec(struct cfs_catalog *c, const char *sql)
{
	char *msg = NULL;
	int rc = sqlite3_exec(c->db, sql, NULL, NULL, &msg);

	if (rc != SQLITE_OK) {
		cmn_log(CMN_LOG_ERROR, "catalog %s: %s: %s", c->path, sql,
			msg ? msg : sqlite3_errstr(rc));
		sqlite3_free(msg);
		return cfs__sqlerr(rc);
	}
	return 0;
}

void cfs__lock(struct cfs_catalog *c)
{
	pthread_mutex_lock(&c->mu);
}

void cfs__unlock(struct cfs_catalog *c)
{
	pthread_mutex_unlock(&c->mu);
}

int cfs__txn_begin(struct cfs_catalog *c)
{
	int rc;

	cfs__lock(c);
	rc = cfs__exec(c, c->depth == 0 ? "BEGIN IMMEDIATE" : "SAVEPOINT cfs_sp");
	if (rc < 0) {
		cfs__unlock(c);
		return rc;
	}
	c->depth++;
	return 0;
}

int cfs__txn_end(struct cfs_catalog *c, int ok)
{
	int rc = 0;

	assert(ok <= 0 && "cfs__txn_end: ok is 0 or -errno");
	if (ok > 0)
		ok = -EIO; /* rolled back: never reported as committed */
	c->depth--;
	if (c->depth == 0) {
		if (ok == 0) {
			cmn_fault("in_commit");
			rc = cfs__exec(c, "COMMIT");
			if (rc < 0)
				cfs__exec(c, "ROLLBACK");
		} else {
			cfs__exec(c, "ROLLBACK");
		}
	} else {
		if (ok == 0) {
			rc = cfs__exec(c, "RELEASE cfs_sp");
		} else {
			cfs__exec(c, "ROLLBACK TO cfs_sp");
			cfs__exec(c, "RELEASE cfs_sp");
		}
	}
	cfs__unlock(c);
	return ok < 0 ? ok : rc;
}

void cfs__note_id(struct cfs_catalog *c, int64_t id)
{
	int64_t cur = atomic_load(&c->next_id);
	while (id >= cur && !atomic_compare_exchange_weak(&c->next_id, &cur, id + 1))
		;
}

/* ---- the row reader ---------------------------------------------------- */

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

int cfs__each_row(struct cfs_catalog *c, sqlite3_stmt *st, cfs__each_fn each, void *ctx,
		  const char *what)
{
	int rc, e = 0;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW && (e = each(st, ctx)) == 0)
		;
	sqlite3_reset(st);
	if (e)
		return e;
	return rc == SQLITE_DONE ? 0 : cfs__fail(c, rc, what);
}

/* cfs__collect_rows's array, grown by one element a row. */
struct collect {
	char *arr;
	size_t cnt, cap, elem;
	cfs__row_fn row;
};

static int collect_row(sqlite3_stmt *st, void *ctx)
{
	struct collect *k = ctx;
	int e = grow_array((void **)&k->arr, &k->cap, k->cnt, k->elem);
	if (e < 0)
		return e;
	char *el = k->arr + k->cnt++ * k->elem;
	memset(el, 0, k->elem);
	return k->row(st, el); /* counted even on failure: drop() frees its part */
}

int cfs__collect_rows(struct cfs_catalog *c, sqlite3_stmt *st, size_t elem, cfs__row_fn row,
		      cfs__rows_free_fn drop, const char *what, void **out, size_t *n)
{
	struct collect k = {.elem = elem, .row = row};
	int e = cfs__each_row(c, st, collect_row, &k, what);

	if (e < 0) {
		if (drop)
			drop(k.arr, k.cnt);
		else
			free(k.arr);
		return e;
	}
	*out = k.arr;
	*n = k.cnt;
	return 0;
}

static int row_id(sqlite3_stmt *st, void *el)
{
	*(int64_t *)el = sqlite3_column_int64(st, 0);
	return 0;
}

int cfs__collect_ids(struct cfs_catalog *c, sqlite3_stmt *st, int64_t **out, size_t *n)
{
	return cfs__collect_rows(c, st, sizeof(**out), row_id, NULL, "id query", (void **)out, n);
}

char *cfs__dup_col(sqlite3_stmt *st, int col, bool *oom)
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

	rc = cfs__exec(c, "BEGIN IMMEDIATE");
	if (rc < 0)
		goto fail;
	/* re-read under the write lock: another opener may have migrated */
	if (read_user_version(c, &v) != SQLITE_OK) {
		rc = -EIO;
		goto rollback;
	}
	for (int i = v; i < CFS_SCHEMA_VERSION; i++) {
		rc = cfs__exec(c, migrations[i]);
		if (rc < 0)
			goto rollback;
		snprintf(sql, sizeof(sql),
			 "INSERT INTO migrations(version, applied_ms) VALUES(%d, %" PRIu64 ")",
			 i + 1, cmn_wall_ms());
		rc = cfs__exec(c, sql);
		if (rc < 0)
			goto rollback;
	}
	snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", CFS_SCHEMA_VERSION);
	rc = cfs__exec(c, sql);
	if (rc < 0)
		goto rollback;
	rc = cfs__exec(c, "COMMIT");
	if (rc < 0)
		goto rollback;
	return 0;

rollback:
	cfs__exec(c, "ROLLBACK");
fail:
	snprintf(err, errlen,
		 "%s: cannot create or migrate the catalog schema (%s): check the disk "
		 "and permissions of the cache directory",
		 c->path, sqlite3_errmsg(c->db));
	return rc;
}

/*
 * cfs_catalog_open in steps: open_handle (memory, mutex, the SQLite
 * connection), open_check_version (refuse what this binary must not
 * write), open_setup (read-only pragma, or WAL pragmas and migrations),
 * open_next_id (the id allocator above every row).  Each step fills err
 * and returns -errno on failure; the caller closes the handle.
 */

/* A handle with its mutex and path; NULL when out of memory. */
static struct cfs_catalog *open_alloc(const char *path, unsigned flags)
{
	struct cfs_catalog *c = calloc(1, sizeof(*c));
	pthread_mutexattr_t ma;

	if (!c)
		return NULL;
	c->path = strdup(path);
	if (!c->path) {
		free(c);
		return NULL;
	}
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&c->mu, &ma);
	pthread_mutexattr_destroy(&ma);
	c->readonly = (flags & CFS_CATALOG_READONLY) != 0;
	return c;
}

static int open_connection(struct cfs_catalog *c, char *err, size_t errlen)
{
	/* Our own mutex serializes use, so SQLite needs none of its own. */
	int oflags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE;
	int rc;

	oflags |= c->readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
	rc = sqlite3_open_v2(c->path, &c->db, oflags, NULL);
	if (rc != SQLITE_OK) {
		snprintf(err, errlen,
			 "%s: cannot open the catalog: %s: check that the cache "
			 "directory exists and is writable",
			 c->path, c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc));
		return cfs__sqlerr(rc);
	}
	sqlite3_busy_timeout(c->db, 10000);
	return 0;
}

/* Reads the schema version into c->found_version; refuses a foreign or newer file. */
static int open_check_version(struct cfs_catalog *c, char *err, size_t errlen)
{
	int v = 0, rc = read_user_version(c, &v);

	if ((rc & 0xff) == SQLITE_NOTADB || (rc & 0xff) == SQLITE_CORRUPT) {
		snprintf(err, errlen,
			 "%s: not a SQLite database (damaged or foreign file); "
			 "nothing was deleted: move it away (or point cache_dir elsewhere) to "
			 "start a fresh cache",
			 c->path);
		return -EBADMSG;
	}
	if (rc != SQLITE_OK) {
		snprintf(err, errlen, "%s: cannot read the catalog: %s", c->path,
			 sqlite3_errmsg(c->db));
		return cfs__sqlerr(rc);
	}
	c->found_version = v;
	if (v > CFS_SCHEMA_VERSION) {
		snprintf(err, errlen,
			 "%s: catalog schema version %d is newer than this rollcache "
			 "understands (%d): upgrade rollcache, or use another cache_dir",
			 c->path, v, CFS_SCHEMA_VERSION);
		return -EPROTONOSUPPORT;
	}
	if (c->readonly && v < CFS_SCHEMA_VERSION) {
		snprintf(err, errlen,
			 "%s: catalog schema version %d, expected %d: open the "
			 "cache once with `rollcache mount` or `ingest` to migrate it",
			 c->path, v, CFS_SCHEMA_VERSION);
		return v == 0 ? -ENOENT : -EPROTONOSUPPORT;
	}
	return 0;
}

/* Read-only: query_only.  Read-write: WAL pragmas, then the missing migrations. */
static int open_setup(struct cfs_catalog *c, char *err, size_t errlen)
{
	int rc;

	if (c->readonly) {
		cfs__exec(c, "PRAGMA query_only = ON");
		return 0;
	}
	rc = cfs__exec(c, "PRAGMA journal_mode = WAL");
	if (rc == 0)
		rc = cfs__exec(c, "PRAGMA synchronous = NORMAL");
	if (rc == 0)
		rc = cfs__exec(c, "PRAGMA foreign_keys = ON");
	/*
	 * 8 MiB of page cache.  The catalog's big b-trees (objects, one row a
	 * listed object: 40 MB at 10^6) are walked in key order by the listing
	 * merge, which a larger cache does not speed up, and a page missed is
	 * read back from the kernel's page cache.  At 10^6 listed objects, 32
	 * MiB cost the daemon and ingest 17-24 MiB of peak RSS and no time
	 * (docs/scale.md, "Memory per listed raw object").
	 */
	if (rc == 0)
		rc = cfs__exec(c, "PRAGMA cache_size = -8192");
	if (rc < 0) {
		snprintf(err, errlen,
			 "%s: cannot set up the catalog (WAL journal): %s: "
			 "check that the cache directory is writable",
			 c->path, sqlite3_errmsg(c->db));
		return rc;
	}
	return c->found_version < CFS_SCHEMA_VERSION ? migrate(c, err, errlen) : 0;
}

/*
 * next_id starts above every id in the table and the highest id of a
 * deleted row (id_mark), so no id of a GONE file comes back (DESIGN 1).
 */
static void open_next_id(struct cfs_catalog *c)
{
	sqlite3_stmt *st = cfs__stmt(c, S_MAX_ID);
	int64_t max = 0;

	if (st && sqlite3_step(st) == SQLITE_ROW)
		max = sqlite3_column_int64(st, 0);
	if (st)
		sqlite3_reset(st);
	atomic_store(&c->next_id, max + 1);
}

int cfs_catalog_open(struct cfs_catalog **out, const char *path, unsigned flags, char *err,
		     size_t errlen)
{
	struct cfs_catalog *c;
	int rc;

	assert_sql_tables();
	c = open_alloc(path, flags);
	if (!c) {
		snprintf(err, errlen, "%s: out of memory", path);
		return -ENOMEM;
	}
	rc = open_connection(c, err, errlen);
	if (rc == 0)
		rc = open_check_version(c, err, errlen);
	if (rc == 0)
		rc = open_setup(c, err, errlen);
	if (rc < 0) {
		cfs_catalog_close(c);
		return rc;
	}
	open_next_id(c);
	*out = c;
	return 0;
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

	cfs__lock(c);
	if (c->depth != 0) {
		cfs__unlock(c);
		return -EINVAL;
	}
	rc = cfs__txn_begin(c); /* takes mu a second time: released by commit */
	if (rc < 0) {
		cfs__unlock(c);
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
	rc = cfs__txn_end(c, 0);
	cfs__unlock(c);
	return rc;
}

void cfs_catalog_rollback(struct cfs_catalog *c)
{
	if (!c->explicit_txn || c->depth != 1)
		return;
	c->explicit_txn = false;
	cfs__txn_end(c, -ECANCELED);
	cfs__unlock(c);
}

/*
 * The snapshot is taken by the first read after BEGIN and kept until
 * COMMIT; depth 1 makes cfs_catalog_begin() refuse meanwhile, and
 * explicit_txn stays false so commit/rollback refuse too.
 */
int cfs_catalog_read_begin(struct cfs_catalog *c)
{
	cfs__lock(c);
	if (c->depth != 0) {
		cfs__unlock(c);
		return -EINVAL;
	}
	int rc = cfs__exec(c, "BEGIN DEFERRED");
	if (rc < 0) {
		cfs__unlock(c);
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
	cfs__exec(c, "COMMIT");
	cfs__unlock(c);
}

/* ---- file ids ---------------------------------------------------------- */

int64_t cfs_catalog_alloc_id(struct cfs_catalog *c)
{
	return atomic_fetch_add(&c->next_id, 1);
}

void cfs_catalog_note_id(struct cfs_catalog *c, int64_t id)
{
	cfs__note_id(c, id);
}

/* ---- maintenance ------------------------------------------------------- */

int cfs_catalog_integrity_check(struct cfs_catalog *c, char *err, size_t errlen)
{
	sqlite3_stmt *st = NULL;
	int rc;

	cfs__lock(c);
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
			for (char *p = err; *p; p++) /* one line */
				if (*p == '\n')
					*p = ' ';
			rc = -EBADMSG;
		}
	} else {
		snprintf(err, errlen, "%s: integrity check could not run: %s", c->path,
			 sqlite3_errmsg(c->db));
		rc = cfs__sqlerr(rc) ? cfs__sqlerr(rc) : -EIO;
	}
	sqlite3_finalize(st);
	cfs__unlock(c);
	return rc;
}
