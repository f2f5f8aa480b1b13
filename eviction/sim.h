/*
 * sim.h - the simulator behind `rollcache simulate`: the real policy and
 * boundary code over simulated shard statistics and a uniform reader.
 *
 * The model (docs/eviction.md, "The simulator"):
 *   - The dataset is R = dataset / record_size records.  The sampler walks
 *     them in a seeded random permutation, pass after pass, skipping records
 *     that are resident; it packs k = shard_size / record_size records into
 *     each shard, and admits whole shards only.
 *   - Before epoch 0 the sampler pre-warms the cache with entry(0).admit
 *     bytes (what `epoch next --wait` provides); they are epoch 0's view and
 *     count as epoch 0's downloads.  With `first` F the rows are epochs F,
 *     F+1, ... (schedule entries at those numbers): a mount's first view
 *     with a budget's worth of records is epoch 2 (epoch 0 starts empty,
 *     epoch 1 is first_epoch's small one).
 *   - At the start of each epoch E >= 1 the boundary plan of entry(E) runs
 *     (evc_plan_boundary) over the statistics of the resident shards, and
 *     its victims go.  The view of E is every resident shard.  With
 *     retire_read the victims stay in the view of E and each leaves right
 *     after the reader has read it; an admission that finds no room waits
 *     (in event order) until enough victims have left, as the budget makes
 *     the real sampler wait.
 *   - During E the reader reads every shard of the view once, to the end,
 *     in random order; meanwhile the sampler admits the plan's budget of
 *     fresh shards (joining the view at E+1).  Reads and admissions are
 *     interleaved uniformly at random on one tick clock: a read sets
 *     last_use, an admission sets it too (LRU counts admission as a use).
 *   - Nothing is pinned: a reader holds no shard across a boundary.  A
 *     shard admitted during E is fresh at the boundary into E+1 (never in a
 *     view), so it is not a victim of the plan's soft phase.
 *
 * Figures per epoch: see struct evc_sim_row.  `bound` is the coverage no
 * policy can beat with the same downloads: the reader only ever reads
 * records that were downloaded before the epoch's view was fixed, so
 * distinct <= min(R, records downloaded before epoch E began).
 */
#ifndef RC_EVICTION_SIM_H
#define RC_EVICTION_SIM_H

#include "eviction/evictor.h"
#include "eviction/schedule.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EVC_SIM_MAX_RECORDS (1u << 24) /* memory bound of one run: ~100 MB */

struct evc_sim_opts {
	uint64_t dataset;     /* bytes */
	uint64_t record_size; /* bytes per record */
	uint64_t shard_size;  /* target bytes per shard (rounded down to whole records, >= 1) */
	uint32_t epochs;      /* rows to produce */
	uint64_t seed;	      /* the sampler's permutation and the reader's order */
	bool retire_read;     /* retire = read: victims stay in the view and leave once read */
	uint32_t first;	      /* the epoch number of the first row (its schedule entry) */
};

struct evc_sim_row {
	uint32_t epoch;
	struct evc_entry entry;	     /* in force for this epoch */
	uint64_t evicted_records;    /* at the boundary into this epoch */
	uint64_t evicted_unread;     /* ... of which never read (downloads wasted) */
	uint64_t resident_records;   /* the epoch's view: what the reader reads */
	uint64_t resident_bytes;     /* ... in bytes */
	uint64_t budget;	     /* admit budget of the plan (bytes) */
	uint64_t fresh_records;	     /* admitted during the epoch (read from E+1) */
	uint64_t distinct;	     /* distinct records read in epochs 0..E */
	uint64_t dataset_records;    /* R */
	uint64_t downloaded_records; /* cumulative through this epoch, pre-warm included */
	uint64_t downloaded_bytes;   /* ... in bytes */
	uint64_t wasted_records;     /* cumulative: evicted before ever being read */
	uint64_t bound;		     /* max distinct any policy could reach (see above) */
	enum evc_reason reason;	     /* of the boundary plan (ok for epoch 0) */
	char why[320];
};

/*
 * Runs o->epochs epochs of schedule s; rows[] needs o->epochs entries.
 * Deterministic for equal inputs.  Returns 0, or -EINVAL (sizes that make
 * no sense, too many records) / -ENOMEM with one line in err.
 */
int evc_sim_run(const struct evc_sim_opts *o, const struct evc_schedule *s,
		struct evc_sim_row *rows, char *err, size_t errlen);

#endif
