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
		      "WHERE source_id = ?1 AND state != " SQL_OBJ_STALE,
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

static int row_cur_obj(sqlite3_stmt *st, void *el)
{
	struct cur_obj *o = el;
	bool oom = false;

	o->id = sqlite3_column_int64(st, 0);
	o->key = cfs__dup_col(st, 1, &oom);
	o->size = (uint64_t)sqlite3_column_int64(st, 2);
	o->etag = cfs__dup_col(st, 3, &oom);
	o->state = sqlite3_column_int(st, 4);
	return oom ? -ENOMEM : 0;
}

static void cur_free(void *arr, size_t n)
{
	struct cur_obj *cur = arr;

	for (size_t j = 0; j < n; j++) {
		free(cur[j].key);
		free(cur[j].etag);
	}
	free(cur);
}

/* The source's current (not STALE) rows, sorted by key.  In a transaction. */
static int read_current(struct cfs_catalog *c, int64_t source_id, struct cur_obj **cur,
			size_t *ncur)
{
	sqlite3_stmt *st = cfs__stmt(c, S_OBJ_CURRENT);
	int rc;

	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, source_id);
	rc = cfs__collect_rows(c, st, sizeof(**cur), row_cur_obj, cur_free, "object listing",
			       (void **)cur, ncur);
	if (rc == 0 && *ncur > 1)
		qsort(*cur, *ncur, sizeof(**cur), cmp_cur);
	return rc;
}

/*
 * Walks the sorted listing and the sorted current rows in step: a key in
 * both is seen (same size and etag) or changed (old row STALE, new row); a
 * key only in the listing is added.  Marks the rows it met as seen and
 * writes each entry's row id into ids[] (when ids).  In a transaction.
 */
static int merge_listing(struct cfs_catalog *c, int64_t source_id, const struct ent_ref *refs,
			 size_t n, struct cur_obj *cur, size_t ncur, uint32_t epoch, int64_t *ids,
			 struct cfs_sync_result *r)
{
	size_t j = 0;
	int rc = 0;

	for (size_t i = 0; i < n && rc == 0; i++) {
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
				r->unchanged++;
			} else {
				rc = obj_set(c, S_OBJ_STALE, o->id, 0);
				if (rc == 0)
					rc = obj_add(c, source_id, e, epoch, &id);
				r->changed++;
			}
		} else {
			rc = obj_add(c, source_id, e, epoch, &id);
			r->added++;
		}
		if (rc == 0 && ids)
			ids[refs[i].idx] = id;
	}
	return rc;
}

/* Current rows the listing did not name become VANISHED.  In a transaction. */
static int vanish_unseen(struct cfs_catalog *c, const struct cur_obj *cur, size_t ncur,
			 struct cfs_sync_result *r)
{
	for (size_t j = 0; j < ncur; j++) {
		if (cur[j].seen || cur[j].state == CFS_OBJECT_VANISHED)
			continue;
		int rc = obj_set(c, S_OBJ_VANISH, cur[j].id, 0);
		if (rc < 0)
			return rc;
		r->vanished++;
	}
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
	struct cfs_sync_result r = {0};
	size_t ncur = 0;
	int rc;

	rc = sort_listing(ents, n, &refs);
	if (rc < 0)
		return rc;
	rc = cfs__txn_begin(c);
	if (rc < 0) {
		free(refs);
		return rc;
	}
	rc = read_current(c, source_id, &cur, &ncur);
	if (rc == 0)
		rc = merge_listing(c, source_id, refs, n, cur, ncur, epoch, ids, &r);
	if (rc == 0)
		rc = vanish_unseen(c, cur, ncur, &r);
	rc = cfs__txn_end(c, rc);
	cur_free(cur, ncur);
	free(refs);
	if (rc == 0 && r.changed)
		atomic_fetch_add_explicit(&c->stale_gen, 1, memory_order_release);
	if (rc == 0 && res)
		*res = r;
	return rc;
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
