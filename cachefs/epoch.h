/*
 * epoch.h - in-memory epoch snapshots and the pins that keep files alive.
 *
 * The FUSE layer (fs_node.c, fs_read.c) resolves names and serves reads
 * only from these structures; nothing here touches SQL or the network.  The
 * daemon (daemon/) builds snapshots from the catalog and hands them in with
 * cfs_epochs_publish(); the set deletes an evicted file through the store
 * once its last pin goes (DESIGN invariant 3), and posts CFS_EV_* bits for
 * what the daemon must act on.
 *
 * Ownership: a struct cfs_efile is owned by the set and lives while any
 * snapshot lists it, any handle is open on it, or the kernel holds a lookup
 * on it.  A struct cfs_epoch likewise lives while it is current, a directory
 * handle is open on it, or the kernel holds a lookup on it.  Both are freed
 * only by the set.  Inode numbers of the mount are their addresses.
 */
#ifndef RC_CACHEFS_EPOCH_H
#define RC_CACHEFS_EPOCH_H

#include "cachefs/layout.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What kind of node an inode number points at (first field of each node). */
enum cfs_node_type {
	CFS_NODE_FILE = 0x46494c45u,  /* "FILE" */
	CFS_NODE_EPOCH = 0x45504f43u, /* "EPOC" */
	CFS_NODE_DIR = 0x44495220u,   /* "DIR ": a directory inside an epoch (raw keys with '/') */
	CFS_NODE_INDEX = 0x494e4458u, /* "INDX": the epoch's index file, .rollcache/epochs/<E> */
};

struct cfs_edir;

/* One entry of a directory inside an epoch: a file or a subdirectory. */
struct cfs_dent {
	const char *name;    /* last path component */
	struct cfs_efile *f; /* or NULL */
	struct cfs_edir *d;  /* or NULL */
};

/*
 * A directory of an epoch's tree.  The tree is built at publish from the
 * files' names ("a/b/c" makes directories a and a/b), is immutable, and is
 * freed with its epoch struct; its file pointers are valid only while the
 * epoch is listed (check under set->mu).  Kernel lookups of a directory
 * count on its epoch (ep->nlookup), so the tree outlives every inode the
 * kernel knows.
 */
struct cfs_edir {
	uint32_t node_type;	 /* CFS_NODE_DIR */
	struct cfs_epoch *ep;	 /* owner */
	struct cfs_edir *parent; /* NULL: the epoch directory itself */
	char *name;		 /* component, owned */
	struct cfs_dent *ents;	 /* sorted by name, owned */
	size_t nents;
};

/* One sealed local file as a snapshot shows it. */
struct cfs_efile {
	uint32_t node_type; /* CFS_NODE_FILE; first field (inode -> type) */
	int64_t id;
	int kind;	/* enum cfs_kind */
	char *name;	/* name in epochs/<E>/, owned; its backing file: cfs__relpath(kind, id) */
	uint64_t bytes; /* immutable (invariant 1) */
	uint64_t records;
	uint32_t created_epoch;
	uint32_t crc; /* raw: CRC-32C of the whole file; TFRecord: its records' digest */
	bool has_crc; /* crc known (a TFRecord file sealed before schema 7 has none) */

	/* protected by set->mu */
	uint64_t nlookup;	 /* kernel lookups not yet forgotten */
	uint32_t nopen;		 /* open handles: the pin of invariant 3 */
	uint32_t nepochs;	 /* live snapshots listing this file */
	bool evicted;		 /* catalog says EVICTING: delete when unpinned */
	bool in_current;	 /* listed by the current epoch (never deleted then) */
	bool deleted;		 /* handed to `gone`: its backing file is being unlinked */
	bool gone_busy;		 /* in the gone chain: not freed until delete_gone() ran */
	struct cfs_efile *hnext; /* hash chain by id */
	struct cfs_efile *gnext; /* gone chain */
	/* the set's list of files with read counters to flush (set->dirty_mu) */
	struct cfs_efile *dnext, *dprev;
	bool in_dirty;	    /* protected by set->dirty_mu: on that list */
	_Atomic bool dirty; /* counters may have moved since its last flush (any thread) */

	/* read statistics since the last flush; relaxed atomics, any thread */
	_Atomic uint64_t d_reads, d_full_reads, d_read_bytes;
	_Atomic uint64_t last_read_ms;
	_Atomic uint32_t full_epoch; /* last epoch (+1) in which it was read to the end */
	uint32_t retire_number1;     /* protected by set->mu: for a victim, the epoch (+1) it
					retires in - the one published after the boundary
					that chose it (retire = read) */
	_Atomic bool served_full;    /* the daemon has served its last byte at least once */
	/* first-pass record checks (cachefs/verify.c); zero at creation */
	_Atomic uint64_t v_ok;	 /* [0, v_ok) are whole records whose CRCs passed (a raw
				    object: 0, or its size once its CRC passed) */
	_Atomic uint64_t v_bad1; /* offset + 1 of a corrupt record found; 0: none */
	_Atomic bool v_queued;	 /* its id was handed to the daemon once */
	int64_t v_ctime_ns;	 /* the backing file's ctime when first opened; under the
				    verifier's stripe mutex (cfs_verify_open) */

	/*
	 * The kernel's io mode of the inode (fs_read.c, under the fs's iomu): open
	 * handles served by the daemon, or passed through to the backing file
	 * (one backing fd and id for all of them); never both at once.
	 */
	uint32_t io_daemon, io_pt;
	int pt_fd, pt_id; /* valid while io_pt > 0 */
};

/*
 * The node of an epoch's index file (.rollcache/epochs/<E>), embedded in its
 * epoch: kernel lookups of it count on the epoch (ep->nlookup), as those of
 * its directories do.
 */
struct cfs_eindex {
	uint32_t node_type; /* CFS_NODE_INDEX */
	struct cfs_epoch *ep;
};

/* One epoch: an immutable, sorted list of files. */
struct cfs_epoch {
	uint32_t node_type; /* CFS_NODE_EPOCH */
	uint32_t number;
	char name[16];		  /* decimal number */
	struct cfs_efile **files; /* every file, sorted by name; immutable after publish */
	size_t nfiles;
	struct cfs_edir root;	 /* the epoch directory's entries (== files when no name has '/') */
	struct cfs_eindex index; /* its index file's node */
	struct cfs_efile **hidden; /* files of `files` that a directory of the same name hides
				      (not in the tree), sorted by address; immutable */
	size_t nhidden;
	uint64_t bytes, records; /* of every file of the snapshot, hidden ones included */
	uint64_t started_ms;

	/* protected by set->mu */
	uint64_t nlookup;
	uint32_t nopendir;
	bool listed;		 /* in set->list (visible under epochs/); files valid only then */
	struct cfs_epoch *next;	 /* protected by mu: set->list */
	struct cfs_epoch *anext; /* protected by mu: set->all */

	/* statistics, relaxed atomics */
	_Atomic uint64_t read_bytes;
	_Atomic uint64_t files_read_full; /* distinct files read to the end in it */
};

/* Input for one file of a new snapshot (cfs_epochs_publish). */
/* f's backing file relative to the cache directory, written into buf; returns buf. */
static inline const char *cfs_efile_relpath(const struct cfs_efile *f, char buf[CFS_RELPATH_MAX])
{
	return cfs__relpath((enum cfs_kind)f->kind, f->id, buf);
}

struct cfs_efile_in {
	int64_t id;
	int kind;
	const char *name; /* copied */
	uint64_t bytes, records;
	uint32_t created_epoch;
	uint32_t crc;  /* cfs_shard_info.crc: raw, of the whole file; TFRecord, the digest */
	bool has_crc;  /* cfs_shard_info.has_crc */
	bool retiring; /* a victim of this boundary kept in the view (retire = read) */
};

struct cfs_store;
struct cmn_events;

/*
 * Event bits the set posts to its events object (cmn_events_post) for the
 * owner's thread; the set never calls up into its owner.
 *   CFS_EV_RETIRED   an epoch left the view: take the numbers with
 *                    cfs_epochs_take_retired() and drop the kernel's entries
 *                    (cfs_fs_epoch_retired) from a thread that serves no
 *                    FUSE request;
 *   CFS_EV_ALL_READ  every file of the current epoch was read to the end.
 */
#define CFS_EV_RETIRED	(1u << 0)
#define CFS_EV_ALL_READ (1u << 1)

struct cfs_epochs {
	pthread_mutex_t mu;
	struct cfs_epoch *list;	   /* protected by mu; listed epochs, ascending numbers */
	struct cfs_epoch *all;	   /* protected by mu; every epoch struct alive */
	struct cfs_epoch *current; /* protected by mu; NULL before the first publish */
	struct cfs_efile **hash;   /* protected by mu; by id */
	size_t nbuckets;
	size_t nfiles;		 /* protected by mu; files alive in the hash */
	uint64_t draining_bytes; /* protected by mu; evicted, still on disk */
	struct cfs_store *store; /* deletes evicted files; NULL: nothing on disk (tests) */
	bool retire_read; /* retire = read: an evicted file of the current epoch goes once it was
			     read to the end in that epoch and its last handle closed; set before
			     the first publish */
	struct cmn_events *events;	 /* where CFS_EV_* are posted, or NULL */
	struct cfs_efile *gone_pending;	 /* protected by mu; chain via gnext */
	uint64_t gone_files, gone_bytes; /* protected by mu; evicted files deleted so far */

	/* the reaper thread (cfs_epochs_start_reaper), when it runs */
	pthread_t reaper;
	pthread_cond_t reap_cv;	      /* signals reap_queue or reap_stop */
	struct cfs_efile *reap_queue; /* protected by mu; chain via gnext, the reaper deletes */
	uint64_t reap_bytes; /* protected by mu; bytes queued or being deleted by the reaper */
	bool reaper_on;	     /* set before the reaper starts, cleared after it was joined */
	bool reap_stop;	     /* protected by mu */

	/* epochs that left the view, until the owner takes them */
#define CFS_RETIRED_MAX 64
	uint32_t retired_numbers[CFS_RETIRED_MAX]; /* protected by mu */
	size_t nretired;			   /* protected by mu */

	/*
	 * What the current epoch lists now (readdir of `current`): its files
	 * less those a directory hides and those retired (retire = read).  The
	 * one count behind the stats' current files/bytes/records.
	 */
	uint64_t cur_files, cur_bytes, cur_records; /* protected by mu */
	/*
	 * Bytes of the evicted files the current epoch still lists (not
	 * deleted): set at publish, raised by an eviction, lowered by a
	 * deletion.  The stats' disk.retiring; `next --wait` reads it at every
	 * poll, so it is a count, not a walk of the files.
	 */
	uint64_t cur_retiring_bytes; /* protected by mu */
	/*
	 * What cfs_epochs_stat() tells of the files, kept as they change: each
	 * change of a file's nopen, evicted, deleted or in_current takes its
	 * part out and puts it back (epoch.c, tally()), so that a stats read
	 * walks no view.  Debug builds check them against a walk of views of
	 * up to TALLY_CHECK_MAX files.
	 */
	uint64_t open_handles;	     /* protected by mu; the files' nopen */
	uint64_t draining_files;     /* protected by mu; evicted, not deleted */
	uint64_t unheld_bytes;	     /* protected by mu; of those, with no handle open */
	uint64_t cur_retiring_files; /* protected by mu; of those, in the current epoch */
	/*
	 * The files whose read counters moved since their last flush: a read
	 * puts its file here the first time (cfs_efile_account), the flush
	 * takes them (cfs_epochs_foreach_dirty), so it costs the files read,
	 * not the view.  dirty_mu is a leaf, taken after mu where both are.
	 */
	pthread_mutex_t dirty_mu;
	struct cfs_efile *dirty; /* protected by dirty_mu; chain via dnext, dprev */

	/* the current epoch's read counters, for the read path without mu */
	_Atomic uint32_t cur_number1; /* current number + 1; 0: none */
	_Atomic uint64_t cur_nfiles;  /* the whole snapshot: "all read" counts up to it */
	_Atomic uint64_t cur_read_bytes;
	_Atomic uint64_t cur_full_files; /* distinct files read to the end */
};

/*
 * Read-path accounting (any thread, no lock): `len` bytes served from f at
 * `off`; `first` is true on a handle's first read.  Updates f's deltas, the
 * current epoch's counters, and calls all_read when the last file of the
 * epoch has been read to the end.  *end_done is the handle's flag "already
 * counted a read to the end"; set here when this read reaches the end.
 * epoch1 is the number + 1 of the epoch that was current when the handle
 * was opened (cfs_epochs_current1): a read to the end counts in that
 * epoch, even when the kernel's request (a readahead, a release) reaches
 * the daemon after a boundary - it must not retire the file in the next.
 */
void cfs_efile_account(struct cfs_epochs *s, struct cfs_efile *f, uint64_t off, uint64_t len,
		       bool first, bool *end_done, uint32_t epoch1);

/* The current epoch's number + 1 (0: none yet), for a handle being opened. */
uint32_t cfs_epochs_current1(struct cfs_epochs *s);

/*
 * At release of a handle the daemon served no byte of: with keep_cache the
 * kernel answered every read from its page cache.  If f was served in full
 * before, that counts as one read to the end (the statistics can see only
 * what reaches the daemon; docs/mount.md says how they are approximated).
 */
void cfs_efile_account_cached(struct cfs_epochs *s, struct cfs_efile *f, uint32_t epoch1);

/*
 * Initialises an empty set.  `store` (borrowed, may be NULL) deletes the
 * evicted files whose last pin went (cfs_store_reap in one batch, on the
 * thread that dropped the pin, or on the reaper once it runs); `events`
 * (borrowed, may be NULL) receives the CFS_EV_* bits.  Returns 0 or
 * -ENOMEM.
 */
int cfs_epochs_init(struct cfs_epochs *s, struct cfs_store *store, struct cmn_events *events);

/*
 * Starts the reaper: from now on the evicted files whose last pin went are
 * deleted on its thread, in batches (one catalog transaction each: what
 * piled up while it deleted the last), not on the thread that dropped the
 * pin, so a boundary that retires an epoch or a FUSE release does not wait
 * for unlinks.  Their bytes stay `draining` in the budget until unlinked
 * (invariant 4).  cfs_epochs_destroy() lets it finish the queue and joins
 * it.  Returns 0 or -errno (pthread_create); the set then deletes inline.
 */
int cfs_epochs_start_reaper(struct cfs_epochs *s);

/*
 * Waits until the reaper's queue is empty and its batch deleted (the
 * tests' way to see its work done).  At once without a reaper.
 */
void cfs_epochs_reap_wait(struct cfs_epochs *s);

/*
 * Takes up to max numbers of epochs that left the view since the last call
 * (oldest first) into out.  Returns how many.
 */
size_t cfs_epochs_take_retired(struct cfs_epochs *s, uint32_t *out, size_t max);

/*
 * Stops the reaper after it deleted what it was given, then frees
 * everything; no FUSE session may still use it.  Deletes nothing else.
 */
void cfs_epochs_destroy(struct cfs_epochs *s);

/*
 * Makes a new epoch `number` of the n files in `in` current.  Files already
 * known (by id) are shared with older snapshots.  An evicted file may be
 * listed only with in[i].retiring (retire = read: it stays in the view of
 * this epoch until read, DESIGN "Epochs" step 2).  The previous current
 * epoch leaves the list at once if nothing holds it; otherwise when its last
 * holder lets go.  *held (may be NULL) gets the previous epoch's number + 1
 * when it is still held (the caller then invalidates the kernel's entry for
 * it, outside any lock, so that cached-but-unused dentries let go), else 0.  Returns 0, -EINVAL
 * (duplicate names or ids, number not above the current one), or -ENOMEM; the set is unchanged on
 * failure.
 */
int cfs_epochs_publish(struct cfs_epochs *s, uint32_t number, const struct cfs_efile_in *in,
		       size_t n, uint64_t started_ms, uint32_t *held);

/*
 * Marks the files of `ids` evicted.  Each is deleted (cfs_store_reap)
 * once no snapshot lists it and no handle is open on it.  Unknown ids are
 * ignored.  Returns the bytes that became draining.
 */
uint64_t cfs_epochs_evict(struct cfs_epochs *s, const int64_t *ids, size_t n);

/* Whether file `id` is listed by the current epoch (it has been in a view). */
bool cfs_epochs_in_current(struct cfs_epochs *s, int64_t id);

/* Whether file `id` has an open handle now (the evictor skips pinned files). */
bool cfs_epochs_pinned(struct cfs_epochs *s, int64_t id);

/*
 * Whether file `id` is held: listed by a live snapshot or open.  Such a file
 * may be evicted but not deleted now; cfs_epochs_evict() defers its deletion.
 */
bool cfs_epochs_held(struct cfs_epochs *s, int64_t id);

/* ---- used by the FUSE view and the daemon; set->mu taken inside where needed ---- */

/* The current epoch with a lookup taken, or NULL.  Drop with cfs_epoch_forget(). */
struct cfs_epoch *cfs_epochs_lookup_current(struct cfs_epochs *s);
uint32_t cfs_epochs_current_number(struct cfs_epochs *s, bool *have);

/* Sets retire_read (retire = read) for files that go from now on. */
void cfs_epochs_set_retire_read(struct cfs_epochs *s, bool on);

/* Epoch `number` if listed, with `nlookup` lookups taken; NULL otherwise. */
struct cfs_epoch *cfs_epochs_lookup(struct cfs_epochs *s, uint32_t number);

/* File `name` of ep with one lookup taken, or NULL. */
struct cfs_efile *cfs_epoch_lookup_file(struct cfs_epochs *s, struct cfs_epoch *ep,
					const char *name);

/*
 * Entry `name` of directory dir (&ep->root for the epoch directory) with one
 * lookup taken: on the file, or for a subdirectory on its epoch.  0 and
 * *out, -ENOENT (no such entry, or the epoch left the view).
 */
int cfs_edir_lookup(struct cfs_epochs *s, struct cfs_edir *dir, const char *name,
		    struct cfs_dent *out);

/* Whether f was deleted (evicted and gone; a retired file of retire = read):
 * lookups answer ENOENT for it and listings leave it out. */
bool cfs_efile_deleted(struct cfs_epochs *s, const struct cfs_efile *f);

/* Drops n kernel lookups (FUSE forget). */
void cfs_epoch_forget(struct cfs_epochs *s, struct cfs_epoch *ep, uint64_t n);
void cfs_efile_forget(struct cfs_epochs *s, struct cfs_efile *f, uint64_t n);

/* Directory handles on an epoch. */
void cfs_epoch_opendir(struct cfs_epochs *s, struct cfs_epoch *ep);
void cfs_epoch_releasedir(struct cfs_epochs *s, struct cfs_epoch *ep);

/*
 * Pins f for an open handle (invariant 3): -ENOENT if its file was already
 * deleted.  A reader's epoch directory stays too: the kernel holds a lookup
 * on the parent of every open file's dentry.
 */
int cfs_efile_open(struct cfs_epochs *s, struct cfs_efile *f);
void cfs_efile_release(struct cfs_epochs *s, struct cfs_efile *f);

/*
 * Whether f may retire while the current epoch lists it (retire = read, and
 * f is a victim): a lookup of it gets entry timeout 0, so that no kernel
 * dentry of it outlives its retirement and nothing has to be invalidated
 * (an invalidation waits in the kernel for the directory's lock, which a
 * lookup holds until the daemon answers: a daemon killed then never dies).
 */
bool cfs_efile_may_retire(struct cfs_epochs *s, const struct cfs_efile *f);

/*
 * Holds a listed epoch for a reader of its index (as a directory handle
 * does): it stays listed and its files stay valid until
 * cfs_epoch_releasedir().  Returns 0, or -ENOENT when ep left the view.
 */
int cfs_epoch_hold(struct cfs_epochs *s, struct cfs_epoch *ep);

/*
 * The files ep lists now (readdir shows them: not hidden, not retired), in
 * name order, from ep->files[*pos]: up to max of them into out; *pos moves
 * past the files looked at.  Returns how many; 0 only at the end.  ep must
 * be held (cfs_epoch_hold); the files stay valid, and their name, bytes and
 * records unchanged, while it is.
 */
size_t cfs_epoch_shown_files(struct cfs_epochs *s, struct cfs_epoch *ep, size_t *pos,
			     struct cfs_efile **out, size_t max);

/* Numbers of the listed epochs (malloc'd array; NULL when *n == 0). */
int cfs_epochs_list_numbers(struct cfs_epochs *s, uint32_t **out, size_t *n);

struct cfs_shard_stat_delta;

/*
 * Takes f's read statistics since the last take into *d, its counters back
 * to 0; false (d untouched) when it was not read since.  Any thread, no
 * lock: each count is taken once (atomic exchanges), by the daemon's flush
 * or by the deletion of f (epoch.c, flush_gone_stats).
 */
bool cfs_efile_take_delta(struct cfs_efile *f, struct cfs_shard_stat_delta *d);

/* Calls fn for every live file under mu (the scrubber's marks); fn must not block. */
void cfs_epochs_foreach_file(struct cfs_epochs *s, void (*fn)(struct cfs_efile *f, void *ctx),
			     void *ctx);

/*
 * Calls fn for every file read since the last call (stats flushing: it
 * takes their counters, cfs_efile_take_delta), each taken off the list
 * first; a read meanwhile puts it back for the next call.  Under dirty_mu:
 * fn must not block nor take mu.
 */
void cfs_epochs_foreach_dirty(struct cfs_epochs *s, void (*fn)(struct cfs_efile *f, void *ctx),
			      void *ctx);

/* Bytes of the evicted files the current epoch still lists (O(1), under mu). */
uint64_t cfs_epochs_retiring_bytes(struct cfs_epochs *s);

/* Counters under mu: live epochs, files alive, draining bytes, open handles. */
struct cfs_epochs_stat {
	uint32_t epochs_listed;
	uint64_t files_alive;
	uint64_t draining_bytes;
	uint64_t draining_files;
	uint64_t open_handles;
	uint64_t gone_files, gone_bytes; /* evicted files deleted on their last release */
	uint64_t draining_unheld_bytes;	 /* evicted, no handle open: leave at the next publish,
					    or queued for the reaper */
	uint64_t retiring_files;	 /* evicted files the current epoch still lists */
	uint64_t retiring_bytes;	 /* their bytes: on disk until the next publish */
	/* what the current epoch lists now (set->cur_files ...); 0 before the first publish */
	uint64_t current_files, current_bytes, current_records;
};
void cfs_epochs_stat(struct cfs_epochs *s, struct cfs_epochs_stat *st);

#endif
