/*
 * catalog_i.h - internals shared by the files of the catalog: catalog.c
 * (open, schema and migrations, transactions, the statement cache, the row
 * reader, integrity check), catalog_objects.c (sources, objects, listing
 * merge, stale objects), catalog_files.c (files, samples, file objects,
 * read statistics and served records), catalog_epochs.c (epochs and their
 * counters) and catalog_plan.c (the sampling plan).
 *
 * Not for any other file: the rest of rollcache uses catalog.h.  The
 * functions below that take a handle expect c->mu held, except
 * cfs__lock, cfs__txn_begin (which take it) and cfs__note_id (atomic).
 * The design note with the invariants (C1-C3) is at the top of catalog.c.
 */
#ifndef RC_CACHEFS_CATALOG_I_H
#define RC_CACHEFS_CATALOG_I_H

#include "cachefs/catalog.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The enum values of catalog.h as SQL literals: the one place the SQL of
 * the catalog (schema, statements) learns them.  SQL strings are built at
 * compile time, so the values are written here once and checked against
 * the enums.
 */
#define SQL_SEALED	  "0"
#define SQL_EVICTING	  "1"
#define SQL_GONE	  "2"
#define SQL_OBJ_LISTED	  "0"
#define SQL_OBJ_VANISHED  "1"
#define SQL_OBJ_STALE	  "2"
#define SQL_KIND_TFRECORD "0"
#define SQL_KIND_RAW	  "1"
_Static_assert(CFS_SHARD_SEALED == 0 && CFS_SHARD_EVICTING == 1 && CFS_SHARD_GONE == 2,
	       "SQL_SEALED, SQL_EVICTING, SQL_GONE match enum cfs_shard_state");
_Static_assert(CFS_OBJECT_LISTED == 0 && CFS_OBJECT_VANISHED == 1 && CFS_OBJECT_STALE == 2,
	       "SQL_OBJ_* match enum cfs_object_state");
_Static_assert(CFS_KIND_TFRECORD == 0 && CFS_KIND_RAW == 1, "SQL_KIND_* match enum cfs_kind");

/*
 * Ids of the cached statements.  The SQL of each is defined next to the
 * code that runs it, in the table of the file named in the comment
 * (cfs__sql_<file>[id]); cfs__stmt() finds it there.
 */
enum stmt_id {
	/* catalog.c: sql_catalog */
	S_MAX_ID,
	/* catalog_objects.c: cfs__sql_objects */
	S_SOURCE_GET,
	S_SOURCE_ADD,
	S_OBJ_CURRENT,
	S_OBJ_ADD,
	S_OBJ_SEEN,
	S_OBJ_STALE,
	S_OBJ_VANISH,
	S_OBJ_LIST,
	S_OBJ_FETCHED,
	S_OBJ_KEY,
	S_STALE_SHARDS,
	/* catalog_files.c: cfs__sql_files */
	S_SHARD_ADD,
	S_SAMPLE_ADD,
	S_SHOBJ_ADD,
	S_SHOBJ_DEL,
	S_SHOBJ_DEL_CURRENT,
	S_SHARD_LIST,
	S_SHARD_GET,
	S_SHARD_STATS,
	S_SHARDS_EVICT_SUM,
	S_SHARDS_EVICT_SET,
	S_SHARD_GONE,
	S_SAMPLES_DEL,
	S_SHARD_DEL,
	S_SAMPLES_OF,
	S_SAMPLES_CURRENT,
	S_RESIDENT,
	S_C4_SCAN,
	S_SERVED_ADD,
	S_C1_ORPHANS,
	S_UNSYNCED_MAX,
	S_UNSYNCED_CLEAR,
	S_UNSYNCED_LIST,
	/* catalog_epochs.c: cfs__sql_epochs */
	S_EPOCH_ADMIT,
	S_EPOCH_READ,
	S_EPOCH_EVICT,
	S_EPOCH_SERVED,
	S_EPOCH_UNREAD,
	S_EPOCH_FULL,
	S_EPOCH_BEGIN,
	S_EPOCH_LIST,
	S_EPOCH_CURRENT,
	/* catalog_plan.c: cfs__sql_plan */
	S_PLAN_GET,
	S_PLAN_ADD,
	S_PLAN_SAVE,
	S_PLAN_UNITS,
	S_MARKS_CLEAR,
	S_MARK_ADD,
	S_MARKS_OF,
	S_POBJ_LIST,
	S_POBJ_ADD,
	S_POBJ_IDX,
	S_PIDX_ADD,
	S_POBJ_BYTES,
	S_RES_OBJECTS,
	S_RES_SAMPLES,
	S_SAMPLE_ORDINAL,
	S_PARTIAL_ADD,
	S_PARTIAL_DEL,
	S_PARTIAL_CUT_MANY,
	S_PARTIAL_LOW,
	S_CUT_DEL,
	S_CUT_LIST,
	S_RES_PARTIAL,
	S_OBJ_OFFSETS,
	S__COUNT
};

/* The SQL tables of the files; NULL where another file defines the id. */
extern const char *const cfs__sql_objects[S__COUNT];
extern const char *const cfs__sql_files[S__COUNT];
extern const char *const cfs__sql_epochs[S__COUNT];
extern const char *const cfs__sql_plan[S__COUNT];

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
	_Atomic uint64_t stale_gen;   /* atomic: listings that marked an object STALE */
};

/* ---- catalog.c: connection helpers ------------------------------------- */

/* Maps an SQLite result code to a negative errno (0 for OK, ROW, DONE). */
int cfs__sqlerr(int rc);

/* Logs the handle's last error for `what`; returns cfs__sqlerr(rc). */
int cfs__fail(struct cfs_catalog *c, int rc, const char *what);

/* The cached statement `id`, reset and unbound; NULL (logged) on error. */
sqlite3_stmt *cfs__stmt(struct cfs_catalog *c, enum stmt_id id);

/*
 * Steps st once and resets it (no rows expected; a RETURNING row is
 * dropped).  0, or -errno: a constraint violation is -EEXIST and not
 * logged, any other error is logged as `what`.
 */
int cfs__run(struct cfs_catalog *c, sqlite3_stmt *st, const char *what);

/* Runs literal SQL (pragmas, transaction control); 0 or -errno, logged. */
int cfs__exec(struct cfs_catalog *c, const char *sql);

/* Take and release c->mu (no precondition). */
void cfs__lock(struct cfs_catalog *c);
void cfs__unlock(struct cfs_catalog *c);

/*
 * Opens one transaction level: BEGIN IMMEDIATE at depth 0, a savepoint
 * inside an open transaction.  Takes mu (kept until cfs__txn_end); on
 * error mu is not held.
 */
int cfs__txn_begin(struct cfs_catalog *c);

/*
 * Closes the level cfs__txn_begin opened: commits it when ok == 0, else
 * rolls it back; releases mu.  ok is 0 or -errno: a positive one (an
 * SQLite code passed by mistake) is a caller's bug, asserted in builds
 * with asserts, and without them rolled back and returned as -EIO, never
 * as a success.  Returns ok when it is negative, else the commit's result.
 */
int cfs__txn_end(struct cfs_catalog *c, int ok);

/* Raises next_id above id (atomic; no lock needed). */
void cfs__note_id(struct cfs_catalog *c, int64_t id);

/* Fills el (zeroed by the caller) from the current row; 0 or -ENOMEM. */
typedef int (*cfs__row_fn)(sqlite3_stmt *st, void *el);
/* Frees the first n elements of arr (what row() allocated) and arr. */
typedef void (*cfs__rows_free_fn)(void *arr, size_t n);

/*
 * The row walker: steps st (bound) to its end, calling each(st, ctx) on
 * every row, and resets it.  A non-zero return of each() stops the walk
 * and is returned; a failed step is logged as `what` and returned as
 * -errno.  0 when every row was walked.  Nothing is held per row.
 */
typedef int (*cfs__each_fn)(sqlite3_stmt *st, void *ctx);
int cfs__each_row(struct cfs_catalog *c, sqlite3_stmt *st, cfs__each_fn each, void *ctx,
		  const char *what);

/*
 * The row reader: walks st (cfs__each_row), each row read by row()
 * into one more zeroed element of elem bytes, and resets it.  Returns 0
 * with *out (malloc'd, NULL when no row) and *n; or -ENOMEM, or the error
 * of the step (logged as `what`), with everything read freed (by drop(),
 * or free() when drop is NULL) and *out, *n unchanged.
 */
int cfs__collect_rows(struct cfs_catalog *c, sqlite3_stmt *st, size_t elem, cfs__row_fn row,
		      cfs__rows_free_fn drop, const char *what, void **out, size_t *n);

/* cfs__collect_rows of column 0 as int64 (ids, units, offsets). */
int cfs__collect_ids(struct cfs_catalog *c, sqlite3_stmt *st, int64_t **out, size_t *n);

/* A malloc'd copy of text column col; NULL for NULL, and *oom set on OOM. */
char *cfs__dup_col(sqlite3_stmt *st, int col, bool *oom);

/* ---- catalog_epochs.c -------------------------------------------------- */

/*
 * Adds (a, b, f) to the counters of epoch `epoch` that statement sid grows,
 * in the order of its columns (S_EPOCH_ADMIT, _EVICT: bytes, records,
 * files; _READ: bytes, files; _UNREAD: bytes, files; _FULL: records,
 * files; _SERVED: records, a only), creating the row.  Deltas past the
 * statement's columns are unused.  In a transaction.  Debug builds assert C3.
 */
int cfs__epoch_add(struct cfs_catalog *c, enum stmt_id sid, uint32_t epoch, uint64_t a, uint64_t b,
		   uint64_t f);

/* ---- catalog_plan.c ---------------------------------------------------- */

/*
 * Inserts plan marks and ends the partial rows of their units, and sets
 * the lows of m->low_units.  In a transaction.
 */
int cfs__plan_marks_add(struct cfs_catalog *c, const struct cfs_plan_marks *m);

/*
 * The whole objects with records in the files of ids_json (a JSON array of
 * ids, json_each), which are leaving, go into plan_cut.  In a transaction.
 */
int cfs__plan_cut_files(struct cfs_catalog *c, const char *ids_json);

#endif
