/*
 * sampler.h - the samplers: pull records from a remote source into a cache.
 *
 * One sampler reads one source (cfg->url) for one rank (cfg->rank of
 * cfg->world_size) into one cache store.  smp_sampler_run() makes one pass:
 * re-lists the source when due (every cfg->relist epochs, syncing the
 * catalog's objects so changed ETags mark old samples stale), then reads this
 * rank's objects in a seeded random order, `connections` at a time, and
 * admits their records:
 *   format=tfrecord: records are CRC-checked (DESIGN 5) as the body streams
 *     in, interleaved through a shuffle buffer and packed into local shards
 *     of cfg->shard_size;
 *   format=raw: each object becomes one local file (DESIGN 7: shown under its
 *     sanitized key, stored under a numeric id).
 * Every byte is reserved in the store's budget before it is written
 * (DESIGN 4).  When there is no room, the pass either ends (stop_when_full,
 * what `rollcache ingest` wants) or sleeps on the budget's condition until
 * eviction or the next epoch makes room.
 *
 * Threads: smp_sampler_run() runs on the caller's thread (one at a time per
 * sampler); smp_sampler_stop() and smp_sampler_stats() may be called from
 * any thread.
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
	uint64_t objects_total; /* this rank's objects in this pass */
	uint64_t objects_done;
	uint64_t records; /* admitted (sealed) records */
	uint64_t bytes;	  /* admitted (sealed) bytes */
	uint64_t fetched; /* body bytes received */
	uint64_t elapsed_ms;
	bool full; /* the budget had no more room */
};

typedef void (*smp_progress_cb)(const struct smp_progress *p, const struct smp_stats *st,
				void *ctx);

struct smp_sampler_opts {
	const struct cmn_config *cfg; /* borrowed for the sampler's life */
	struct cfs_store *store;      /* borrowed; outlives the sampler */
	uint64_t seed;		      /* object order and shuffle; same seed, same order */
	bool stop_when_full;	      /* end the pass when the budget has no room */
	uint64_t
	    room_wait_ms; /* !stop_when_full: one wait for room (0: 60 s); re-waits until stopped */
	const char *credentials_file; /* NULL: the AWS default (tests point it elsewhere) */
	smp_progress_cb progress;     /* may be NULL; called about twice a second */
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
 * One pass in `epoch` as described above.  Returns 0 when the pass ended
 * (all objects read, the budget full with stop_when_full, or stopped), or
 * -errno with a message for failures that stop sampling: the listing failed,
 * a local write failed (-ENOSPC, -EIO).  Failures of single objects (404,
 * retries exhausted) are counted in stats and logged, and do not stop it.
 */
int smp_sampler_run(struct smp_sampler *s, uint32_t epoch, char *err, size_t errlen);

/* Makes a running smp_sampler_run() return soon.  Thread-safe. */
void smp_sampler_stop(struct smp_sampler *s);

/* The counters (live; read with SMP_STAT_GET). */
const struct smp_stats *smp_sampler_stats(const struct smp_sampler *s);

/* The last pass's summary. */
void smp_sampler_progress(const struct smp_sampler *s, struct smp_progress *p);

void smp_sampler_free(struct smp_sampler *s);

#endif
