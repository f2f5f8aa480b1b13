/*
 * store.h - one cache directory on disk (DESIGN "The cache directory").
 *
 *   CACHE_DIR/catalog.db            the catalog (cachefs/catalog.h)
 *   CACHE_DIR/shards/<id>.tfrecord  sealed TFRecord shards
 *   CACHE_DIR/objects/<id>          sealed raw objects (format=raw)
 *   CACHE_DIR/tmp/                  files being written; emptied at open
 *   CACHE_DIR/lock                  flock(LOCK_EX|LOCK_NB), holds the pid
 *
 * Opening a store takes the lock, opens (creates, migrates) the catalog,
 * runs start-up reconciliation (DESIGN invariant 6, cachefs/reconcile.c)
 * and builds the byte budget (invariant 4) from what survived.  Every path
 * under CACHE_DIR is derived from a numeric id only (invariant 7).
 *
 * Writers: cachefs/shard_writer.h.  Eviction: cfs_store_evicted() and
 * cfs_store_reap() below.  Readers (FUSE) open files with
 * cfs_store_open_file().
 *
 * Threads: all functions may be called from any thread once the store is
 * open; the store's own fields are set at open and read-only afterwards
 * (the catalog and the budget lock themselves).
 */
#ifndef RC_CACHEFS_STORE_H
#define RC_CACHEFS_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cachefs/budget.h"
#include "cachefs/catalog.h"
#include "common/config.h"

struct cfs_store;

struct cfs_store_opts {
	const char *dir; /* CACHE_DIR; created (mode 0755, parents too) if missing */
	uint64_t limit;	 /* bytes; the budget's limit (DESIGN [cache] limit) */
	/*
	 * retire = read: the EVICTING files of the latest boundary that are
	 * whole on disk stay (counted as draining), so that the first view
	 * after a restart still serves them once (they retire as they are read;
	 * report.retiring_epoch).  false: every EVICTING file is deleted.
	 */
	bool keep_retiring;
	/*
	 * Seal files with fs-verity (verity.h): AUTO where a probe file in
	 * tmp/ can be sealed, ON the same but the open fails where it cannot,
	 * OFF never.
	 */
	enum cmn_verity verity;
	/*
	 * Sync points (cfs_store_sync): one every this many ms on a thread of
	 * the store; 0: CFS_SYNC_PERIOD_MS.
	 */
	uint64_t sync_period_ms;
	/*
	 * Keep the rows start-up reconciliation read and left (every SEALED
	 * row, and the EVICTING rows kept to retire) for
	 * cfs_store_take_start_rows(): the first view needs no second read of
	 * them.
	 */
	bool keep_start_rows;
};

/*
 * How long a sealed file's bytes may wait in the page cache: a crash of
 * the system (not of the process) in that time makes the next start
 * verify the file whole (reconcile.c) and drop it if it was torn.
 */
#define CFS_SYNC_PERIOD_MS 5000

/*
 * A sync point: the files sealed so far made durable by an fsync of each
 * (and of shards/ and objects/), or by one syncfs() of the cache's file
 * system when more than CFS_SYNC_FILES_MAX are listed, then struck from
 * the catalog's `unsynced` list.  The store's thread runs one right after start-up reconciliation
 * (the open does not wait for its fsyncs), then one every sync_period_ms;
 * close runs the last; `ingest` returns after it, so
 * what it reports is on disk, as `cp -r && sync`.  Returns 0, or -errno
 * (err set): the files stay listed and the next start verifies them; a
 * store whose sync point failed once keeps every entry from then on (a
 * later fsync may succeed although pages of the failed one were lost).
 */
int cfs_store_sync(struct cfs_store *s, char *err, size_t errlen);

/*
 * Above this many files to make durable, a sync point runs one syncfs()
 * instead of an fsync of each (store.c, sync_listed: why).
 */
#define CFS_SYNC_FILES_MAX 64

/*
 * How many sync points with files to sync made them durable by an fsync
 * of each, and how many by one syncfs(), since the store was opened.
 */
void cfs_store_sync_ways(struct cfs_store *s, uint64_t *by_fsyncs, uint64_t *by_syncfs);

/*
 * The ballast: CACHE_DIR/ballast, CFS_BALLAST_BYTES allocated at open,
 * outside the budget (as catalog.db).  A disk filled to its last byte by
 * shards leaves the catalog (on the same file system) no room for a
 * boundary's transaction or a sync point; the samplers give the ballast back
 * when a write fails with ENOSPC (keep false) and take it again when the
 * disk has room (keep true).  Returns 0 or -errno (no ballast then).
 */
#define CFS_BALLAST_BYTES ((uint64_t)1 << 20)
int cfs_store_ballast(struct cfs_store *s, bool keep);

/* What start-up reconciliation found and did (invariant 6). */
struct cfs_reconcile_report {
	uint64_t tmp_removed;	     /* files deleted from tmp/ */
	uint64_t rows_dropped;	     /* SEALED/EVICTING rows whose file was missing */
	uint64_t files_removed;	     /* files in shards/ or objects/ without a row */
	uint64_t size_mismatches;    /* row and file disagreed on size: both dropped */
	uint64_t evictions_finished; /* EVICTING rows whose file was deleted now */
	uint64_t retiring_kept;	     /* EVICTING files kept to retire (keep_retiring) */
	int64_t retiring_epoch;	     /* ... the epoch that chose them, or -1 */
	uint64_t stray_entries;	     /* names in shards/ or objects/ not of our form: deleted */
	uint64_t unsynced_checked;   /* files sealed after the last sync point, verified whole */
	uint64_t unsynced_bad; /* ... of them failing (torn by a crash of the system): dropped */
	uint64_t unsynced_same_boot; /* files sealed after the last sync point, not verified:
					the system has not restarted since they were written
					(CACHE_DIR/lock's boot id), so the page cache holds them */
	uint64_t resident_files;     /* SEALED after reconciliation */
	uint64_t resident_bytes;
	uint64_t elapsed_us;
};

/*
 * Opens the cache directory o->dir as described above.
 * Returns 0 and *out, or -errno with a one-line message in err:
 *   -EWOULDBLOCK  another process holds CACHE_DIR/lock; the message names
 *                 its pid ("... is in use by pid 1234 (another rollcache
 *                 mount or ingest?): stop it or use another cache_dir");
 *   -EACCES/-EROFS/... the directory cannot be created or written;
 *   -ENOTEMPTY    the directory has no catalog.db but holds other files:
 *                 it is not a cache directory, nothing is touched;
 *   -EBADMSG      catalog.db is not a SQLite database (nothing deleted);
 *   -EPROTONOSUPPORT catalog.db has a newer schema than this binary.
 * On failure nothing is held and nothing was deleted except during
 * reconciliation of an otherwise valid cache.
 */
int cfs_store_open(struct cfs_store **out, const struct cfs_store_opts *o, char *err,
		   size_t errlen);

/*
 * Closes the store: cancels the budget (waking waiters), closes the
 * catalog, releases the lock.  Writers must be sealed or aborted first.
 */
void cfs_store_close(struct cfs_store *s);

/* The store's catalog and budget (owned by the store). */
struct cfs_catalog *cfs_store_catalog(struct cfs_store *s);
/*
 * Opens a second, read-only connection to the store's catalog (the
 * caller's to close with cfs_catalog_close): in WAL mode its reads see
 * what is committed and never wait for the store's connection, whose
 * mutex a seal holds for its whole transaction.  0 or -errno with a
 * message.
 */
int cfs_store_catalog_reader(struct cfs_store *s, struct cfs_catalog **out, char *err,
			     size_t errlen);
struct cfs_budget *cfs_store_budget(struct cfs_store *s);

/* The cache directory as given (owned by the store). */
const char *cfs_store_dir(const struct cfs_store *s);

/*
 * Whether files this store seals get fs-verity; when they do not, `why`
 * (if given) is set to the reason ("off", or what the probe at open found).
 */
bool cfs_store_verity(const struct cfs_store *s, const char **why);

/* What reconciliation at open found. */
const struct cfs_reconcile_report *cfs_store_reconcile_report(const struct cfs_store *s);

/*
 * The rows reconciliation left (opened with keep_start_rows), handed over
 * once: *rows (malloc'd, cfs_shard_info_free) sorted by id, each with the
 * columns cfs_catalog_shards_list gives.  They are the catalog's until the
 * first file is sealed, evicted or withdrawn: the caller takes them before
 * anything can do so (the daemon's start-up boundary, before its samplers
 * and its mount).  -ENOENT when not kept or already taken.
 */
int cfs_store_take_start_rows(struct cfs_store *s, struct cfs_shard_info **rows, size_t *n);

/*
 * The path of file `id` of `kind` relative to CACHE_DIR ("shards/12.tfrecord",
 * "objects/12") or, with absolute, below cfs_store_dir().  Returns 0 or
 * -ENAMETOOLONG.
 */
int cfs_store_file_path(const struct cfs_store *s, enum cfs_kind kind, int64_t id, bool absolute,
			char *buf, size_t buflen);

/*
 * Opens sealed file `id` read-only (O_RDONLY|O_CLOEXEC) relative to the
 * store's directory fd.  Returns an fd (>= 0) the caller closes, or -errno.
 * Does not consult the catalog.
 */
int cfs_store_open_file(struct cfs_store *s, enum cfs_kind kind, int64_t id);

/* One file an eviction or a withdrawal chose (cfs_store_evicted, cfs_store_reap). */
struct cfs_evict_item {
	int64_t id;
	enum cfs_kind kind;
	uint64_t bytes;
	bool open; /* a handle is open (invariant 3): keep the file until its last release */
};

/*
 * The budget's part of an eviction whose catalog part (EVICTING:
 * cfs_catalog_shards_evict) committed: each item's bytes sealed ->
 * draining (invariant 4 counts them until they are deleted).  Deletes
 * nothing: the caller reaps them (below), those no handle holds at once,
 * the others on their last release (invariant 3).  Called after the
 * commit, so that a rollback leaves the budget as it was.
 */
void cfs_store_evicted(struct cfs_store *s, const struct cfs_evict_item *items, size_t n);

/*
 * Deletes n EVICTING files (their `open` is ignored: the caller knows no
 * handle holds them): unlinks each, subtracts its draining bytes, and makes
 * every one deleted GONE (its catalog row deleted, cfs_catalog_shards_gone)
 * in one transaction.  A crash in between leaves
 * EVICTING rows, which start-up reconciliation finishes.  A file that could
 * not be unlinked stays EVICTING and draining.  Returns 0 or the first
 * -errno.
 */
int cfs_store_reap(struct cfs_store *s, const struct cfs_evict_item *items, size_t n);

/* cfs_store_reap() of one file (the last handle of an evicted file went). */
int cfs_store_release_evicted(struct cfs_store *s, enum cfs_kind kind, int64_t id, uint64_t bytes);

#endif
