/*
 * catalog_objects.c - sources and objects of the catalog: the listing
 * merge (cfs_catalog_objects_sync), object lists and fetch counts, and the
 * FILEs that hold samples of STALE objects.
 *
 * Keeps C2 (one non-STALE OBJECT per source and key: the merge marks the
 * old row STALE before it inserts the new one; the unique index
 * objects_current enforces it).  Does not touch FILE rows.  Terms,
 * invariants and locking: the design note of catalog.c.
 */
#include "cachefs/catalog_i.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

const char *const cfs__sql_objects[S__COUNT] = {
    [S_SOURCE_GET] = "SELECT id FROM sources WHERE url = ?1",
    [S_SOURCE_ADD] = "INSERT INTO sources(url) VALUES(?1)",
    [S_OBJ_CURRENT] = "SELECT id, key, size, etag, state FROM objects "
		      "WHERE source_id = ?1 AND state != " SQL_OBJ_STALE " ORDER BY key",
    [S_OBJ_ADD] = "INSERT INTO objects(source_id, key, size, etag, listed_epoch, state) "
		  "VALUES(?1, ?2, ?3, ?4, ?5, " SQL_OBJ_LISTED ")",
    [S_OBJ_SEEN] = "UPDATE objects SET listed_epoch = ?2, state = " SQL_OBJ_LISTED " WHERE id = ?1",
    [S_OBJ_STALE] = "UPDATE objects SET state = " SQL_OBJ_STALE " WHERE id = ?1",
    [S_OBJ_VANISH] = "UPDATE objects SET state = " SQL_OBJ_VANISHED " WHERE id = ?1",
    [S_OBJ_LIST] = "SELECT id, source_id, key, etag, size, listed_epoch, state, fetches, "
		   "last_fetched_epoch FROM objects "
		   "WHERE source_id = ?1 AND ((1 << state) & ?2) != 0 ORDER BY id",
    [S_OBJ_FETCHED] = "UPDATE objects SET fetches = fetches + 1, last_fetched_epoch = ?2 "
		      "WHERE id = ?1",
    [S_OBJ_KEY] = "SELECT key FROM objects WHERE id = ?1",
    [S_STALE_SHARDS] =
	"SELECT DISTINCT so.shard_id FROM objects o "
	"JOIN shard_objects so ON so.object_id = o.id "
	"JOIN shards f ON f.id = so.shard_id "
	"WHERE o.state = " SQL_OBJ_STALE " AND f.state = " SQL_SEALED " ORDER BY so.shard_id",
};

int cfs_catalog_source(struct cfs_catalog *c, const char *url, int64_t *source_id)
{
	sqlite3_stmt *st;
	int rc;

	rc = cfs__txn_begin(c);
	if (rc < 0)
		return rc;
	st = cfs__stmt(c, S_SOURCE_GET);
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
		rc = cfs__fail(c, rc, "source lookup");
		goto out;
	}
	st = cfs__stmt(c, S_SOURCE_ADD);
	if (!st) {
		rc = -EIO;
		goto out;
	}
	sqlite3_bind_text(st, 1, url, -1, SQLITE_STATIC);
	rc = cfs__run(c, st, "source insert");
	if (rc == 0)
		*source_id = sqlite3_last_insert_rowid(c->db);
out:
	return cfs__txn_end(c, rc);
}

/* ---- the listing merge ------------------------------------------------- */

struct ent_ref {
	const struct cfs_listing_entry *e;
	size_t idx;
};

static int cmp_ent(const void *a, const void *b)
{
	return strcmp(((const struct ent_ref *)a)->e->key, ((const struct ent_ref *)b)->e->key);
}

/*
 * Etags are compared only where both listings gave one: a listing without
 * them (an HTTP MANIFEST gives names and sizes) leaves the size to tell a
 * change, and a cache listed from a source with etags is not fetched
 * again whole because its next listing has none (rows a MANIFEST listing
 * wrote in earlier versions carry "m-SIZE", the size again).
 */
static bool etag_eq(const char *a, const char *b)
{
	if (!a || !*a || !b || !*b)
		return true;
	return strcmp(a, b) == 0;
}

static int obj_add(struct cfs_catalog *c, int64_t source_id, const struct cfs_listing_entry *e,
		   uint32_t epoch, int64_t *id)
{
	sqlite3_stmt *st = cfs__stmt(c, S_OBJ_ADD);
	int rc;

	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, source_id);
	sqlite3_bind_text(st, 2, e->key, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, (sqlite3_int64)e->size);
	if (e->etag && *e->etag)
		sqlite3_bind_text(st, 4, e->etag, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 5, epoch);
	rc = cfs__run(c, st, "object insert");
	if (rc == 0)
		*id = sqlite3_last_insert_rowid(c->db);
	return rc;
}

static int obj_set(struct cfs_catalog *c, enum stmt_id sid, int64_t id, int64_t arg)
{
	sqlite3_stmt *st = cfs__stmt(c, sid);

	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, id);
	if (sid == S_OBJ_SEEN)
		sqlite3_bind_int64(st, 2, arg);
	return cfs__run(c, st, "object update");
}

/*
 * The listing's entries sorted by key, each with its index in ents.
 * 0 with *out (malloc'd, NULL when n == 0); -EINVAL for a NULL or repeated
 * key, -ENOMEM; nothing returned on failure.
 */
static int sort_listing(const struct cfs_listing_entry *ents, size_t n, struct ent_ref **out)
{
	struct ent_ref *refs = n ? malloc(n * sizeof(*refs)) : NULL;

	if (n && !refs)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if (!ents[i].key) {
			free(refs);
			return -EINVAL;
		}
		refs[i].e = &ents[i];
		refs[i].idx = i;
	}
	if (n > 1) /* qsort(NULL, 0) is undefined */
		qsort(refs, n, sizeof(*refs), cmp_ent);
	for (size_t i = 1; i < n; i++) {
		if (strcmp(refs[i - 1].e->key, refs[i].e->key) == 0) {
			free(refs);
			return -EINVAL;
		}
	}
	*out = refs;
	return 0;
}

/*
 * The listing as the merge reads it: entry k in key order (view_at).  One
 * of: get (cfs_catalog_objects_sync_sorted), refs (an array sorted here),
 * ents alone (an array given in key order).
 */
struct ents_view {
	cfs_listing_get_fn get;
	void *ctx;
	const struct cfs_listing_entry *ents;
	const struct ent_ref *refs;
	size_t n;
};

/* Entry k in key order into *e; returns its slot in ids[]. */
static size_t view_at(const struct ents_view *v, size_t k, struct cfs_listing_entry *e)
{
	if (v->get) {
		v->get(v->ctx, k, e);
		return k;
	}
	if (v->refs) {
		*e = *v->refs[k].e;
		return v->refs[k].idx;
	}
	*e = v->ents[k];
	return k;
}

/* 0 when every key is there and greater than the one before, else -EINVAL. */
static int view_check_order(const struct ents_view *v)
{
	const char *prev = NULL;

	for (size_t k = 0; k < v->n; k++) {
		struct cfs_listing_entry e;

		view_at(v, k, &e);
		if (!e.key || (prev && strcmp(prev, e.key) >= 0))
			return -EINVAL;
		prev = e.key;
	}
	return 0;
}

/* What phase 2 of the merge does with one listing entry (scan_current). */
enum merge_act {
	ACT_ADD,     /* a key the source has no current row for: a new row */
	ACT_SEEN,    /* same size and etag, the row LISTED: nothing to write */
	ACT_BACK,    /* same size and etag, the row VANISHED: LISTED again at this epoch */
	ACT_CHANGED, /* the row becomes STALE, a new row takes its key */
};

/* Ids of current rows the listing does not name (scan_current's *gone). */
struct id_vec {
	int64_t *v;
	size_t n, cap;
};

static int id_push(struct id_vec *g, int64_t id)
{
	if (g->n == g->cap) {
		size_t nc = g->cap ? g->cap * 2 : 256;
		int64_t *nv = realloc(g->v, nc * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		g->v = nv;
		g->cap = nc;
	}
	g->v[g->n++] = id;
	return 0;
}

/*
 * Phase 1 of the merge, reads only: walks the source's current rows in key
 * order (S_OBJ_CURRENT: the index objects_current gives that order, so no
 * row is copied or sorted) in step with the listing in key order.  Sets
 * act[k] for entry k and, for SEEN, BACK and CHANGED, old[its slot] to the
 * current row's id; the current rows the listing does not name and that
 * are not VANISHED yet go to *gone.  Returns 0 or -errno (*gone then holds
 * what was found: the caller frees it).  In a transaction.
 */
static int scan_current(struct cfs_catalog *c, int64_t source_id, const struct ents_view *v,
			uint8_t *act, int64_t *old, struct id_vec *gone)
{
	sqlite3_stmt *st = cfs__stmt(c, S_OBJ_CURRENT);
	struct cfs_listing_entry le;
	size_t k = 0, slot = 0;
	int rc, e = 0;

	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, source_id);
	while (e == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t id = sqlite3_column_int64(st, 0);
		const char *key = (const char *)sqlite3_column_text(st, 1);
		int d = 1;

		while (key && k < v->n) {
			slot = view_at(v, k, &le);
			if ((d = strcmp(le.key, key)) >= 0)
				break;
			act[k++] = ACT_ADD;
		}
		if (key && k < v->n && d == 0) {
			const char *etag = (const char *)sqlite3_column_text(st, 3);
			bool same = (uint64_t)sqlite3_column_int64(st, 2) == le.size &&
				    etag_eq(etag, le.etag);
			act[k++] = !same					      ? ACT_CHANGED
				   : sqlite3_column_int(st, 4) == CFS_OBJECT_VANISHED ? ACT_BACK
										      : ACT_SEEN;
			old[slot] = id;
		} else if (sqlite3_column_int(st, 4) != CFS_OBJECT_VANISHED) {
			e = id_push(gone, id);
		}
	}
	sqlite3_reset(st);
	if (e < 0)
		return e;
	if (rc != SQLITE_DONE)
		return cfs__fail(c, rc, "object listing");
	while (k < v->n)
		act[k++] = ACT_ADD;
	return 0;
}

/*
 * Phase 2: the writes phase 1 chose, in key order (a CHANGED row is made
 * STALE before its key's new row is inserted: C2), then the vanished rows.
 * Writes each entry's row id into ids[its slot] (when ids; old[] may be
 * ids).  In a transaction.
 */
static int apply_merge(struct cfs_catalog *c, int64_t source_id, const struct ents_view *v,
		       const uint8_t *act, const int64_t *old, const struct id_vec *gone,
		       uint32_t epoch, int64_t *ids, struct cfs_sync_result *r)
{
	int rc = 0;

	for (size_t k = 0; k < v->n && rc == 0; k++) {
		struct cfs_listing_entry le;
		size_t slot = view_at(v, k, &le);
		int64_t id = old[slot];

		if (act[k] == ACT_SEEN) {
			r->unchanged++; /* not rewritten: a relist costs what changed */
		} else if (act[k] == ACT_BACK) {
			rc = obj_set(c, S_OBJ_SEEN, id, epoch);
			r->unchanged++;
		} else if (act[k] == ACT_CHANGED) {
			rc = obj_set(c, S_OBJ_STALE, id, 0);
			if (rc == 0)
				rc = obj_add(c, source_id, &le, epoch, &id);
			r->changed++;
		} else {
			rc = obj_add(c, source_id, &le, epoch, &id);
			r->added++;
		}
		if (rc == 0 && ids)
			ids[slot] = id;
	}
	for (size_t j = 0; j < gone->n && rc == 0; j++) {
		rc = obj_set(c, S_OBJ_VANISH, gone->v[j], 0);
		r->vanished++;
	}
	return rc;
}

/*
 * The idea: walk the listing in key order in step with the source's
 * current rows, which the index objects_current yields in key order (a
 * merge join): first reading only, noting per entry what to do (1 byte and
 * the row's id), then writing, so the walk never meets its own changes and
 * no current row is held in memory.  A listing of N keys costs one query
 * plus N small statements in one transaction.
 */
static int sync_view(struct cfs_catalog *c, int64_t source_id, const struct ents_view *v,
		     uint32_t epoch, int64_t *ids, struct cfs_sync_result *res)
{
	struct cfs_sync_result r = {0};
	struct id_vec gone = {0};
	uint8_t *act = malloc(v->n ? v->n : 1);
	int64_t *old = ids ? ids : malloc((v->n ? v->n : 1) * sizeof(*old));
	int rc = -ENOMEM;

	if (!act || !old)
		goto out;
	rc = cfs__txn_begin(c);
	if (rc < 0)
		goto out;
	rc = scan_current(c, source_id, v, act, old, &gone);
	if (rc == 0)
		rc = apply_merge(c, source_id, v, act, old, &gone, epoch, ids, &r);
	rc = cfs__txn_end(c, rc);
	/*
	 * The merge filled the page cache with the listing's pages; what it
	 * holds beyond the caller's transaction goes back to the heap now, for
	 * the listing's next consumer (the sampling plan) to reuse, instead of
	 * adding to it until the cache_size limit evicts.  Pages are read again
	 * (from the OS's cache) when needed.
	 */
	cfs__lock(c);
	if (c->depth == 0)
		sqlite3_db_release_memory(c->db);
	cfs__unlock(c);
out:
	if (old != ids)
		free(old);
	free(act);
	free(gone.v);
	if (rc == 0 && r.changed)
		atomic_fetch_add_explicit(&c->stale_gen, 1, memory_order_release);
	if (rc == 0 && res)
		*res = r;
	return rc;
}

int cfs_catalog_objects_sync(struct cfs_catalog *c, int64_t source_id,
			     const struct cfs_listing_entry *ents, size_t n, uint32_t epoch,
			     int64_t *ids, struct cfs_sync_result *res)
{
	struct ents_view v = {.ents = ents, .n = n};
	struct ent_ref *refs = NULL;
	int rc;

	if (view_check_order(&v) < 0) { /* not in key order (or a NULL key): sorted here */
		rc = sort_listing(ents, n, &refs);
		if (rc < 0)
			return rc;
		v.refs = refs;
	}
	rc = sync_view(c, source_id, &v, epoch, ids, res);
	free(refs);
	return rc;
}

int cfs_catalog_objects_sync_sorted(struct cfs_catalog *c, int64_t source_id,
				    cfs_listing_get_fn get, void *ctx, size_t n, uint32_t epoch,
				    int64_t *ids, struct cfs_sync_result *res)
{
	struct ents_view v = {.get = get, .ctx = ctx, .n = n};

	if (view_check_order(&v) < 0)
		return -EINVAL;
	return sync_view(c, source_id, &v, epoch, ids, res);
}

/* ---- object lists ------------------------------------------------------ */

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

static void object_info_drop(void *arr, size_t n)
{
	cfs_object_info_free(arr, n);
}

static int row_object(sqlite3_stmt *st, void *el)
{
	struct cfs_object_info *o = el;
	bool oom = false;

	o->id = sqlite3_column_int64(st, 0);
	o->source_id = sqlite3_column_int64(st, 1);
	o->key = cfs__dup_col(st, 2, &oom);
	o->etag = cfs__dup_col(st, 3, &oom);
	o->size = (uint64_t)sqlite3_column_int64(st, 4);
	o->listed_epoch = (uint32_t)sqlite3_column_int64(st, 5);
	o->state = (enum cfs_object_state)sqlite3_column_int(st, 6);
	o->fetches = (uint32_t)sqlite3_column_int64(st, 7);
	o->last_fetched_epoch = sqlite3_column_int64(st, 8);
	return oom ? -ENOMEM : 0;
}

int cfs_catalog_objects_list(struct cfs_catalog *c, int64_t source_id, unsigned state_mask,
			     struct cfs_object_info **out, size_t *n)
{
	sqlite3_stmt *st;
	int rc;

	cfs__lock(c);
	st = cfs__stmt(c, S_OBJ_LIST);
	if (st) {
		sqlite3_bind_int64(st, 1, source_id);
		sqlite3_bind_int64(st, 2, state_mask);
	}
	rc = st ? cfs__collect_rows(c, st, sizeof(**out), row_object, object_info_drop,
				    "object list", (void **)out, n)
		: -EIO;
	cfs__unlock(c);
	return rc;
}

int cfs_catalog_object_fetched(struct cfs_catalog *c, int64_t id, uint32_t epoch)
{
	sqlite3_stmt *st;
	int rc;

	cfs__lock(c);
	st = cfs__stmt(c, S_OBJ_FETCHED);
	if (!st) {
		cfs__unlock(c);
		return -EIO;
	}
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_int64(st, 2, epoch);
	rc = cfs__run(c, st, "object fetched");
	if (rc == 0 && sqlite3_changes(c->db) == 0)
		rc = -ENOENT;
	cfs__unlock(c);
	return rc;
}

int cfs_catalog_object_key(struct cfs_catalog *c, int64_t id, char *buf, size_t cap)
{
	sqlite3_stmt *st;
	int rc;

	cfs__lock(c);
	st = cfs__stmt(c, S_OBJ_KEY);
	if (!st) {
		cfs__unlock(c);
		return -EIO;
	}
	sqlite3_bind_int64(st, 1, id);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		const char *k = (const char *)sqlite3_column_text(st, 0);
		size_t n = (size_t)sqlite3_column_bytes(st, 0);
		if (!k)
			rc = -ENOMEM;
		else if (n >= cap)
			rc = -ENAMETOOLONG;
		else {
			memcpy(buf, k, n + 1);
			rc = 0;
		}
	} else {
		rc = rc == SQLITE_DONE ? -ENOENT : cfs__fail(c, rc, "object key");
	}
	sqlite3_reset(st);
	cfs__unlock(c);
	return rc;
}

uint64_t cfs_catalog_stale_generation(struct cfs_catalog *c)
{
	return atomic_load_explicit(&c->stale_gen, memory_order_acquire);
}

int cfs_catalog_shards_with_stale_objects(struct cfs_catalog *c, int64_t **out, size_t *n)
{
	sqlite3_stmt *st;
	int rc;

	cfs__lock(c);
	st = cfs__stmt(c, S_STALE_SHARDS);
	rc = st ? cfs__collect_ids(c, st, out, n) : -EIO;
	cfs__unlock(c);
	return rc;
}
