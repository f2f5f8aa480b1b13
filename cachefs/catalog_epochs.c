/*
 * catalog_epochs.c - epochs rows of the catalog: an epoch's start (its
 * schedule entry and the resident totals), the list, the current epoch,
 * and the counters that the other catalog files grow in the transaction
 * of the change they count.
 *
 * Keeps C3: a counter only grows (every counter statement adds a delta,
 * none sets one), each in the transaction of what it counts; builds
 * without NDEBUG assert it at every add.  Terms, invariants and locking:
 * the design note of catalog.c.
 */
#include "cachefs/catalog_i.h"

#include "common/clock.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

/*
 * A counter statement: adds excluded.<col> to each <col> for epoch ?1 (the
 * deltas are ?2, ?3, ?4 in the order of the columns), returns the new values.
 */
#define ADD_(a)		    a " = " a " + excluded." a
#define RETURNING3(a, b, f) " RETURNING " a ", " b ", " f
#define EPOCH_ADD1(a)                                                                              \
	"INSERT INTO epochs(number, " a                                                            \
	") VALUES(?1, ?2) ON CONFLICT(number) DO UPDATE SET " ADD_(a) " RETURNING " a
#define EPOCH_ADD2(a, b)                                                                           \
	"INSERT INTO epochs(number, " a ", " b ") VALUES(?1, ?2, ?3) "                             \
	"ON CONFLICT(number) DO UPDATE SET " ADD_(a) ", " ADD_(b) " RETURNING " a ", " b
#define EPOCH_ADD3(a, b, f)                                                                        \
	"INSERT INTO epochs(number, " a ", " b ", " f ") VALUES(?1, ?2, ?3, ?4) "                  \
	"ON CONFLICT(number) DO UPDATE SET " ADD_(a) ", " ADD_(b) ", " ADD_(f) RETURNING3(a, b, f)

const char *const cfs__sql_epochs[S__COUNT] = {
    [S_EPOCH_ADMIT] = EPOCH_ADD3("admitted_bytes", "admitted_records", "admitted_files"),
    [S_EPOCH_READ] = EPOCH_ADD2("read_bytes", "read_files"),
    [S_EPOCH_EVICT] = EPOCH_ADD3("evicted_bytes", "evicted_records", "evicted_files"),
    [S_EPOCH_SERVED] = EPOCH_ADD1("served_records"),
    /* a victim deleted never read to the end, into its evicting epoch (version 10) */
    [S_EPOCH_UNREAD] = EPOCH_ADD2("unread_bytes", "unread_files"),
    /* a file's first full read, into the epoch that admitted it (version 10) */
    [S_EPOCH_FULL] = EPOCH_ADD2("full_records", "full_files"),
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
		     "served_records, read_files, admitted_files, evicted_files, unread_files, "
		     "unread_bytes, full_files, full_records FROM epochs ORDER BY number",
    [S_EPOCH_CURRENT] = "SELECT max(number) FROM epochs WHERE started_ms > 0",
};

#ifndef NDEBUG
/*
 * C3 at one add: the deltas d[0..n) are not negative as SQL integers, and
 * the new values (the RETURNING row) are integers (SQLite turns an
 * overflowing sum into a REAL) no smaller than the deltas.
 */
static void assert_c3(sqlite3_stmt *st, const uint64_t *d, int n)
{
	for (int col = 0; col < n; col++) {
		assert((sqlite3_int64)d[col] >= 0 && "C3: a counter delta is negative");
		assert(sqlite3_column_type(st, col) == SQLITE_INTEGER && "C3: counter overflowed");
		assert((uint64_t)sqlite3_column_int64(st, col) >= d[col] &&
		       "C3: counter decreased");
	}
}
#else
#define assert_c3(st, d, n) ((void)0)
#endif

int cfs__epoch_add(struct cfs_catalog *c, enum stmt_id sid, uint32_t epoch, uint64_t a, uint64_t b,
		   uint64_t f)
{
	sqlite3_stmt *st = cfs__stmt(c, sid);
	const uint64_t d[3] = {a, b, f};
	int rc;

	if (!st)
		return -EIO;
	/* the statement's columns take the first deltas; the rest are unused */
	int n = sqlite3_bind_parameter_count(st) - 1;
	sqlite3_bind_int64(st, 1, epoch);
	for (int i = 0; i < n; i++)
		sqlite3_bind_int64(st, 2 + i, (sqlite3_int64)d[i]);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		assert_c3(st, d, n);
		rc = sqlite3_step(st);
	}
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? 0 : cfs__fail(c, rc, "epoch counters");
}

int cfs_catalog_epoch_begin(struct cfs_catalog *c, const struct cfs_epoch_row *r)
{
	sqlite3_stmt *st;
	int rc;

	cfs__lock(c);
	st = cfs__stmt(c, S_EPOCH_BEGIN);
	if (!st) {
		cfs__unlock(c);
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
	rc = cfs__run(c, st, "epoch begin");
	cfs__unlock(c);
	return rc;
}

static int row_epoch(sqlite3_stmt *st, void *el)
{
	struct cfs_epoch_row *e = el;
	const unsigned char *pol = sqlite3_column_text(st, 9);

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
	e->admitted_files = (uint64_t)sqlite3_column_int64(st, 16);
	e->evicted_files = (uint64_t)sqlite3_column_int64(st, 17);
	e->unread_files = (uint64_t)sqlite3_column_int64(st, 18);
	e->unread_bytes = (uint64_t)sqlite3_column_int64(st, 19);
	e->full_files = (uint64_t)sqlite3_column_int64(st, 20);
	e->full_records = (uint64_t)sqlite3_column_int64(st, 21);
	return 0;
}

int cfs_catalog_epochs_list(struct cfs_catalog *c, struct cfs_epoch_row **out, size_t *n)
{
	sqlite3_stmt *st;
	int rc;

	cfs__lock(c);
	st = cfs__stmt(c, S_EPOCH_LIST);
	rc = st ? cfs__collect_rows(c, st, sizeof(**out), row_epoch, NULL, "epoch list",
				    (void **)out, n)
		: -EIO;
	cfs__unlock(c);
	return rc;
}

int cfs_catalog_current_epoch(struct cfs_catalog *c, uint32_t *epoch)
{
	sqlite3_stmt *st;
	int rc;

	cfs__lock(c);
	st = cfs__stmt(c, S_EPOCH_CURRENT);
	if (!st) {
		cfs__unlock(c);
		return -EIO;
	}
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) {
		*epoch = (uint32_t)sqlite3_column_int64(st, 0);
		rc = 0;
	} else if (rc == SQLITE_ROW) {
		rc = -ENOENT;
	} else {
		rc = cfs__fail(c, rc, "current epoch");
	}
	sqlite3_reset(st);
	cfs__unlock(c);
	return rc;
}
