/*
 * boundary.h - what an epoch boundary does to the catalog and the view:
 * the one boundary of rollcache (DESIGN "Epochs" steps 1-3), used by the
 * daemon's epoch thread and by tests/daemon over a real store.
 *
 *   dmn_boundary_flush_reads()  the view's read counters into the catalog,
 *                               so the plan sees every read so far;
 *   dmn_boundary_evict()        step 2, the retirement plan: eviction/'s
 *                               pure evc_plan_boundary() over every sealed
 *                               file (pins real: a file open now is never a
 *                               victim), applied in one catalog transaction
 *                               (victims EVICTING, the epoch row); victims
 *                               held by a snapshot or a handle are deleted
 *                               on their last release (invariant 3);
 *   dmn_boundary_publish()      step 1, the snapshot: epoch N = every sealed
 *                               file (with retire_read, also the victims
 *                               chosen for N: they retire once read in N),
 *                               made current in the view.
 *
 * The order of a boundary, the budget and the samplers around it are the
 * epoch thread's (daemon/epochs.c).  Not thread-safe against itself: one
 * thread runs boundaries (flush_reads may run on any thread).
 */
#ifndef RC_DAEMON_BOUNDARY_H
#define RC_DAEMON_BOUNDARY_H

#include "cachefs/catalog.h"
#include "cachefs/epoch.h"
#include "cachefs/store.h"
#include "eviction/evictor.h"
#include "eviction/schedule.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cfs_fs;

struct dmn_boundary {
	/* borrowed; set before dmn_boundary_init() */
	struct cfs_store *store;
	struct cfs_epochs *set;
	struct cfs_fs *fs; /* the mount, or NULL (tests): told when `current` changes */
	bool retire_read;  /* retire = read: a boundary's victims stay in the new epoch's view */
	/*
	 * The epoch whose victims a restart kept (cfs_store_opts.keep_retiring),
	 * or -1: the next publish shows them as retiring too, once.
	 */
	int64_t retiring_carry;

	pthread_mutex_t flush_mu;      /* serialises read-statistics flushes */
	_Atomic uint64_t errors_flush; /* flushes that failed (stats: errors.stats_flush) */

	/* scratch of one boundary (the boundary's thread only) */
	struct cfs_shard_info *snap; /* every SEALED file, by id */
	size_t nsnap;
	/*
	 * A start-up boundary reads no row twice: its evict takes the rows
	 * reconciliation left (cfs_store_take_start_rows), sets their EVICTING
	 * ones (victims a restart kept, epoch retiring_carry) aside in
	 * `carry`, and when every victim it chose has left, makes b->snap the
	 * list of epoch snap_view's publish (else snap_view is -1 and the
	 * publish reads the catalog).
	 */
	struct cfs_shard_info *carry;
	size_t ncarry;
	bool from_start; /* b->snap and carry are the start rows */
	int64_t snap_view;
	struct cfs_epoch_row row; /* the epoch row evict wrote; publish completes it */
};

void dmn_boundary_init(struct dmn_boundary *b);
void dmn_boundary_destroy(struct dmn_boundary *b);

/* Writes pending read statistics into the catalog (one transaction).  Any thread. */
void dmn_boundary_flush_reads(struct dmn_boundary *b);

/*
 * Plans the boundary into epoch `next` under entry e and applies it (see
 * the file comment).  startup: a (re-)mount, planned with admit 0 (evict
 * only above the limit), then given min(startup_admit, room).  Returns 0
 * with *plan filled, or -errno with a message in err (nothing committed).
 */
int dmn_boundary_evict(struct dmn_boundary *b, uint32_t next, const struct evc_entry *e,
		       bool startup, uint64_t startup_admit, struct evc_plan *plan, char *err,
		       size_t errlen);

/*
 * Publishes epoch `number` of every SEALED file and records it in the
 * catalog.  Returns 0, or -errno with a message in err.
 */
int dmn_boundary_publish(struct dmn_boundary *b, uint32_t number, char *err, size_t errlen);

#endif
