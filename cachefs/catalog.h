/*
 * catalog.h - the SQLite catalog of a cache directory (CACHE_DIR/catalog.db).
 *
 * The only SQL in rollcache is in cachefs/catalog.c and the catalog_*.c
 * files beside it (split by table family behind cachefs/catalog_i.h);
 * everything else uses these functions.  See docs/catalog.md for the schema and the invariants.
 *
 * Terms:
 *   source   a remote dataset URL (file://, http(s)://, s3://).
 *   object   one remote object of a source, in one version (its ETag): an
 *            ETag change makes a new object row and marks the old one stale.
 *   file     one local file of the cache, called a "shard" everywhere: a
 *            TFRecord shard (shards/<id>.tfrecord, kind CFS_KIND_TFRECORD)
 *            or one raw object (objects/<id>, kind CFS_KIND_RAW, with a
 *            sanitized display name).  Ids of files are never reused, so a
 *            path never names different bytes (DESIGN invariant 1).
 *   sample   one record inside a file: file id, offset, length, crc, and
 *            where it came from (object id, offset in the object).
 *   epoch    one row per epoch: when it began, the schedule entry in force,
 *            files/bytes/records admitted, evicted and read during it.
 *
 * States of a file (catalog.c's design note says which function moves it):
 *   (in tmp/, no row) -> SEALED -> EVICTING -> GONE (the row deleted)
 *
 * Threads: a catalog handle may be used from any thread; calls are
 * serialized by a recursive mutex inside the handle.  cfs_catalog_begin()
 * takes that mutex until the matching commit/rollback, so a multi-call
 * transaction is never interleaved with another thread's calls.  Functions
 * documented as "one transaction" run inside the caller's transaction when
 * one is open (as a savepoint) and in their own otherwise.
 *
 * Errors: 0 or -errno.  SQLite's errors map to -ENOSPC (disk full),
 * -EEXIST (a constraint), -EBADMSG (a damaged or foreign file), -EROFS,
 * -EACCES, -EBUSY (the database stays locked), else -EIO (cfs__sqlerr;
 * logged with SQLite's message through cmn_log); -ENOMEM, -EINVAL for bad
 * arguments, -ENOENT for missing rows where documented.
 */
#ifndef RC_CACHEFS_CATALOG_H
#define RC_CACHEFS_CATALOG_H

#include "common/crc32c.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CFS_SCHEMA_VERSION 12 /* PRAGMA user_version this binary writes */

struct cfs_catalog;

/* Kinds of local files. */
enum cfs_kind {
	CFS_KIND_TFRECORD = 0, /* shards/<id>.tfrecord */
	CFS_KIND_RAW = 1,      /* objects/<id>, one sample = the whole file */
};

/* States of a local file. */
enum cfs_shard_state {
	CFS_SHARD_SEALED = 0,	/* resident, complete, immutable */
	CFS_SHARD_EVICTING = 1, /* chosen for eviction; file may still be open */
	/*
	 * file deleted, and its row with it (schema 10): no row is in this
	 * state; the value names the state, and the rows of older catalogs
	 */
	CFS_SHARD_GONE = 2,
};

/* States of a remote object version. */
enum cfs_object_state {
	CFS_OBJECT_LISTED = 0,	 /* listed, present in the latest listing */
	CFS_OBJECT_VANISHED = 1, /* absent from the latest listing */
	CFS_OBJECT_STALE = 2,	 /* superseded by a new ETag/size: retire its samples */
};

/* open flags */
#define CFS_CATALOG_READONLY 0x1 /* no writes, no migration; for `report` */

/*
 * Opens (and with !READONLY creates or migrates) the catalog at `path`:
 * journal_mode=WAL, synchronous=NORMAL, foreign keys on, a busy timeout.
 * Schema: PRAGMA user_version 0 (new file) is migrated to
 * CFS_SCHEMA_VERSION by running each migration in order in one transaction;
 * a version newer than CFS_SCHEMA_VERSION is refused (-EPROTONOSUPPORT,
 * nothing written); a file that is not a SQLite database is refused
 * (-EBADMSG, nothing written or deleted).
 * Returns 0 and *out, or -errno with a one-line message in err naming the
 * file and what to do; *out untouched on failure.
 */
int cfs_catalog_open(struct cfs_catalog **out, const char *path, unsigned flags, char *err,
		     size_t errlen);

/* Closes c (finalizes cached statements).  NULL is ignored. */
void cfs_catalog_close(struct cfs_catalog *c);

/* The SQLite library version in use ("3.40.1"), for reports. */
const char *cfs_catalog_sqlite_version(void);

/* The schema version found in the file when it was opened (before migration). */
int cfs_catalog_schema_version(const struct cfs_catalog *c);

/*
 * Explicit transaction (BEGIN IMMEDIATE).  Holds c's mutex until
 * cfs_catalog_commit() or cfs_catalog_rollback() on the same thread; no
 * nesting of begin.  Used e.g. by the evictor for one transaction per epoch
 * boundary.  Returns 0 or -errno (no transaction is open then).
 */
int cfs_catalog_begin(struct cfs_catalog *c);
int cfs_catalog_commit(struct cfs_catalog *c); /* on failure: rolled back */
void cfs_catalog_rollback(struct cfs_catalog *c);

/*
 * A read snapshot (added for `rollcache report`): BEGIN (deferred), so that
 * every read on c until cfs_catalog_read_end() sees one state of the
 * database, while a writer on another handle goes on (WAL).  Allowed on a
 * CFS_CATALOG_READONLY handle.  Holds c's mutex until read_end on the same
 * thread; no nesting with itself or cfs_catalog_begin() (-EINVAL), and only
 * reads in between.  Returns 0 or -errno (no snapshot open then).
 */
int cfs_catalog_read_begin(struct cfs_catalog *c);
void cfs_catalog_read_end(struct cfs_catalog *c); /* ends a read_begin; else no-op */

/* ---- sources and objects --------------------------------------------- */

/* Gets the id of source `url`, creating its row.  Returns 0 or -errno. */
int cfs_catalog_source(struct cfs_catalog *c, const char *url, int64_t *source_id);

/* One object as a listing reports it (input to cfs_catalog_objects_sync). */
struct cfs_listing_entry {
	const char *key; /* remote relative key; data only (invariant 7) */
	uint64_t size;
	const char *etag; /* NULL or "" when the store has none */
};

struct cfs_sync_result {
	uint64_t added;	   /* keys not known before */
	uint64_t changed;  /* known keys with a new etag or size (old row -> STALE) */
	uint64_t vanished; /* known keys absent from this listing (-> VANISHED) */
	uint64_t unchanged;
};

/*
 * Merges one full listing of a source, in one transaction: new keys get a
 * row; known keys get listed_epoch = epoch (and LISTED again if they had
 * VANISHED); a key whose etag or size changed gets a new row and its old
 * row becomes STALE; keys of the source not in the listing become VANISHED.
 * If ids is not NULL, ids[i] receives the current object id of ents[i].
 * Duplicated keys in ents: -EINVAL, nothing changed.
 * Returns 0 or -errno (nothing changed).
 */
int cfs_catalog_objects_sync(struct cfs_catalog *c, int64_t source_id,
			     const struct cfs_listing_entry *ents, size_t n, uint32_t epoch,
			     int64_t *ids, struct cfs_sync_result *res);

/*
 * Entry k (0 <= k < n) of a listing in key order, into *e; its strings stay
 * valid until the call it serves returns.
 */
typedef void (*cfs_listing_get_fn)(void *ctx, size_t k, struct cfs_listing_entry *e);

/*
 * cfs_catalog_objects_sync for a listing read through get(ctx, k, &e), in
 * strictly increasing key order (bytewise, as strcmp compares): no copy of
 * the entries is made.  ids[k] (when ids) receives entry k's object id.
 * Keys NULL, repeated or out of order: -EINVAL, nothing changed.  Returns 0
 * or -errno (nothing changed).
 */
int cfs_catalog_objects_sync_sorted(struct cfs_catalog *c, int64_t source_id,
				    cfs_listing_get_fn get, void *ctx, size_t n, uint32_t epoch,
				    int64_t *ids, struct cfs_sync_result *res);

/* One object row (cfs_catalog_objects_list). */
struct cfs_object_info {
	int64_t id;
	int64_t source_id;
	char *key;  /* owned by the array, see cfs_object_info_free */
	char *etag; /* NULL when none */
	uint64_t size;
	uint32_t listed_epoch;
	enum cfs_object_state state;
	uint32_t fetches;	    /* times a sampler finished reading it */
	int64_t last_fetched_epoch; /* -1: never */
};

/*
 * All objects of a source whose state bit (1u << state) is in state_mask,
 * ordered by id.  *out is a malloc'd array of *n entries (NULL when 0),
 * freed by cfs_object_info_free().  Returns 0 or -errno (*out, *n untouched).
 */
int cfs_catalog_objects_list(struct cfs_catalog *c, int64_t source_id, unsigned state_mask,
			     struct cfs_object_info **out, size_t *n);
void cfs_object_info_free(struct cfs_object_info *arr, size_t n);

/*
 * The key of object `id` (any state: an id keeps its key) into buf, NUL
 * included.  0, -ENOENT (no such row), -ENAMETOOLONG (cap too small) or
 * -errno.  The sampler keeps no key in memory: it reads one per transfer.
 */
int cfs_catalog_object_key(struct cfs_catalog *c, int64_t id, char *buf, size_t cap);

/* Records that a sampler finished reading object `id` in `epoch`. */
int cfs_catalog_object_fetched(struct cfs_catalog *c, int64_t id, uint32_t epoch);

/* ---- files (shards and raw objects) and their samples ------------------ */

/* One sample as the shard writer hands it to the catalog. */
struct cfs_sample {
	uint64_t offset;	/* of the record's header in the local file */
	uint64_t length;	/* payload bytes */
	uint32_t crc;		/* unmasked crc32c of the payload, verified at admission */
	int64_t object_id;	/* source object; 0 if unknown */
	uint64_t object_offset; /* of the record in the (uncompressed) object */
	uint32_t ordinal;	/* with has_ordinal: the record's line in its object's
				   index sidecar, counted from 0 (strategy=records) */
	bool has_ordinal;	/* false: NULL in the row (not read by index) */
};

/*
 * Units of a sampling plan that a commit completes (table plan_marks), and
 * the lows of partial objects that it makes true (plan_partial.low: every
 * record below committed once this commit is).
 */
struct cfs_plan_marks {
	int64_t plan_id;
	uint64_t pass;
	const uint64_t *units;
	size_t n;
	const uint64_t *low_units, *lows; /* [nlows] */
	size_t nlows;
};

/* A new sealed file (cfs_catalog_shard_insert). */
struct cfs_shard_new {
	int64_t id; /* from cfs_catalog_alloc_id() */
	enum cfs_kind kind;
	uint64_t bytes;		/* file size */
	uint32_t created_epoch; /* the epoch during which it was admitted */
	const char *name;	/* RAW: sanitized display name (cfs_sanitize_key), else NULL */
	int64_t object_id;	/* RAW: the object; else 0 */
	const struct cfs_plan_marks *marks; /* NULL, or plan units completed by this file */
	bool has_digest; /* TFRECORD: `digest` is set (else the row has none); a RAW
			    row's records_crc is its one sample's CRC (catalog_files.c) */
	uint32_t digest; /* TFRECORD: its records' CRCs digested in order (cfs_digest_add) */
};

/*
 * The digest of a TFRecord file's records (shards.records_crc): CRC-32C
 * over each record's payload CRC, 4 bytes little-endian, in file order,
 * from 0.  The shard writer computes it; the read path's first pass
 * computes it again and compares (cachefs/verify.c), so a record rewritten
 * with a valid frame is found without the catalog's rows.
 */
static inline uint32_t cfs_digest_add(uint32_t digest, uint32_t crc)
{
	uint8_t b[4] = {(uint8_t)crc, (uint8_t)(crc >> 8), (uint8_t)(crc >> 16),
			(uint8_t)(crc >> 24)};
	return cmn_crc32c(digest, b, 4);
}

/*
 * Allocates a fresh file id: greater than every id the catalog has ever
 * held and every id passed to cfs_catalog_note_id().  In memory only (an id
 * whose file never got a row is harmless: its tmp file is removed at start).
 * Thread-safe.  Never fails.
 */
int64_t cfs_catalog_alloc_id(struct cfs_catalog *c);

/* Tells the allocator an id was seen on disk (reconciliation). */
void cfs_catalog_note_id(struct cfs_catalog *c, int64_t id);

/*
 * Commits a sealed file: its row (state SEALED, stats 0), all its samples,
 * sh->marks (the sampling plan's units it completes, DESIGN 8) and
 * admitted files/bytes/records added to the epochs row of created_epoch
 * (created if missing) - one transaction (DESIGN invariant 2, last step).
 * For RAW, a name already used by another SEALED/EVICTING RAW file gives
 * -EEXIST (the caller picks a suffixed name, see cfs_display_name()).
 * Returns 0 or -errno (nothing changed).
 */
int cfs_catalog_shard_insert(struct cfs_catalog *c, const struct cfs_shard_new *sh,
			     const struct cfs_sample *samples, size_t n_samples);

/*
 * The same rows as cfs_catalog_shard_insert but the admission counters,
 * inside the transaction of cfs_catalog_begin() and without a savepoint
 * of their own (a group commit of many small files pays for none).  The
 * caller adds the counters of the files it inserts so with
 * cfs_catalog_admit_flat() in the same transaction: one delta an epoch
 * for the whole group.  -EINVAL outside such a transaction.  A failure of
 * the first row (-EEXIST: the name is taken) leaves nothing of the file;
 * any other failure may leave some of its rows: the caller then rolls the
 * whole transaction back.
 */
int cfs_catalog_shard_insert_flat(struct cfs_catalog *c, const struct cfs_shard_new *sh,
				  const struct cfs_sample *samples, size_t n_samples);

/*
 * Adds files, bytes and records admitted to the epochs row of `epoch`
 * (created if missing), inside the transaction of cfs_catalog_begin():
 * the counters of files inserted with cfs_catalog_shard_insert_flat.
 * 0 or -errno (-EINVAL outside such a transaction).
 */
int cfs_catalog_admit_flat(struct cfs_catalog *c, uint32_t epoch, uint64_t files, uint64_t bytes,
			   uint64_t records);

/* One file row with its statistics (what eviction policies read). */
struct cfs_shard_info {
	int64_t id;
	enum cfs_kind kind;
	enum cfs_shard_state state;
	uint64_t bytes;
	uint64_t records;
	uint32_t created_epoch;
	uint64_t reads;	       /* read calls served from it */
	uint64_t last_read_ms; /* wall clock, ms since 1970; 0 = never */
	uint64_t full_reads;   /* times read to the end */
	int64_t object_id;     /* RAW: its object; else 0 */
	char *name;	       /* RAW: display name; else NULL; owned by the array */
	int64_t evicted_epoch; /* -1 unless EVICTING; CFS_EVICTED_WITHDRAWN: withdrawn */
	uint32_t crc;	       /* RAW: CRC-32C of the whole object; TFRECORD: its digest */
	bool has_crc;	       /* crc is known (a TFRecord row sealed before schema 7 has none) */
};

/*
 * All files whose state bit (1u << state) is in state_mask (typically
 * 1u << CFS_SHARD_SEALED: every resident sealed file, for an epoch snapshot
 * and for the evictor), with their stats, ordered by id, in one query.
 * *out is malloc'd (NULL when *n == 0); free with cfs_shard_info_free().
 * Returns 0 or -errno (*out, *n untouched).
 */
int cfs_catalog_shards_list(struct cfs_catalog *c, unsigned state_mask, struct cfs_shard_info **out,
			    size_t *n);
void cfs_shard_info_free(struct cfs_shard_info *arr, size_t n);
/*
 * Compacts arr[0..n) to the rows whose state is not CFS_SHARD_GONE (a
 * caller's mark for "leaves the list"), in order, freeing the others'
 * names; returns how many are left.
 */
size_t cfs_shard_info_drop_gone(struct cfs_shard_info *arr, size_t n);

/* One file's row; -ENOENT when there is none. */
int cfs_catalog_shard_get(struct cfs_catalog *c, int64_t id, struct cfs_shard_info *out);

/* Read statistics accumulated off the hot path (FUSE), applied in batches. */
struct cfs_shard_stat_delta {
	int64_t id;
	uint64_t reads;	       /* added */
	uint64_t full_reads;   /* added */
	uint64_t read_bytes;   /* added to the epoch's read bytes */
	uint64_t last_read_ms; /* max()ed into last_read */
};

/*
 * Applies n deltas in one transaction; read_bytes and reads are summed into
 * the epochs row of `epoch` (read_bytes, read_files).  Unknown ids are skipped (a file may have
 * gone meanwhile). A file read to the end serves its records: each (object, offset) goes into table
 * `served` once, and those never served before (from any file, in any pass) are counted into
 * `epoch`'s served_records - what `report` calls seen: distinct records, never one twice however
 * many files or passes brought it again. A file's first full read also counts it and its records
 * into the full_files and full_records of the epoch that admitted it (its created_epoch). Returns 0
 * or -errno (nothing changed).
 */
int cfs_catalog_shards_add_stats(struct cfs_catalog *c, const struct cfs_shard_stat_delta *d,
				 size_t n, uint32_t epoch);

/*
 * Marks n SEALED files EVICTING in `epoch` (evicted files/bytes/records
 * added to that epoch's row), in one transaction.  Ids not SEALED: -ENOENT, nothing
 * changed.  Their files stay on disk (open handles, invariant 3) until
 * cfs_catalog_shards_gone().
 */
int cfs_catalog_shards_evict(struct cfs_catalog *c, const int64_t *ids, size_t n, uint32_t epoch);

/* Why a sealed file leaves the cache between boundaries (cfs_catalog_shard_withdraw). */
enum cfs_withdraw {
	CFS_WITHDRAW_CORRUPT, /* a record failed its CRC (cachefs/verify.h) */
	CFS_WITHDRAW_STALE,   /* it holds records of a STALE object (cachefs/stale.h) */
};

/* evicted_epoch of a withdrawn file: no view shows it again (not even retire = read's) */
#define CFS_EVICTED_WITHDRAWN (-2)

/*
 * Withdraws SEALED file `id` between boundaries: marks it EVICTING with
 * evicted_epoch CFS_EVICTED_WITHDRAWN (no later snapshot lists it, start-up
 * reconciliation never keeps it to retire, and it is deleted on its last
 * release, like a victim) WITHOUT adding to any epoch's evicted counters,
 * and deletes its samples and file objects at once.  CORRUPT: its records
 * are resident no more, and the sampling plan may fetch them again.  STALE:
 * the caller copied the records of current objects into another file in
 * the same transaction (cfs_shard_writer_replaces), so only the stale
 * objects' records leave.  One transaction (a savepoint inside the
 * caller's).  -ENOENT when it is not SEALED (nothing changed).
 */
int cfs_catalog_shard_withdraw(struct cfs_catalog *c, int64_t id, enum cfs_withdraw why);

/*
 * Makes n files GONE (their files were deleted): deletes their rows with
 * their samples and file objects, in one transaction.  A victim's row
 * (evicted_epoch >= 0) never read to the end (full_reads 0) is counted
 * first into its evicting epoch's unread_files and unread_bytes.  The
 * ids stay taken (DESIGN 1: the catalog's id mark keeps the highest id
 * of a deleted row).  Unknown ids (already GONE) are skipped.
 */
int cfs_catalog_shards_gone(struct cfs_catalog *c, const int64_t *ids, size_t n);

/*
 * Ids of SEALED files holding a sample of a STALE object (a relist saw a
 * new ETag or size), ordered by id; the daemon withdraws them
 * (cachefs/stale.h).  *out malloc'd.
 */
int cfs_catalog_shards_with_stale_objects(struct cfs_catalog *c, int64_t **out, size_t *n);

/*
 * How many listings so far marked an object STALE (cfs_catalog_objects_sync
 * with changed > 0) through this handle: a reader that saw the same number
 * before has no new stale object to look for.  Any thread, no lock.
 */
uint64_t cfs_catalog_stale_generation(struct cfs_catalog *c);

/* The samples of file `id`, ordered by offset; *out malloc'd (free()). */
int cfs_catalog_samples_of(struct cfs_catalog *c, int64_t id, struct cfs_sample **out, size_t *n);

/* Those of its samples whose object is not STALE (object 0 included), ordered by offset. */
int cfs_catalog_samples_current(struct cfs_catalog *c, int64_t id, struct cfs_sample **out,
				size_t *n);

/* Totals over SEALED files: count, bytes, records. */
struct cfs_resident {
	uint64_t files, bytes, records;
};
int cfs_catalog_resident(struct cfs_catalog *c, struct cfs_resident *out);

/* ---- epochs ------------------------------------------------------------ */

struct cfs_epoch_row {
	uint32_t number;
	uint64_t started_ms; /* wall clock ms; 0 while the row was only counted into */
	uint64_t admitted_bytes, admitted_records;
	uint64_t evicted_bytes, evicted_records;
	uint64_t read_bytes;
	uint64_t limit, admit; /* schedule entry in force (0: not recorded) */
	char policy[16];       /* "fifo", ... ("" when not recorded) */
	uint32_t min_uses;
	uint64_t resident_files, resident_bytes, resident_records; /* at its start */
	uint64_t served_records; /* records first served (read to the end) in it */
	uint64_t read_files;	 /* opens that read a file in it, page cache included */
	/* schema 10: what `report` counted from the rows of evicted files */
	uint64_t admitted_files;	     /* files sealed in it (created_epoch) */
	uint64_t evicted_files;		     /* files evicted at the boundary into it */
	uint64_t unread_files, unread_bytes; /* of those, deleted never read to the end */
	uint64_t full_files, full_records;   /* files sealed in it read to the end (by now) */
};

/*
 * Records the start of epoch `r->number`: started_ms, limit, admit, policy,
 * min_uses and resident_* from r; counters already accumulated in the row
 * (admissions sealed early) are kept.  One statement.  Returns 0 or -errno.
 */
int cfs_catalog_epoch_begin(struct cfs_catalog *c, const struct cfs_epoch_row *r);

/* Every epochs row ordered by number; *out malloc'd (free()). */
int cfs_catalog_epochs_list(struct cfs_catalog *c, struct cfs_epoch_row **out, size_t *n);

/* The highest epoch number with a started row, or -ENOENT when none. */
int cfs_catalog_current_epoch(struct cfs_catalog *c, uint32_t *epoch);

/* ---- the sampling plan (DESIGN "Sampling", invariant 8) --------------- */

/*
 * One plan per (source, rank, world_size, unit kind): the state of
 * common/plan.h as persisted.  Settled taken units are the `taken` bitmap
 * (bit u of byte u / 8) plus the plan_marks rows of the current pass
 * (units completed by files committed since the bitmap was written).
 */
struct cfs_plan_row {
	int64_t id;
	uint64_t seed, pass, gen, n_units, cursor;
	uint8_t *taken; /* malloc'd or NULL (none taken) */
	size_t taken_len;
};

/* Unit kinds of plans. */
enum { CFS_PLAN_OBJECTS = 0, CFS_PLAN_RECORDS = 1 };

/*
 * The plan of (source_id, rank, world_size, unit_kind), created with `seed`
 * (pass 0, no units) when there is none.  *out's taken is malloc'd (free
 * with cfs_plan_row_free).  Returns 0 or -errno (*out zeroed).
 */
int cfs_catalog_plan_get(struct cfs_catalog *c, int64_t source_id, uint32_t rank,
			 uint32_t world_size, int unit_kind, uint64_t seed,
			 struct cfs_plan_row *out);
void cfs_plan_row_free(struct cfs_plan_row *r);

/*
 * Writes pass, gen, n_units, cursor and the taken bitmap of plan r->id and
 * deletes its marks (the bitmap holds them now), in one transaction.
 * Returns 0, -ENOENT (no such plan) or -errno (nothing changed).
 */
int cfs_catalog_plan_save(struct cfs_catalog *c, const struct cfs_plan_row *r);

/* Adds marks outside a file's commit (units that completed with no file). */
int cfs_catalog_plan_mark(struct cfs_catalog *c, const struct cfs_plan_marks *m);

/* The marked units of plan_id in `pass`; *out malloc'd (free()). */
int cfs_catalog_plan_marks_of(struct cfs_catalog *c, int64_t plan_id, uint64_t pass, uint64_t **out,
			      size_t *n);

/*
 * The objects of a plan (plan_objects) and their units [first_unit,
 * first_unit + units); for strategy=records, idx holds the object's index
 * sidecar as parsed (sampler-defined bytes; plan_index), so a sidecar is
 * fetched once per object, and record_bytes the sum of its records' sizes
 * (the sampler's).
 */
struct cfs_plan_object {
	int64_t object_id;
	uint64_t first_unit, units;
	void *idx; /* malloc'd or NULL */
	size_t idx_len;
	int64_t record_bytes; /* with idx; read: -1 where the row has none (written
				 before version 9) */
};

/*
 * The plan's objects ordered by first_unit, without their index, one by
 * one as read: fn(ctx, row) for each (row->idx is NULL, row->idx_len its
 * length: 0 for none; cfs_catalog_plan_idx reads it), with the catalog's
 * lock held, so fn must not call the catalog.  A non-zero return of fn
 * stops the walk and is returned.  Nothing is held per row.  0, fn's
 * error or -errno.
 */
typedef int (*cfs_plan_object_fn)(void *ctx, const struct cfs_plan_object *row);
int cfs_catalog_plan_objects_each(struct cfs_catalog *c, int64_t plan_id, cfs_plan_object_fn fn,
				  void *ctx);

/*
 * The index of one object of the plan: *idx malloc'd (NULL and *len 0
 * when it has none).  0 or -errno.
 */
int cfs_catalog_plan_idx(struct cfs_catalog *c, int64_t plan_id, int64_t object_id, void **idx,
			 size_t *len);

/* Writes the record_bytes of one object of the plan (a row without). 0 or -errno. */
int cfs_catalog_plan_set_record_bytes(struct cfs_catalog *c, int64_t plan_id, int64_t object_id,
				      uint64_t record_bytes);

/*
 * Appends n objects to the plan and sets its n_units, in one transaction
 * (an object already in the plan: -EEXIST, nothing changed).
 */
int cfs_catalog_plan_objects_add(struct cfs_catalog *c, int64_t plan_id,
				 const struct cfs_plan_object *v, size_t n, uint64_t n_units);

/*
 * The same, with row i of the n asked of at(ctx, i, &row) as it is written,
 * so that the caller holds no array of them (the sampler's merge of a large
 * listing).
 */
typedef void (*cfs_plan_object_at)(void *ctx, size_t i, struct cfs_plan_object *out);
int cfs_catalog_plan_objects_add_each(struct cfs_catalog *c, int64_t plan_id, cfs_plan_object_at at,
				      void *ctx, size_t n, uint64_t n_units);

/*
 * Objects of the plan with a sample in a file that is not GONE and whose
 * transfer is not partial (below); *out malloc'd.
 */
int cfs_catalog_plan_resident_objects(struct cfs_catalog *c, int64_t plan_id, int64_t **out,
				      size_t *n);

/*
 * Partial objects (table plan_partial).  A whole object's transfer is
 * recorded as begun (committed at once, before any of its bytes are
 * fetched); the commit of the file holding its last record ends it (the
 * same transaction as its plan mark, cfs_shard_writer_add_marks).  An
 * object partial at a crash, a stop or a failure is never taken as
 * resident: it is fetched again from its `low`, and the records of it that
 * are resident are skipped (cfs_catalog_object_offsets).
 *
 * `low`: every record of the object below this offset was committed in
 * this transfer (it is resident, or was served and retired since), so a
 * new transfer of a partial object resumes there; 0 while unknown (a
 * compressed object starts again from its first byte).  The sampler
 * writes it where nothing it received is uncommitted (_low).
 *
 * _begin (which also ends the object's cut, below; an existing row keeps
 * its low): 0 or -errno.  _objects: the partial objects of the plan;
 * *out malloc'd.  _low: sets the low of n units in one transaction.
 */
struct cfs_partial {
	int64_t object_id;
	uint64_t low;
};
int cfs_catalog_plan_partial_begin(struct cfs_catalog *c, int64_t plan_id, uint64_t unit,
				   int64_t object_id);
int cfs_catalog_plan_partial_objects(struct cfs_catalog *c, int64_t plan_id,
				     struct cfs_partial **out, size_t *n);
int cfs_catalog_plan_partial_low(struct cfs_catalog *c, int64_t plan_id, const uint64_t *units,
				 const uint64_t *lows, size_t n);

/*
 * Cut objects (table plan_cut): whole objects some of whose records left
 * the cache (a file holding them was evicted or dropped as corrupt).  A cut
 * object stays resident for the plan while a record of it is, and its
 * bytes count as wanted (smp_sampler_wanted_bytes), so that the boundaries
 * go on making room until it leaves whole and is fetched again; its cut
 * ends when its next transfer begins.  *out malloc'd.
 */
int cfs_catalog_plan_cut_objects(struct cfs_catalog *c, int64_t plan_id, int64_t **out, size_t *n);

/* The offsets in the object of its samples (in files SEALED or EVICTING), ascending; *out malloc'd.
 */
int cfs_catalog_object_offsets(struct cfs_catalog *c, int64_t object_id, uint64_t **out, size_t *n);

/*
 * Every sample (GONE files have none: their rows are deleted), whatever its
 * object, handed to fn one at a time: the caller keeps those of its plan's
 * objects (no join, so that no plan row is read).  fn runs with the catalog
 * held and must not call it.  Returns 0, fn's nonzero return (the walk
 * stops there) or -errno.
 */
struct cfs_sample_ref {
	int64_t shard_id; /* with offset: the row */
	uint64_t offset;  /* of the record in its file */
	int64_t object_id;
	uint64_t object_offset;
	int64_t ordinal; /* samples.ordinal; -1 where NULL */
	uint64_t length; /* payload bytes */
};
typedef int (*cfs_sample_ref_fn)(void *ctx, const struct cfs_sample_ref *r);
int cfs_catalog_resident_samples(struct cfs_catalog *c, cfs_sample_ref_fn fn, void *ctx);

/*
 * Writes v[i].ordinal into the row (v[i].shard_id, v[i].offset), for each
 * of the n (a row gone since is skipped), in one transaction.  0 or -errno.
 */
int cfs_catalog_samples_set_ordinals(struct cfs_catalog *c, const struct cfs_sample_ref *v,
				     size_t n);

/* ---- sync points ------------------------------------------------------- */

/*
 * A file's row is listed in table `unsynced` by its seal's transaction (a
 * trigger) until a sync point (cachefs/store.c) made its bytes durable:
 * *mark gets the newest entry committed so far (0: none); after a
 * successful fsync of the files listed, cfs_catalog_unsynced_clear(mark)
 * deletes the entries up to it.  A caller inside an explicit transaction
 * of its own must not take a mark (the entries of that transaction are
 * not committed).  Start-up verifies the files still listed
 * (cfs_catalog_unsynced_files: ids, sorted, malloc'd).
 */
int cfs_catalog_unsynced_mark(struct cfs_catalog *c, int64_t *mark);
int cfs_catalog_unsynced_clear(struct cfs_catalog *c, int64_t mark);
int cfs_catalog_unsynced_files(struct cfs_catalog *c, int64_t **ids, size_t *n);

/* ---- maintenance ------------------------------------------------------- */

/*
 * Reconciliation support (cachefs/reconcile.c): deletes rows of files in
 * ids (any state) with their samples, in one transaction.
 */
int cfs_catalog_shards_drop(struct cfs_catalog *c, const int64_t *ids, size_t n);

/* PRAGMA integrity_check: 0 when "ok", -EBADMSG otherwise (message in err). */
int cfs_catalog_integrity_check(struct cfs_catalog *c, char *err, size_t errlen);

#endif
