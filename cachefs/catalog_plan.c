/*
 * catalog_plan.c - the sampling plan's rows in the catalog (DESIGN
 * "Sampling", docs/catalog.md versions 2, 4 and 9): plans (cursor and the
 * settled bitmap), plan_objects, plan_index, plan_marks (units committed since the
 * bitmap was written), plan_partial (whole objects whose transfer began
 * and whose last record is not committed) and plan_cut (whole objects
 * whole in the cache no more), and the residency queries the sampler
 * builds its pass from.
 *
 * Does not decide what to fetch (sampler/ does) and does not move FILE
 * rows: catalog_files.c calls cfs__plan_marks_add and cfs__plan_cut_files
 * in the transaction of a file's commit or eviction.  Terms, invariants
 * and locking: the design note of catalog.c.
 */
#include "cachefs/catalog_i.h"

#include "common/fault.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

const char *const cfs__sql_plan[S__COUNT] = {
    [S_PLAN_GET] = "SELECT id, seed, pass, gen, n_units, cursor, taken FROM plans "
		   "WHERE source_id = ?1 AND rank = ?2 AND world_size = ?3 AND unit_kind = ?4",
    [S_PLAN_ADD] = "INSERT INTO plans(source_id, rank, world_size, unit_kind, seed) "
		   "VALUES(?1, ?2, ?3, ?4, ?5)",
    [S_PLAN_SAVE] = "UPDATE plans SET pass = ?2, gen = ?3, n_units = ?4, cursor = ?5, "
		    "taken = ?6 WHERE id = ?1",
    [S_PLAN_UNITS] = "UPDATE plans SET n_units = ?2 WHERE id = ?1",
    [S_MARKS_CLEAR] = "DELETE FROM plan_marks WHERE plan_id = ?1",
    [S_MARK_ADD] = "INSERT OR IGNORE INTO plan_marks(plan_id, pass, unit) VALUES(?1, ?2, ?3)",
    [S_MARKS_OF] = "SELECT unit FROM plan_marks WHERE plan_id = ?1 AND pass = ?2",
    [S_POBJ_LIST] = "SELECT object_id, first_unit, units, idx_bytes, record_bytes "
		    "FROM plan_objects WHERE plan_id = ?1 ORDER BY first_unit",
    [S_POBJ_ADD] = "INSERT INTO plan_objects(plan_id, object_id, first_unit, units, idx_bytes, "
		   "record_bytes) VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
    [S_PIDX_ADD] = "INSERT INTO plan_index(plan_id, object_id, idx) VALUES(?1, ?2, ?3)",
    [S_POBJ_IDX] = "SELECT idx FROM plan_index WHERE plan_id = ?1 AND object_id = ?2",
    [S_POBJ_BYTES] = "UPDATE plan_objects SET record_bytes = ?3 "
		     "WHERE plan_id = ?1 AND object_id = ?2",
    [S_RES_OBJECTS] = "SELECT DISTINCT so.object_id FROM shard_objects so "
		      "JOIN plan_objects po ON po.object_id = so.object_id AND po.plan_id = ?1 "
		      "WHERE NOT EXISTS (SELECT 1 FROM plan_partial pp "
		      "WHERE pp.plan_id = ?1 AND pp.unit = po.first_unit)",
    [S_RES_SAMPLES] = "SELECT shard_id, offset, object_id, object_offset, ordinal, length "
		      "FROM samples",
    [S_SAMPLE_ORDINAL] = "UPDATE samples SET ordinal = ?3 WHERE shard_id = ?1 AND offset = ?2",
    [S_PARTIAL_ADD] = "INSERT OR IGNORE INTO plan_partial(plan_id, unit, object_id) "
		      "VALUES(?1, ?2, ?3)",
    [S_PARTIAL_DEL] = "DELETE FROM plan_partial WHERE plan_id = ?1 AND unit = ?2",
    /*
     * CROSS JOIN keeps the order: from the files named (the plan's objects
     * are many, and probing each against the list is O(objects x files))
     */
    [S_PARTIAL_CUT_MANY] =
	"INSERT OR IGNORE INTO plan_cut(plan_id, object_id) "
	"SELECT po.plan_id, po.object_id FROM json_each(?1) AS j "
	"CROSS JOIN shard_objects so ON so.shard_id = j.value "
	"CROSS JOIN shards f ON f.id = so.shard_id AND f.kind = " SQL_KIND_TFRECORD
	" JOIN plan_objects po ON po.plan_id IN (SELECT id FROM plans) "
	"AND po.object_id = so.object_id AND po.idx_bytes = 0",
    [S_PARTIAL_LOW] = "UPDATE plan_partial SET low = ?3 WHERE plan_id = ?1 AND unit = ?2",
    [S_CUT_DEL] = "DELETE FROM plan_cut WHERE plan_id = ?1 AND object_id = ?2",
    [S_CUT_LIST] = "SELECT object_id FROM plan_cut WHERE plan_id = ?1",
    [S_RES_PARTIAL] = "SELECT object_id, low FROM plan_partial WHERE plan_id = ?1",
    [S_OBJ_OFFSETS] = "SELECT s.object_offset FROM shard_objects so "
		      "JOIN samples s ON s.shard_id = so.shard_id AND s.object_id = ?1 "
		      "WHERE so.object_id = ?1 ORDER BY s.object_offset",
};

/* ---- plan rows --------------------------------------------------------- */

/*
 * Reads the plan row of st (S_PLAN_GET, stepped to a row) into out, its
 * taken bitmap malloc'd.  0 or -ENOMEM.
 */
static int read_plan_row(sqlite3_stmt *st, struct cfs_plan_row *out)
{
	int len = sqlite3_column_bytes(st, 6);
	const void *b = sqlite3_column_blob(st, 6);

	out->id = sqlite3_column_int64(st, 0);
	out->seed = (uint64_t)sqlite3_column_int64(st, 1);
	out->pass = (uint64_t)sqlite3_column_int64(st, 2);
	out->gen = (uint64_t)sqlite3_column_int64(st, 3);
	out->n_units = (uint64_t)sqlite3_column_int64(st, 4);
	out->cursor = (uint64_t)sqlite3_column_int64(st, 5);
	if (len > 0 && b) {
		out->taken = malloc((size_t)len);
		if (!out->taken)
			return -ENOMEM;
		memcpy(out->taken, b, (size_t)len);
		out->taken_len = (size_t)len;
	}
	return 0;
}

/*
 * The plan row of (source, rank, world size, unit kind) into out: 0, or
 * -ENOENT when there is none.  In a transaction.
 */
static int plan_find(struct cfs_catalog *c, int64_t source_id, uint32_t rank, uint32_t world_size,
		     int unit_kind, struct cfs_plan_row *out)
{
	sqlite3_stmt *st = cfs__stmt(c, S_PLAN_GET);
	int rc;

	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, source_id);
	sqlite3_bind_int64(st, 2, rank);
	sqlite3_bind_int64(st, 3, world_size);
	sqlite3_bind_int(st, 4, unit_kind);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		rc = read_plan_row(st, out);
	else if (rc == SQLITE_DONE)
		rc = -ENOENT;
	else
		rc = cfs__fail(c, rc, "plan");
	sqlite3_reset(st);
	return rc;
}

static int plan_add(struct cfs_catalog *c, int64_t source_id, uint32_t rank, uint32_t world_size,
		    int unit_kind, uint64_t seed)
{
	sqlite3_stmt *st = cfs__stmt(c, S_PLAN_ADD);

	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, source_id);
	sqlite3_bind_int64(st, 2, rank);
	sqlite3_bind_int64(st, 3, world_size);
	sqlite3_bind_int(st, 4, unit_kind);
	sqlite3_bind_int64(st, 5, (sqlite3_int64)seed);
	return cfs__run(c, st, "plan insert");
}

int cfs_catalog_plan_get(struct cfs_catalog *c, int64_t source_id, uint32_t rank,
			 uint32_t world_size, int unit_kind, uint64_t seed,
			 struct cfs_plan_row *out)
{
	int rc;

	memset(out, 0, sizeof(*out));
	rc = cfs__txn_begin(c);
	if (rc < 0)
		return rc;
	rc = plan_find(c, source_id, rank, world_size, unit_kind, out);
	if (rc == -ENOENT) { /* a new plan: insert it and read it back */
		rc = plan_add(c, source_id, rank, world_size, unit_kind, seed);
		if (rc == 0)
			rc = plan_find(c, source_id, rank, world_size, unit_kind, out);
	}
	rc = cfs__txn_end(c, rc);
	if (rc < 0) {
		free(out->taken);
		memset(out, 0, sizeof(*out));
	}
	return rc;
}

int cfs_catalog_plan_save(struct cfs_catalog *c, const struct cfs_plan_row *r)
{
	sqlite3_stmt *st;
	int rc = cfs__txn_begin(c);

	if (rc < 0)
		return rc;
	st = cfs__stmt(c, S_PLAN_SAVE);
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
	rc = cfs__run(c, st, "plan save");
	if (rc == 0 && sqlite3_changes(c->db) == 0)
		rc = -ENOENT;
	if (rc < 0)
		goto out;
	st = cfs__stmt(c, S_MARKS_CLEAR);
	if (!st) {
		rc = -EIO;
		goto out;
	}
	sqlite3_bind_int64(st, 1, r->id);
	rc = cfs__run(c, st, "plan marks clear");
out:
	return cfs__txn_end(c, rc);
}

void cfs_plan_row_free(struct cfs_plan_row *r)
{
	free(r->taken);
	r->taken = NULL;
	r->taken_len = 0;
}

/* ---- marks ------------------------------------------------------------- */

/*
 * Runs statement sid once per unit: ?1 plan, then ?2 pass (when with_pass),
 * then the unit and, when vals, its value.  In a transaction.
 */
static int each_unit(struct cfs_catalog *c, enum stmt_id sid, int64_t plan_id, const uint64_t *pass,
		     const uint64_t *units, const uint64_t *vals, size_t n, const char *what)
{
	sqlite3_stmt *st = n ? cfs__stmt(c, sid) : NULL;
	int rc = 0;

	if (n && !st)
		return -EIO;
	for (size_t i = 0; i < n && rc == 0; i++) {
		int p = 1;
		sqlite3_bind_int64(st, p++, plan_id);
		if (pass)
			sqlite3_bind_int64(st, p++, (sqlite3_int64)*pass);
		sqlite3_bind_int64(st, p++, (sqlite3_int64)units[i]);
		if (vals)
			sqlite3_bind_int64(st, p, (sqlite3_int64)vals[i]);
		rc = cfs__run(c, st, what);
	}
	return rc;
}

int cfs__plan_marks_add(struct cfs_catalog *c, const struct cfs_plan_marks *m)
{
	int rc = each_unit(c, S_MARK_ADD, m->plan_id, &m->pass, m->units, NULL, m->n, "plan mark");

	/* a whole object's end commits with its mark: it is no longer partial */
	if (rc == 0)
		rc = each_unit(c, S_PARTIAL_DEL, m->plan_id, NULL, m->units, NULL, m->n,
			       "plan partial end");
	if (rc == 0)
		rc = each_unit(c, S_PARTIAL_LOW, m->plan_id, NULL, m->low_units, m->lows, m->nlows,
			       "plan partial low");
	return rc;
}

int cfs_catalog_plan_mark(struct cfs_catalog *c, const struct cfs_plan_marks *m)
{
	int rc = cfs__txn_begin(c);

	if (rc < 0)
		return rc;
	rc = cfs__plan_marks_add(c, m);
	return cfs__txn_end(c, rc);
}

int cfs_catalog_plan_marks_of(struct cfs_catalog *c, int64_t plan_id, uint64_t pass, uint64_t **out,
			      size_t *n)
{
	sqlite3_stmt *st;
	int rc;

	cfs__lock(c);
	st = cfs__stmt(c, S_MARKS_OF);
	if (st) {
		sqlite3_bind_int64(st, 1, plan_id);
		sqlite3_bind_int64(st, 2, (sqlite3_int64)pass);
	}
	rc = st ? cfs__collect_ids(c, st, (int64_t **)out, n) : -EIO;
	cfs__unlock(c);
	return rc;
}

/* ---- plan objects ------------------------------------------------------ */

static int row_plan_object(sqlite3_stmt *st, void *el)
{
	struct cfs_plan_object *o = el;

	o->object_id = sqlite3_column_int64(st, 0);
	o->first_unit = (uint64_t)sqlite3_column_int64(st, 1);
	o->units = (uint64_t)sqlite3_column_int64(st, 2);
	o->idx_len = (size_t)sqlite3_column_int64(st, 3);
	o->record_bytes =
	    sqlite3_column_type(st, 4) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 4);
	return 0;
}

/* The rows of statement sid whose ?1 is key, each read by `row` (cfs__collect_rows). */
static int rows_of(struct cfs_catalog *c, enum stmt_id sid, int64_t key, size_t elem,
		   cfs__row_fn row, cfs__rows_free_fn drop, const char *what, void **out, size_t *n)
{
	cfs__lock(c);
	sqlite3_stmt *st = cfs__stmt(c, sid);
	if (st)
		sqlite3_bind_int64(st, 1, key);
	int rc = st ? cfs__collect_rows(c, st, elem, row, drop, what, out, n) : -EIO;
	cfs__unlock(c);
	return rc;
}

/* As rows_of(), of column 0 as int64 (ids, units, offsets: cfs__collect_ids). */
static int ids_of(struct cfs_catalog *c, enum stmt_id sid, int64_t key, int64_t **out, size_t *n)
{
	cfs__lock(c);
	sqlite3_stmt *st = cfs__stmt(c, sid);
	if (st)
		sqlite3_bind_int64(st, 1, key);
	int rc = st ? cfs__collect_ids(c, st, out, n) : -EIO;
	cfs__unlock(c);
	return rc;
}

/* The caller's function and context (cfs__each_row's ctx). */
struct plan_object_each {
	cfs_plan_object_fn fn;
	void *ctx;
};

static int each_plan_object(sqlite3_stmt *st, void *ctx)
{
	const struct plan_object_each *e = ctx;
	struct cfs_plan_object o = {0};
	row_plan_object(st, &o);
	return e->fn(e->ctx, &o);
}

int cfs_catalog_plan_objects_each(struct cfs_catalog *c, int64_t plan_id, cfs_plan_object_fn fn,
				  void *ctx)
{
	struct plan_object_each e = {fn, ctx};
	int rc;

	cfs__lock(c);
	sqlite3_stmt *st = cfs__stmt(c, S_POBJ_LIST);
	if (st)
		sqlite3_bind_int64(st, 1, plan_id);
	rc = st ? cfs__each_row(c, st, each_plan_object, &e, "plan objects") : -EIO;
	cfs__unlock(c);
	return rc;
}

int cfs_catalog_plan_idx(struct cfs_catalog *c, int64_t plan_id, int64_t object_id, void **idx,
			 size_t *len)
{
	sqlite3_stmt *st;
	int rc;

	*idx = NULL;
	*len = 0;
	cfs__lock(c);
	st = cfs__stmt(c, S_POBJ_IDX);
	if (!st) {
		cfs__unlock(c);
		return -EIO;
	}
	sqlite3_bind_int64(st, 1, plan_id);
	sqlite3_bind_int64(st, 2, object_id);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE) {
		rc = 0; /* none */
	} else if (rc == SQLITE_ROW) {
		const void *b = sqlite3_column_blob(st, 0);
		int n = sqlite3_column_bytes(st, 0);
		rc = 0;
		if (b && n > 0) {
			*idx = malloc((size_t)n);
			if (*idx) {
				memcpy(*idx, b, (size_t)n);
				*len = (size_t)n;
			} else {
				rc = -ENOMEM;
			}
		}
	} else {
		rc = cfs__fail(c, rc, "plan object index");
	}
	sqlite3_reset(st);
	cfs__unlock(c);
	return rc;
}

int cfs_catalog_plan_set_record_bytes(struct cfs_catalog *c, int64_t plan_id, int64_t object_id,
				      uint64_t record_bytes)
{
	sqlite3_stmt *st;
	int rc = cfs__txn_begin(c);

	if (rc < 0)
		return rc;
	st = cfs__stmt(c, S_POBJ_BYTES);
	if (st) {
		sqlite3_bind_int64(st, 1, plan_id);
		sqlite3_bind_int64(st, 2, object_id);
		sqlite3_bind_int64(st, 3, (sqlite3_int64)record_bytes);
	}
	rc = st ? cfs__run(c, st, "plan object bytes") : -EIO;
	return cfs__txn_end(c, rc);
}

static void array_row_at(void *ctx, size_t i, struct cfs_plan_object *out)
{
	*out = ((const struct cfs_plan_object *)ctx)[i];
}

int cfs_catalog_plan_objects_add(struct cfs_catalog *c, int64_t plan_id,
				 const struct cfs_plan_object *v, size_t n, uint64_t n_units)
{
	return cfs_catalog_plan_objects_add_each(c, plan_id, array_row_at, (void *)v, n, n_units);
}

int cfs_catalog_plan_objects_add_each(struct cfs_catalog *c, int64_t plan_id, cfs_plan_object_at at,
				      void *ctx, size_t n, uint64_t n_units)
{
	sqlite3_stmt *st;
	int rc = cfs__txn_begin(c);

	if (rc < 0)
		return rc;
	st = cfs__stmt(c, S_POBJ_ADD);
	if (!st)
		rc = -EIO;
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct cfs_plan_object v;
		at(ctx, i, &v);
		sqlite3_bind_int64(st, 1, plan_id);
		sqlite3_bind_int64(st, 2, v.object_id);
		sqlite3_bind_int64(st, 3, (sqlite3_int64)v.first_unit);
		sqlite3_bind_int64(st, 4, (sqlite3_int64)v.units);
		bool has = v.idx && v.idx_len;
		sqlite3_bind_int64(st, 5, has ? (sqlite3_int64)v.idx_len : 0);
		if (has)
			sqlite3_bind_int64(st, 6, v.record_bytes);
		else
			sqlite3_bind_null(st, 6);
		rc = cfs__run(c, st, "plan object");
		sqlite3_stmt *ix = rc == 0 && has ? cfs__stmt(c, S_PIDX_ADD) : NULL;
		if (ix) {
			sqlite3_bind_int64(ix, 1, plan_id);
			sqlite3_bind_int64(ix, 2, v.object_id);
			sqlite3_bind_blob64(ix, 3, v.idx, v.idx_len, SQLITE_STATIC);
			rc = cfs__run(c, ix, "plan object index");
		} else if (rc == 0 && has) {
			rc = -EIO;
		}
	}
	st = rc == 0 ? cfs__stmt(c, S_PLAN_UNITS) : NULL;
	if (st) {
		sqlite3_bind_int64(st, 1, plan_id);
		sqlite3_bind_int64(st, 2, (sqlite3_int64)n_units);
		rc = cfs__run(c, st, "plan units");
	} else if (rc == 0) {
		rc = -EIO;
	}
	return cfs__txn_end(c, rc);
}

/* ---- residency: partial and cut objects -------------------------------- */

/* Column 0 of the rows of statement sid, bound ?1 = key, as ids (cfs__collect_ids). */
int cfs_catalog_plan_resident_objects(struct cfs_catalog *c, int64_t plan_id, int64_t **out,
				      size_t *n)
{
	return ids_of(c, S_RES_OBJECTS, plan_id, out, n);
}

int cfs__plan_cut_files(struct cfs_catalog *c, const char *ids_json)
{
	/*
	 * The plan still takes the cut objects as resident while a record of
	 * them is (nothing is fetched twice), and counts their bytes as
	 * wanted, so that a boundary makes room for them.
	 */
	sqlite3_stmt *st = cfs__stmt(c, S_PARTIAL_CUT_MANY);

	if (!st)
		return -EIO;
	sqlite3_bind_text(st, 1, ids_json, -1, SQLITE_TRANSIENT);
	return cfs__run(c, st, "plan partial cut");
}

int cfs_catalog_plan_partial_begin(struct cfs_catalog *c, int64_t plan_id, uint64_t unit,
				   int64_t object_id)
{
	sqlite3_stmt *st;
	int rc = cfs__txn_begin(c);

	if (rc < 0)
		return rc;
	st = cfs__stmt(c, S_PARTIAL_ADD);
	if (st) {
		sqlite3_bind_int64(st, 1, plan_id);
		sqlite3_bind_int64(st, 2, (sqlite3_int64)unit);
		sqlite3_bind_int64(st, 3, object_id);
	}
	rc = st ? cfs__run(c, st, "plan partial begin") : -EIO;
	st = rc == 0 ? cfs__stmt(c, S_CUT_DEL) : NULL;
	if (st) {
		sqlite3_bind_int64(st, 1, plan_id);
		sqlite3_bind_int64(st, 2, object_id);
		rc = cfs__run(c, st, "plan cut end");
	} else if (rc == 0) {
		rc = -EIO;
	}
	rc = cfs__txn_end(c, rc);
	if (rc == 0)
		cmn_fault("plan_partial"); /* the transfer is recorded, none of its bytes fetched */
	return rc;
}

int cfs_catalog_plan_cut_objects(struct cfs_catalog *c, int64_t plan_id, int64_t **out, size_t *n)
{
	return ids_of(c, S_CUT_LIST, plan_id, out, n);
}

static int row_partial(sqlite3_stmt *st, void *el)
{
	struct cfs_partial *p = el;

	p->object_id = sqlite3_column_int64(st, 0);
	p->low = (uint64_t)sqlite3_column_int64(st, 1);
	return 0;
}

int cfs_catalog_plan_partial_objects(struct cfs_catalog *c, int64_t plan_id,
				     struct cfs_partial **out, size_t *n)
{
	return rows_of(c, S_RES_PARTIAL, plan_id, sizeof(**out), row_partial, NULL,
		       "partial objects", (void **)out, n);
}

int cfs_catalog_plan_partial_low(struct cfs_catalog *c, int64_t plan_id, const uint64_t *units,
				 const uint64_t *lows, size_t n)
{
	int rc = cfs__txn_begin(c);

	if (rc < 0)
		return rc;
	rc = each_unit(c, S_PARTIAL_LOW, plan_id, NULL, units, lows, n, "plan partial low");
	return cfs__txn_end(c, rc);
}

int cfs_catalog_object_offsets(struct cfs_catalog *c, int64_t object_id, uint64_t **out, size_t *n)
{
	return ids_of(c, S_OBJ_OFFSETS, object_id, (int64_t **)out, n);
}

/* The caller's function and context (cfs__each_row's ctx). */
struct sample_ref_each {
	cfs_sample_ref_fn fn;
	void *ctx;
};

static int each_sample_ref(sqlite3_stmt *st, void *ctx)
{
	const struct sample_ref_each *e = ctx;
	struct cfs_sample_ref r = {
	    .shard_id = sqlite3_column_int64(st, 0),
	    .offset = (uint64_t)sqlite3_column_int64(st, 1),
	    .object_id = sqlite3_column_int64(st, 2),
	    .object_offset = (uint64_t)sqlite3_column_int64(st, 3),
	    .ordinal = sqlite3_column_type(st, 4) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 4),
	    .length = (uint64_t)sqlite3_column_int64(st, 5),
	};
	return e->fn(e->ctx, &r);
}

int cfs_catalog_resident_samples(struct cfs_catalog *c, cfs_sample_ref_fn fn, void *ctx)
{
	struct sample_ref_each e = {fn, ctx};
	int rc;

	cfs__lock(c);
	sqlite3_stmt *st = cfs__stmt(c, S_RES_SAMPLES);
	rc = st ? cfs__each_row(c, st, each_sample_ref, &e, "resident samples") : -EIO;
	cfs__unlock(c);
	return rc;
}

int cfs_catalog_samples_set_ordinals(struct cfs_catalog *c, const struct cfs_sample_ref *v,
				     size_t n)
{
	sqlite3_stmt *st;
	int rc = cfs__txn_begin(c);

	if (rc < 0)
		return rc;
	st = cfs__stmt(c, S_SAMPLE_ORDINAL);
	if (!st)
		rc = -EIO;
	for (size_t i = 0; i < n && rc == 0; i++) {
		sqlite3_bind_int64(st, 1, v[i].shard_id);
		sqlite3_bind_int64(st, 2, (sqlite3_int64)v[i].offset);
		sqlite3_bind_int64(st, 3, v[i].ordinal);
		rc = cfs__run(c, st, "sample ordinal");
	}
	return cfs__txn_end(c, rc);
}
