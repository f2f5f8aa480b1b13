/*
 * sampler.h - the samplers: pull records from a remote source into a cache.
 *
 * One sampler reads one source (cfg->url) for one rank (cfg->rank of
 * cfg->world_size) into one cache store, following the source's sampling
 * plan kept in the catalog (DESIGN "Sampling", invariant 8; the planner is
 * common/plan.h): a seeded permutation of this rank's units (records with
 * strategy=records, else objects) walked pass after pass, skipping units
 * that are resident, never fetching a unit twice in a pass, the plan's
 * progress committed with the files that hold the units.  A sampler
 * re-lists the source when due (every cfg->relist epochs: new objects join
 * the rest of the pass, deleted ones leave it, changed ETags mark old
 * samples stale) and admits:
 *   format=tfrecord: records are CRC-checked (DESIGN 5) as the body streams
 *     in, interleaved through a shuffle buffer and packed into local shards
 *     of cfg->shard_size;
 *   format=raw: each object becomes one local file (DESIGN 7: shown under its
 *     sanitized key, stored under a numeric id).
 * A unit's bytes are reserved in the store's budget before it is fetched
 * (DESIGN 4; nothing is downloaded without room).  With no room the run
 * either ends (stop_when_full, what `rollcache ingest` wants) or waits for
 * eviction or the next epoch's admit budget.
 *
 * Threads: smp_sampler_run() runs on the caller's thread (one at a time per
 * sampler); smp_sampler_stop(), _pause(), _resume(), _idle() and _stats()
 * may be called from any thread.
 */
#ifndef RC_SAMPLER_SAMPLER_H
#define RC_SAMPLER_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/config.h"
#include "sampler/stats.h"

struct cfs_store;
struct smp_sampler;

/* A progress snapshot for people (cmd_ingest's line). */
struct smp_progress {
	uint64_t objects_total; /* units of this rank's plan (objects, or records) */
	uint64_t objects_done;	/* units admitted in this run */
	uint64_t records;	/* admitted (sealed) records */
	uint64_t bytes;		/* admitted (sealed) bytes */
	uint64_t fetched;	/* body bytes received */
	uint64_t elapsed_ms;
	bool full; /* the budget had no more room */
};

typedef void (*smp_progress_cb)(const struct smp_progress *p, const struct smp_stats *st,
				void *ctx);

struct smp_sampler_opts {
	const struct cmn_config *cfg; /* borrowed for the sampler's life */
	struct cfs_store *store;      /* borrowed; outlives the sampler */
	uint64_t seed;	     /* a new plan's seed (an existing plan keeps its own); shuffle */
	bool stop_when_full; /* end the run when the budget has no room */
	bool follow;	     /* pass after pass until stopped (the mount); else one pass */
	uint64_t
	    room_wait_ms; /* !stop_when_full: one wait for room (0: 60 s); re-waits until stopped */
	const char *credentials_file; /* NULL: the AWS default (tests point it elsewhere) */
	/*
	 * > 0: the run's first shard is sealed at min(first_shard, shard_size)
	 * bytes and the shuffle buffer holds at most that much until then, so
	 * that a new cache has data to show soon (the mount's first epoch,
	 * `first_epoch`); later shards are shard_size.  0: every shard is.
	 */
	uint64_t first_shard;
	smp_progress_cb progress; /* may be NULL; called about twice a second */
	void *progress_ctx;
};

/*
 * Opens the source (parses the URL, reads credentials).  Nothing is listed
 * or fetched yet.  Returns 0 and *out, or -errno with a message (bad URL
 * -EINVAL, unsafe credentials file -EACCES, ...).
 */
int smp_sampler_new(struct smp_sampler **out, const struct smp_sampler_opts *o, char *err,
		    size_t errlen);

/*
 * Loads the plan and, when it has no object yet (a new cache, or a share
 * never listed), lists the source now, on the caller's thread, as the
 * first smp_sampler_run() in `epoch` would (that run then does not list
 * again until `relist` epochs have passed): the mount calls it before it
 * reports itself up, so that a source that cannot be listed (no such
 * directory, a refused connection, HTTP 404, wrong credentials) fails the
 * mount of a new cache with its reason instead of a sampler that idles.
 * A plan with objects is listed by the first run instead (a warm mount
 * does not wait for a listing; one that fails is waited out as the run's
 * heal).  Returns 0, or -errno with the listing's one-line message in err
 * (-ENOENT, -ENOTDIR, -EACCES, -EIO, -ETIMEDOUT, ...).  Not while a run is
 * going on.
 */
int smp_sampler_list(struct smp_sampler *s, uint32_t epoch, char *err, size_t errlen);

/*
 * Runs in `epoch` as described above: until the end of the plan's current
 * pass (a new pass first when the recorded one is over), or with follow
 * until stopped.  Returns 0 when the run ended (the pass done, the budget
 * full with stop_when_full, or stopped), or -errno with a message for
 * failures that stop sampling: the listing failed, a local write failed
 * (-ENOSPC, -EIO).  Failures of single objects (404, retries exhausted) are
 * counted in stats and logged, and do not stop it.  Calling it again goes
 * on with the same plan.  With follow (the mount) a full disk (-ENOSPC,
 * -EDQUOT) and a listing that fails do not end the run: it drops what it
 * had not committed, waits (a back-off from 0.5 s doubling to 30 s; see
 * smp_sampler_waiting()), re-reads the plan from the catalog, lists the
 * source again and goes on, so nothing is skipped or fetched twice.
 */
int smp_sampler_run(struct smp_sampler *s, uint32_t epoch, char *err, size_t errlen);

/*
 * An epoch boundary begins: the running smp_sampler_run() seals the shard
 * it was filling (its records reach the boundary's snapshot), saves the
 * plan and holds - transfers and shuffle buffer kept - until
 * smp_sampler_resume().  Returns 0 once that is done (or when no run is
 * going on), -ETIMEDOUT after timeout_ms.  Thread-safe.
 */
int smp_sampler_pause(struct smp_sampler *s, uint64_t timeout_ms);

/* Epoch `epoch` began: files from now on are admitted in it; goes on.  Thread-safe. */
void smp_sampler_resume(struct smp_sampler *s, uint32_t epoch);

/*
 * Epoch `epoch` began without a pause (the mount's first epoch of a new
 * cache, which has nothing to seal or evict): shards opened from now on are
 * admitted in it; nothing is sealed, drained or held.  Thread-safe.
 */
void smp_sampler_set_epoch(struct smp_sampler *s, uint32_t epoch);

/*
 * True when the sampler has nothing to fetch until something changes (every
 * unit resident, or waiting for room) or is not running.  Thread-safe.
 */
bool smp_sampler_idle(struct smp_sampler *s);

/*
 * Bytes of the units the plan would still fetch: live units that are not
 * resident (the source's bytes: a compressed object counts compressed).
 * 0 once the whole dataset of this rank is resident; UINT64_MAX before the
 * plan was loaded or while its listing holds no object.  Thread-safe (a
 * snapshot).
 */
uint64_t smp_sampler_wanted_bytes(struct smp_sampler *s);

/*
 * The same, counted afresh: the run loop re-reads which units are resident
 * (files dropped or retired since its last look) and the call waits for it,
 * at most timeout_ms (then, or when the sampler is paused or not running,
 * the last count).  Thread-safe; not from the sampler's own thread.
 */
uint64_t smp_sampler_wanted_fresh(struct smp_sampler *s, uint64_t timeout_ms);

/*
 * While a following run (a mount) waits out a failure that heals by itself
 * - a full disk (ENOSPC, EDQUOT), a source that cannot be listed - true,
 * and `why` gets "<cause>, retry in N s"; else false and "".  Thread-safe.
 */
bool smp_sampler_waiting(struct smp_sampler *s, char *why, size_t len);

/* Makes a running smp_sampler_run() return soon.  Thread-safe. */
void smp_sampler_stop(struct smp_sampler *s);

/* The counters (live; read with SMP_STAT_GET). */
const struct smp_stats *smp_sampler_stats(const struct smp_sampler *s);

/* The last pass's summary. */
void smp_sampler_progress(const struct smp_sampler *s, struct smp_progress *p);

void smp_sampler_free(struct smp_sampler *s);

#endif
