/*
 * catalog_files.c - FILE rows of the catalog with their SAMPLE rows and
 * FILE OBJECTS: sealing's commit (cfs_catalog_shard_insert), the moves of
 * the state diagram (evict, withdraw, gone, drop), file lists, read
 * statistics and the records served.
 *
 * Keeps DESIGN 2 (a FILE row and all its SAMPLE rows in one transaction)
 * and C1 (shards_gone, shards_drop and shard_withdraw delete the SAMPLE and
 * FILE OBJECTS rows in the transaction that changes or deletes the FILE
 * row; builds without NDEBUG assert it after shards_gone and shards_drop
 * for the FILEs just deleted).  A GONE FILE's row is deleted (version 10);
 * the trigger id_mark_delete keeps its id taken (DESIGN 1).  The epochs
 * counters it moves are written by catalog_epochs.c, the plan rows by
 * catalog_plan.c, in the same transaction.  Terms, invariants and
 * locking: the design note of catalog.c.
 */
#include "cachefs/catalog_i.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* records_crc: a TFRecord file's digest; a raw object's CRC-32C (schema 11) */
#define SHARD_COLUMNS                                                                              \
	"id, kind, state, bytes, records, created_epoch, reads, last_read_ms, full_reads, "        \
	"object_id, name, evicted_epoch, records_crc, records_crc IS NOT NULL"

const char *const cfs__sql_files[S__COUNT] = {
    [S_SHARD_ADD] =
	"INSERT INTO shards(id, kind, state, bytes, records, created_epoch, "
	"object_id, name, records_crc) VALUES(?1, ?2, " SQL_SEALED ", ?3, ?4, ?5, ?6, ?7, ?8)",
    [S_SAMPLE_ADD] = "INSERT INTO samples(shard_id, offset, length, crc, object_id, "
		     "object_offset, admitted_epoch, ordinal) "
		     "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    [S_SHOBJ_ADD] = "INSERT OR IGNORE INTO shard_objects(shard_id, object_id) VALUES(?1, ?2)",
    [S_SHOBJ_DEL] = "DELETE FROM shard_objects WHERE shard_id = ?1",
    /* a withdrawn file's objects whose records were copied into another file */
    [S_SHOBJ_DEL_CURRENT] = "DELETE FROM shard_objects WHERE shard_id = ?1 AND NOT EXISTS "
			    "(SELECT 1 FROM objects o WHERE o.id = shard_objects.object_id "
			    "AND o.state = " SQL_OBJ_STALE ")",
    [S_SHARD_LIST] = "SELECT " SHARD_COLUMNS " FROM shards "
		     "WHERE ((1 << state) & ?1) != 0 ORDER BY id",
    [S_SHARD_GET] = "SELECT " SHARD_COLUMNS " FROM shards WHERE id = ?1",
    [S_SHARD_STATS] = "UPDATE shards SET reads = reads + ?2, full_reads = full_reads + ?3, "
		      "last_read_ms = max(last_read_ms, ?4) WHERE id = ?1 "
		      "RETURNING full_reads, created_epoch, records",
    /* a boundary's victims, ?1 a JSON array of their ids (cfs_catalog_shards_evict) */
    [S_SHARDS_EVICT_SUM] =
	"SELECT count(*), coalesce(sum(bytes), 0), coalesce(sum(records), 0) "
	"FROM shards WHERE state = " SQL_SEALED " AND id IN (SELECT value FROM json_each(?1))",
    [S_SHARDS_EVICT_SET] = "UPDATE shards SET state = " SQL_EVICTING ", evicted_epoch = ?2 "
			   "WHERE id IN (SELECT value FROM json_each(?1))",
    /* GONE: the row goes (its id stays taken: trigger id_mark_delete) */
    [S_SHARD_GONE] = "DELETE FROM shards WHERE id = ?1 RETURNING evicted_epoch, full_reads, bytes",
    [S_SAMPLES_DEL] = "DELETE FROM samples WHERE shard_id = ?1",
    [S_SHARD_DEL] = "DELETE FROM shards WHERE id = ?1",
    [S_SAMPLES_OF] = "SELECT offset, length, crc, object_id, object_offset FROM samples "
		     "WHERE shard_id = ?1 ORDER BY offset",
    /* records of objects not STALE (object 0: not known to be stale) */
    [S_SAMPLES_CURRENT] = "SELECT s.offset, s.length, s.crc, s.object_id, s.object_offset "
			  "FROM samples s LEFT JOIN objects o ON o.id = s.object_id "
			  "WHERE s.shard_id = ?1 AND (o.id IS NULL OR o.state != " SQL_OBJ_STALE
			  ") ORDER BY s.offset",
    /* O(1): one row kept by triggers (catalog.c, migration 4 -> 5) */
    [S_RESIDENT] = "SELECT files, bytes, records FROM resident",
    /* C4: what the resident row must equal (debug builds) */
    [S_C4_SCAN] = "SELECT count(*), coalesce(sum(bytes), 0), coalesce(sum(records), 0) "
		  "FROM shards WHERE state = " SQL_SEALED,
    [S_SERVED_ADD] = "INSERT OR IGNORE INTO served(object_id, object_offset) "
		     "SELECT object_id, object_offset FROM samples WHERE shard_id = ?1",
    /* C1 for FILE ?1: its SAMPLE and FILE OBJECTS rows without a FILE row */
    [S_C1_ORPHANS] = "SELECT count(*) FROM (SELECT shard_id FROM samples WHERE shard_id = ?1 "
		     "UNION ALL SELECT shard_id FROM shard_objects WHERE shard_id = ?1) "
		     "WHERE NOT EXISTS (SELECT 1 FROM shards f WHERE f.id = ?1)",
    /* sync points (table unsynced: catalog.c, version 8) */
    [S_UNSYNCED_MAX] = "SELECT coalesce(max(seq), 0) FROM unsynced",
    [S_UNSYNCED_CLEAR] = "DELETE FROM unsynced WHERE seq <= ?1",
    [S_UNSYNCED_LIST] = "SELECT DISTINCT file_id FROM unsynced ORDER BY file_id",
};

#ifndef NDEBUG
/*
 * Asserts C1 for the n FILEs ids (in the transaction that deleted their
 * rows): no SAMPLE or FILE OBJECTS row of theirs lacks a FILE row.  One
 * indexed COUNT per id.  A statement that cannot run (out of
 * memory) checks nothing.
 */
static void assert_c1(struct cfs_catalog *c, const int64_t *ids, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		sqlite3_stmt *st = cfs__stmt(c, S_C1_ORPHANS);
		if (!st)
			return;
		sqlite3_bind_int64(st, 1, ids[i]);
		int rc = sqlite3_step(st);
		int64_t orphans = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
		sqlite3_reset(st);
		assert(orphans == 0 && "C1: samples or shard_objects of a FILE without a row");
	}
}

/*
 * Asserts C4: the resident row (kept by triggers) equals the totals of the
 * SEALED rows, by a scan of the file rows.  Builds without NDEBUG only, and
 * only while C4_CHECK_MAX files are resident: the default build keeps its
 * asserts, and `status` must not scan a large cache (the test caches are
 * far smaller).
 */
#define C4_CHECK_MAX 4096
static void assert_c4(struct cfs_catalog *c, const struct cfs_resident *r)
{
	if (r->files > C4_CHECK_MAX)
		return;
	sqlite3_stmt *st = cfs__stmt(c, S_C4_SCAN);
	if (!st)
		return;
	if (sqlite3_step(st) == SQLITE_ROW) {
		assert((uint64_t)sqlite3_column_int64(st, 0) == r->files &&
		       (uint64_t)sqlite3_column_int64(st, 1) == r->bytes &&
		       (uint64_t)sqlite3_column_int64(st, 2) == r->records &&
		       "C4: the resident row differs from the SEALED rows");
	}
	sqlite3_reset(st);
}
#else
#define assert_c1(c, ids, n) ((void)0)
#define assert_c4(c, r)	     ((void)0)
#endif

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/* ---- sealing ----------------------------------------------------------- */

/*
 * Records which objects file `id` holds samples of (one row per distinct
 * object, not per sample): the reverse index that finds the files of a
 * STALE object without indexing every sample row.  In a transaction.
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
	st = k ? cfs__stmt(c, S_SHOBJ_ADD) : NULL;
	if (k && !st)
		rc = -EIO;
	for (size_t i = 0; i < k && rc == 0; i++) {
		if (i && objs[i] == objs[i - 1])
			continue;
		sqlite3_bind_int64(st, 1, id);
		sqlite3_bind_int64(st, 2, objs[i]);
		rc = cfs__run(c, st, "file objects");
	}
	free(objs);
	return rc;
}

/* The FILE row of sh, SEALED.  In a transaction. */
static int add_shard_row(struct cfs_catalog *c, const struct cfs_shard_new *sh, size_t n_samples)
{
	sqlite3_stmt *st = cfs__stmt(c, S_SHARD_ADD);

	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, sh->id);
	sqlite3_bind_int(st, 2, sh->kind);
	sqlite3_bind_int64(st, 3, (sqlite3_int64)sh->bytes);
	sqlite3_bind_int64(st, 4, (sqlite3_int64)n_samples);
	sqlite3_bind_int64(st, 5, sh->created_epoch);
	sqlite3_bind_int64(st, 6, sh->object_id);
	if (sh->name)
		sqlite3_bind_text(st, 7, sh->name, -1, SQLITE_STATIC);
	if (sh->has_digest)
		sqlite3_bind_int64(st, 8, sh->digest);
	return cfs__run(c, st, "file insert");
}

/* The SAMPLE rows of file sh; -EINVAL for a repeated offset.  In a transaction. */
static int add_samples(struct cfs_catalog *c, const struct cfs_shard_new *sh,
		       const struct cfs_sample *samples, size_t n_samples)
{
	sqlite3_stmt *st = cfs__stmt(c, S_SAMPLE_ADD);

	if (!st)
		return -EIO;
	for (size_t i = 0; i < n_samples; i++) {
		const struct cfs_sample *s = &samples[i];
		sqlite3_bind_int64(st, 1, sh->id);
		sqlite3_bind_int64(st, 2, (sqlite3_int64)s->offset);
		sqlite3_bind_int64(st, 3, (sqlite3_int64)s->length);
		sqlite3_bind_int64(st, 4, s->crc);
		sqlite3_bind_int64(st, 5, s->object_id);
		sqlite3_bind_int64(st, 6, (sqlite3_int64)s->object_offset);
		sqlite3_bind_int64(st, 7, sh->created_epoch);
		if (s->has_ordinal)
			sqlite3_bind_int64(st, 8, s->ordinal);
		else
			sqlite3_bind_null(st, 8);
		int rc = sqlite3_step(st);
		sqlite3_reset(st);
		if (rc != SQLITE_DONE)
			return (rc & 0xff) == SQLITE_CONSTRAINT ? -EINVAL
								: cfs__fail(c, rc, "sample insert");
	}
	return 0;
}

static bool shard_new_valid(const struct cfs_shard_new *sh)
{
	return sh->id > 0 && (sh->kind == CFS_KIND_TFRECORD || sh->kind == CFS_KIND_RAW) &&
	       (sh->kind != CFS_KIND_RAW || sh->name);
}

/*
 * The rows of a sealed file, the file row first (a raw file's with its one
 * sample's CRC as records_crc), and with `admit` its admission counters.
 * In a transaction.
 */
static int add_file_rows(struct cfs_catalog *c, const struct cfs_shard_new *sh,
			 const struct cfs_sample *samples, size_t n_samples, bool admit)
{
	struct cfs_shard_new row = *sh;
	if (sh->kind == CFS_KIND_RAW && n_samples == 1) {
		row.has_digest = true;
		row.digest = samples[0].crc;
	}
	int rc = add_shard_row(c, &row, n_samples);
	if (rc == 0)
		rc = add_samples(c, sh, samples, n_samples);
	if (rc == 0)
		rc = add_shard_objects(c, sh->id, samples, n_samples);
	if (rc == 0 && sh->marks) /* the plan's units this file completes: same transaction */
		rc = cfs__plan_marks_add(c, sh->marks);
	if (rc == 0 && admit)
		rc = cfs__epoch_add(c, S_EPOCH_ADMIT, sh->created_epoch, sh->bytes, n_samples, 1);
	return rc;
}

int cfs_catalog_shard_insert(struct cfs_catalog *c, const struct cfs_shard_new *sh,
			     const struct cfs_sample *samples, size_t n_samples)
{
	int rc;

	if (!shard_new_valid(sh))
		return -EINVAL;
	rc = cfs__txn_begin(c);
	if (rc < 0)
		return rc;
	rc = cfs__txn_end(c, add_file_rows(c, sh, samples, n_samples, true));
	if (rc == 0)
		cfs__note_id(c, sh->id);
	return rc;
}

int cfs_catalog_shard_insert_flat(struct cfs_catalog *c, const struct cfs_shard_new *sh,
				  const struct cfs_sample *samples, size_t n_samples)
{
	int rc = -EINVAL;

	if (!shard_new_valid(sh))
		return -EINVAL;
	cfs__lock(c);
	if (c->explicit_txn)
		rc = add_file_rows(c, sh, samples, n_samples, false);
	cfs__unlock(c);
	if (rc == 0)
		cfs__note_id(c, sh->id);
	return rc;
}

int cfs_catalog_admit_flat(struct cfs_catalog *c, uint32_t epoch, uint64_t files, uint64_t bytes,
			   uint64_t records)
{
	int rc = -EINVAL;

	cfs__lock(c);
	if (c->explicit_txn)
		rc = cfs__epoch_add(c, S_EPOCH_ADMIT, epoch, bytes, records, files);
	cfs__unlock(c);
	return rc;
}

/* ---- file lists -------------------------------------------------------- */

static int read_shard_row(sqlite3_stmt *st, void *el)
{
	struct cfs_shard_info *f = el;
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
	f->name = cfs__dup_col(st, 10, &oom);
	f->evicted_epoch = sqlite3_column_int64(st, 11);
	f->crc = (uint32_t)sqlite3_column_int64(st, 12);
	f->has_crc = sqlite3_column_int(st, 13) != 0;
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

size_t cfs_shard_info_drop_gone(struct cfs_shard_info *arr, size_t n)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (arr[i].state == CFS_SHARD_GONE)
			free(arr[i].name);
		else
			arr[k++] = arr[i];
	}
	return k;
}

static void shard_info_drop(void *arr, size_t n)
{
	cfs_shard_info_free(arr, n);
}

int cfs_catalog_shards_list(struct cfs_catalog *c, unsigned state_mask, struct cfs_shard_info **out,
			    size_t *n)
{
	sqlite3_stmt *st;
	int rc;

	cfs__lock(c);
	st = cfs__stmt(c, S_SHARD_LIST);
	if (st)
		sqlite3_bind_int64(st, 1, state_mask);
	rc = st ? cfs__collect_rows(c, st, sizeof(**out), read_shard_row, shard_info_drop,
				    "file list", (void **)out, n)
		: -EIO;
	cfs__unlock(c);
	return rc;
}

int cfs_catalog_shard_get(struct cfs_catalog *c, int64_t id, struct cfs_shard_info *out)
{
	sqlite3_stmt *st;
	int rc;

	cfs__lock(c);
	st = cfs__stmt(c, S_SHARD_GET);
	if (!st) {
		cfs__unlock(c);
		return -EIO;
	}
	sqlite3_bind_int64(st, 1, id);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		rc = read_shard_row(st, out);
	else if (rc == SQLITE_DONE)
		rc = -ENOENT;
	else
		rc = cfs__fail(c, rc, "file get");
	sqlite3_reset(st);
	cfs__unlock(c);
	return rc;
}

static int row_sample(sqlite3_stmt *st, void *el)
{
	struct cfs_sample *s = el;

	s->offset = (uint64_t)sqlite3_column_int64(st, 0);
	s->length = (uint64_t)sqlite3_column_int64(st, 1);
	s->crc = (uint32_t)sqlite3_column_int64(st, 2);
	s->object_id = sqlite3_column_int64(st, 3);
	s->object_offset = (uint64_t)sqlite3_column_int64(st, 4);
	return 0;
}

/* The rows of statement sid (bound ?1 = file id) as samples. */
static int samples_by(struct cfs_catalog *c, enum stmt_id sid, int64_t id, struct cfs_sample **out,
		      size_t *n)
{
	sqlite3_stmt *st;
	int rc;

	cfs__lock(c);
	st = cfs__stmt(c, sid);
	if (st)
		sqlite3_bind_int64(st, 1, id);
	rc = st ? cfs__collect_rows(c, st, sizeof(**out), row_sample, NULL, "samples of file",
				    (void **)out, n)
		: -EIO;
	cfs__unlock(c);
	return rc;
}

int cfs_catalog_samples_of(struct cfs_catalog *c, int64_t id, struct cfs_sample **out, size_t *n)
{
	return samples_by(c, S_SAMPLES_OF, id, out, n);
}

int cfs_catalog_samples_current(struct cfs_catalog *c, int64_t id, struct cfs_sample **out,
				size_t *n)
{
	return samples_by(c, S_SAMPLES_CURRENT, id, out, n);
}

int cfs_catalog_resident(struct cfs_catalog *c, struct cfs_resident *out)
{
	sqlite3_stmt *st;
	int rc;

	cfs__lock(c);
	st = cfs__stmt(c, S_RESIDENT);
	if (!st) {
		cfs__unlock(c);
		return -EIO;
	}
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		out->files = (uint64_t)sqlite3_column_int64(st, 0);
		out->bytes = (uint64_t)sqlite3_column_int64(st, 1);
		out->records = (uint64_t)sqlite3_column_int64(st, 2);
		rc = 0;
	} else {
		rc = cfs__fail(c, rc, "resident totals");
	}
	sqlite3_reset(st);
	if (rc == 0)
		assert_c4(c, out);
	cfs__unlock(c);
	return rc;
}

/* ---- read statistics --------------------------------------------------- */

/*
 * Adds one delta to its file's row; *first says whether this delta made
 * the file's first full read (its full_reads now equals the delta's), and
 * then the file and its records are counted into the full_files and
 * full_records of the epoch that admitted it.  In a transaction.
 */
static int stat_one(struct cfs_catalog *c, sqlite3_stmt *st, const struct cfs_shard_stat_delta *d,
		    bool *first)
{
	uint32_t created = 0;
	uint64_t records = 0;

	sqlite3_bind_int64(st, 1, d->id);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)d->reads);
	sqlite3_bind_int64(st, 3, (sqlite3_int64)d->full_reads);
	sqlite3_bind_int64(st, 4, (sqlite3_int64)d->last_read_ms);
	int rc = sqlite3_step(st);
	*first = rc == SQLITE_ROW && d->full_reads &&
		 (uint64_t)sqlite3_column_int64(st, 0) == d->full_reads;
	if (rc == SQLITE_ROW) {
		created = (uint32_t)sqlite3_column_int64(st, 1);
		records = (uint64_t)sqlite3_column_int64(st, 2);
		rc = sqlite3_step(st);
	}
	sqlite3_reset(st);
	if (rc != SQLITE_DONE)
		return cfs__fail(c, rc, "file stats");
	return *first ? cfs__epoch_add(c, S_EPOCH_FULL, created, records, 1, 0) : 0;
}

/*
 * File id was read to the end for the first time: its records are served
 * (a later full read serves nothing new).  Adds to *newly the ones never
 * served before, from any file, in any pass.  In a transaction.
 */
static int serve_file(struct cfs_catalog *c, int64_t id, uint64_t *newly)
{
	sqlite3_stmt *sv = cfs__stmt(c, S_SERVED_ADD);
	int rc;

	if (!sv)
		return -EIO;
	sqlite3_bind_int64(sv, 1, id);
	rc = cfs__run(c, sv, "records served");
	if (rc == 0)
		*newly += (uint64_t)sqlite3_changes(c->db);
	return rc;
}

int cfs_catalog_shards_add_stats(struct cfs_catalog *c, const struct cfs_shard_stat_delta *d,
				 size_t n, uint32_t epoch)
{
	uint64_t read_bytes = 0, read_files = 0, newly = 0;
	sqlite3_stmt *st;
	int rc;

	if (n == 0)
		return 0;
	rc = cfs__txn_begin(c);
	if (rc < 0)
		return rc;
	st = cfs__stmt(c, S_SHARD_STATS);
	if (!st)
		rc = -EIO;
	for (size_t i = 0; i < n && rc == 0; i++) {
		bool first = false;
		rc = stat_one(c, st, &d[i], &first);
		read_bytes += d[i].read_bytes;
		read_files += d[i].reads;
		if (rc == 0 && first)
			rc = serve_file(c, d[i].id, &newly);
	}
	if (rc == 0 && (read_bytes || read_files))
		rc = cfs__epoch_add(c, S_EPOCH_READ, epoch, read_bytes, read_files, 0);
	if (rc == 0 && newly)
		rc = cfs__epoch_add(c, S_EPOCH_SERVED, epoch, newly, 0, 0);
	return cfs__txn_end(c, rc);
}

/* ---- state moves ------------------------------------------------------- */

/* Victims a statement of cfs_catalog_shards_evict takes, at most. */
#define EVICT_BATCH 8192

/* ids[0..n) as a JSON array, for json_each(): malloc'd, or NULL (no memory). */
static char *ids_json(const int64_t *ids, size_t n)
{
	size_t cap = 2 + n * 21, len = 0; /* "-9223372036854775808," */
	char *j = malloc(cap);
	if (!j)
		return NULL;
	j[len++] = '[';
	for (size_t i = 0; i < n; i++)
		len += (size_t)snprintf(j + len, cap - len, i ? ",%" PRId64 : "%" PRId64, ids[i]);
	j[len++] = ']';
	j[len] = '\0';
	return j;
}

/*
 * One batch of files leaving (a JSON array of n ids; evicted_epoch =
 * epoch, or CFS_EVICTED_WITHDRAWN): their bytes and records added to
 * *bytes and *records, SEALED -> EVICTING, and the plan's whole objects
 * among their records cut, each by one statement over the batch.  -ENOENT
 * when one is not SEALED (or named twice); the caller rolls back.  In a
 * transaction.
 */
static int evict_batch(struct cfs_catalog *c, const char *json, size_t n, int64_t epoch,
		       uint64_t *bytes, uint64_t *records)
{
	sqlite3_stmt *st = cfs__stmt(c, S_SHARDS_EVICT_SUM);
	if (!st)
		return -EIO;
	sqlite3_bind_text(st, 1, json, -1, SQLITE_TRANSIENT);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		bool all = (uint64_t)sqlite3_column_int64(st, 0) == n;
		*bytes += (uint64_t)sqlite3_column_int64(st, 1);
		*records += (uint64_t)sqlite3_column_int64(st, 2);
		rc = all ? 0 : -ENOENT;
	} else {
		rc = cfs__fail(c, rc, "victims' sizes");
	}
	sqlite3_reset(st);
	st = rc == 0 ? cfs__stmt(c, S_SHARDS_EVICT_SET) : NULL;
	if (rc == 0 && !st)
		rc = -EIO;
	if (rc == 0) {
		sqlite3_bind_text(st, 1, json, -1, SQLITE_TRANSIENT);
		sqlite3_bind_int64(st, 2, epoch);
		rc = cfs__run(c, st, "file evict");
	}
	/* their records leave: the plan's whole objects among them are whole no more */
	return rc == 0 ? cfs__plan_cut_files(c, json) : rc;
}

int cfs_catalog_shards_evict(struct cfs_catalog *c, const int64_t *ids, size_t n, uint32_t epoch)
{
	uint64_t bytes = 0, records = 0;
	int rc;

	if (n == 0)
		return 0;
	rc = cfs__txn_begin(c);
	if (rc < 0)
		return rc;
	for (size_t off = 0; off < n && rc == 0; off += EVICT_BATCH) {
		size_t k = n - off < EVICT_BATCH ? n - off : EVICT_BATCH;
		char *json = ids_json(ids + off, k);
		rc = json ? evict_batch(c, json, k, epoch, &bytes, &records) : -ENOMEM;
		free(json);
	}
	if (rc == 0)
		rc = cfs__epoch_add(c, S_EPOCH_EVICT, epoch, bytes, records, n);
	return cfs__txn_end(c, rc);
}

/* Runs statement sid (bound to ?1 = id only) as `what`.  In a transaction. */
static int run_id(struct cfs_catalog *c, enum stmt_id sid, int64_t id, const char *what)
{
	sqlite3_stmt *st = cfs__stmt(c, sid);

	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, id);
	return cfs__run(c, st, what);
}

/* Deletes the SAMPLE and FILE OBJECTS rows of file id.  In a transaction. */
static int delete_contents(struct cfs_catalog *c, int64_t id)
{
	int rc = run_id(c, S_SAMPLES_DEL, id, "samples delete");

	if (rc == 0)
		rc = run_id(c, S_SHOBJ_DEL, id, "file objects delete");
	return rc;
}

int cfs_catalog_shard_withdraw(struct cfs_catalog *c, int64_t id, enum cfs_withdraw why)
{
	uint64_t bytes = 0, records = 0; /* not counted: a withdrawn file is not a victim */
	int rc = cfs__txn_begin(c);

	if (rc < 0)
		return rc;
	/*
	 * STALE: the records of current objects were copied into another file
	 * in this transaction; only the stale objects' records leave, so only
	 * those objects may be cut (evict_batch) and their units fetched again.
	 */
	if (why == CFS_WITHDRAW_STALE)
		rc = run_id(c, S_SHOBJ_DEL_CURRENT, id, "file objects of current objects");
	char *json = rc == 0 ? ids_json(&id, 1) : NULL;
	if (rc == 0)
		rc = json ? evict_batch(c, json, 1, CFS_EVICTED_WITHDRAWN, &bytes, &records)
			  : -ENOMEM;
	free(json);
	if (rc == 0)
		rc = delete_contents(c, id);
	return cfs__txn_end(c, rc);
}

/*
 * The victims deleted never read to the end, summed per evicting epoch
 * while the ids come in one epoch (a batch of the reaper mostly does).
 */
struct unread_acc {
	int64_t epoch; /* -1: none yet */
	uint64_t files, bytes;
};

/* Counts what acc holds into its epoch and empties it.  In a transaction. */
static int unread_flush(struct cfs_catalog *c, struct unread_acc *acc)
{
	int rc = 0;

	if (acc->files)
		rc = cfs__epoch_add(c, S_EPOCH_UNREAD, (uint32_t)acc->epoch, acc->bytes, acc->files,
				    0);
	*acc = (struct unread_acc){.epoch = -1};
	return rc;
}

/*
 * GONE for file id: deletes its row (the trigger id_mark_delete keeps its
 * id taken) and adds it to acc when it was a victim (evicted_epoch >= 0)
 * never read to the end.  An unknown id changes nothing.  In a transaction.
 */
static int gone_one(struct cfs_catalog *c, int64_t id, struct unread_acc *acc)
{
	sqlite3_stmt *st = cfs__stmt(c, S_SHARD_GONE);
	int rc;

	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, id);
	rc = sqlite3_step(st);
	int64_t evicted = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
	bool unread = rc == SQLITE_ROW && sqlite3_column_int64(st, 1) == 0;
	uint64_t bytes = rc == SQLITE_ROW ? (uint64_t)sqlite3_column_int64(st, 2) : 0;
	if (rc == SQLITE_ROW)
		rc = sqlite3_step(st);
	sqlite3_reset(st);
	if (rc != SQLITE_DONE)
		return cfs__fail(c, rc, "file gone");
	if (evicted < 0 || !unread)
		return 0;
	if (evicted != acc->epoch) {
		int e = unread_flush(c, acc);
		if (e < 0)
			return e;
		acc->epoch = evicted;
	}
	acc->files++;
	acc->bytes += bytes;
	return 0;
}

/*
 * Deletes the contents of each file, then its row: GONE (gone true:
 * unread victims counted) or dropped, in one transaction.
 */
static int each_id(struct cfs_catalog *c, bool gone, const int64_t *ids, size_t n)
{
	struct unread_acc acc = {.epoch = -1};
	if (n == 0)
		return 0;
	int rc = cfs__txn_begin(c);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n && rc == 0; i++) {
		rc = delete_contents(c, ids[i]);
		if (rc == 0)
			rc = gone ? gone_one(c, ids[i], &acc)
				  : run_id(c, S_SHARD_DEL, ids[i], "file drop");
	}
	if (rc == 0)
		rc = unread_flush(c, &acc);
	if (rc == 0)
		assert_c1(c, ids, n);
	return cfs__txn_end(c, rc);
}

int cfs_catalog_shards_gone(struct cfs_catalog *c, const int64_t *ids, size_t n)
{
	return each_id(c, true, ids, n);
}

int cfs_catalog_shards_drop(struct cfs_catalog *c, const int64_t *ids, size_t n)
{
	return each_id(c, false, ids, n);
}

/* ---- sync points ------------------------------------------------------- */

int cfs_catalog_unsynced_mark(struct cfs_catalog *c, int64_t *mark)
{
	cfs__lock(c);
	sqlite3_stmt *st = cfs__stmt(c, S_UNSYNCED_MAX);
	int rc = -EIO;
	if (st) {
		rc = sqlite3_step(st);
		if (rc == SQLITE_ROW) {
			*mark = sqlite3_column_int64(st, 0);
			rc = 0;
		} else {
			rc = cfs__fail(c, rc, "unsynced mark");
		}
		sqlite3_reset(st);
	}
	cfs__unlock(c);
	return rc;
}

int cfs_catalog_unsynced_clear(struct cfs_catalog *c, int64_t mark)
{
	cfs__lock(c);
	sqlite3_stmt *st = cfs__stmt(c, S_UNSYNCED_CLEAR);
	int rc = -EIO;
	if (st) {
		sqlite3_bind_int64(st, 1, mark);
		rc = cfs__run(c, st, "unsynced clear");
	}
	cfs__unlock(c);
	return rc;
}

int cfs_catalog_unsynced_files(struct cfs_catalog *c, int64_t **ids, size_t *n)
{
	*ids = NULL;
	*n = 0;
	cfs__lock(c);
	sqlite3_stmt *st = cfs__stmt(c, S_UNSYNCED_LIST);
	int rc = st ? cfs__collect_ids(c, st, ids, n) : -EIO;
	cfs__unlock(c);
	return rc;
}
