/*
 * sampler_i.h - the sampler's state and the internals its files share:
 * sampler.c (lifecycle, the pass), plan.c (what to take), relist.c (the
 * listing), dispatch.c (handing transfers to the fetcher), reader.c (one
 * object's records), drain.c (records into shards under the budget),
 * seal.c (the sealer thread), progress.c (reports).
 *
 * Threads: everything runs on the thread calling smp_sampler_run(), except
 * the sealer thread (seal.c), which touches only the seal_* fields (under
 * seal_mu) and the atomic stats, and the pause/resume callers, which touch
 * only the ctl_* fields (under ctl_mu); `stop`, `idle` and `running` are
 * atomic.  Locks: seal_mu and ctl_mu are leaves, never held together and
 * never held while calling into cachefs.
 */
#ifndef RC_SAMPLER_SAMPLER_I_H
#define RC_SAMPLER_SAMPLER_I_H

#include "sampler/sampler.h"

#include <pthread.h>
#include <stdatomic.h>

#include "common/arena.h"
#include "common/plan.h"
#include "sampler/fetch.h"
#include "sampler/listing.h"
#include "sampler/records.h"
#include "sampler/shuffle.h"
#include "sampler/source.h"

#define SMP_RESERVE_CHUNK ((uint64_t)4 << 20) /* reserve ahead in steps of this */
/* Free bytes a disk that was full must have beyond a shard's first chunk before
   the samplers write again (sampler.c disk_has_room): the catalog's. */
#define SMP_CATALOG_ROOM ((uint64_t)4 << 20)
#define SMP_SEAL_QUEUE	 2 /* shards waiting for the sealer thread */
/*
 * Raw objects queued for one group commit, at most.  A queued object holds
 * its reservation, not a descriptor (cfs_raw_writer_place closed it).  The
 * larger the group, the more of its rows share index pages: with 256,
 * 10^5 raw objects of 2 KiB wrote enough WAL for the checkpoints' fsyncs
 * to keep the sealer waiting (docs/benchmarks.md, "Small objects").
 */
#define SMP_RAW_GROUP 2048

struct cfs_budget;
struct cfs_catalog;
struct cfs_shard_writer;
struct cmn_plan;

#define SMP_RUN_MAX_UNITS 64		      /* records of one object fetched in one GET */
#define SMP_RUN_MAX_BYTES ((uint64_t)1 << 20) /* ... and at most this many bytes */
#define SMP_SAVE_EVERY	  65536u	      /* marks between two saves of the plan */
/*
 * A listing that took at least SMP_RELIST_SLOW_MS is not repeated sooner
 * than SMP_RELIST_PACE times its own time after it ended, whatever
 * `relist` says: listing then takes at most a tenth of the sampler's time
 * (at 10^6 objects a listing takes 10-13 s, during which nothing is
 * fetched).  Faster listings follow `relist` exactly.
 */
#define SMP_RELIST_SLOW_MS 1000u
#define SMP_RELIST_PACE	   9u
#define SMP_FIRST_ROOM	   ((uint64_t)256 << 10) /* a mount's room before a unit's first byte */
/*
 * A mount asks for a TFRecord object in ranges of the room its transfer
 * holds (reader.c, obj_grant): a step of limit / (SMP_GRANT_SHARE *
 * connections) within [SMP_GRANT_FLOOR, SMP_GRANT_MAX], so that above the
 * floor the ranges of all transfers together hold at most 1/SMP_GRANT_SHARE
 * of the limit; less when the budget has less room, but no top-up of less
 * than SMP_RANGE_MIN unless that completes the step.
 */
#define SMP_GRANT_MAX	  ((uint64_t)8 << 20)
#define SMP_GRANT_FLOOR	  ((uint64_t)1 << 20)
#define SMP_GRANT_SHARE	  16u
#define SMP_RANGE_MIN	  ((uint64_t)64 << 10)
#define SMP_HEAL_FIRST_MS 500u	 /* the first back-off of a failure that heals */
#define SMP_HEAL_MAX_MS	  30000u /* ... doubling up to this */
/*
 * ingest's rounds (sampler.c, step_round): whole objects given up on
 * faults that may pass are tried again, resuming where they stopped, in up
 * to SMP_ROUNDS more rounds after the pass, the first SMP_ROUND_FIRST_MS
 * after the last transfer ended, each next one twice as long after.
 */
#define SMP_ROUNDS	   2u
#define SMP_ROUND_FIRST_MS 1000u

/* One entry of an index sidecar as kept for the plan (catalog blob). */
struct smp__idx {
	uint64_t off;  /* of the framed record in the object */
	uint32_t size; /* framed bytes */
	uint32_t pad;
};
_Static_assert(sizeof(struct smp__idx) == 16, "the catalog blob layout");

/*
 * Indexes of objects kept loaded (plan.c, index_of): at most this many
 * objects' and, beyond the one loaded last, this many bytes.  A job copies
 * the records of its run (smp__job.run), so nothing else holds them.
 */
#define SMP_IDX_CACHE_OBJECTS 8
#define SMP_IDX_CACHE_BYTES   ((uint64_t)4 << 20)

/* What an object read by records has beside its plan object (in s->pobj_mem). */
struct smp__pidx {
	struct smp__idx *idx; /* [units] while loaded (index_of's cache), else NULL; malloc'd */
	uint64_t rec_bytes;   /* the sum of its records' sizes */
	uint64_t res_bytes;   /* ... of those resident (smp__plan_refresh_resident,
				 smp__unit_complete) */
};

/* One object of the sampling plan (plan.c): its units, where its index is. */
struct smp__pobj { /* in s->pobj_mem (plan.c): one per listed object; its key
		     stays in the catalog (a job reads it: smp__job.key) */
	int64_t object_id;
	uint64_t size;	      /* bytes (listing) */
	uint64_t first;	      /* its units are [first, first + units) */
	struct smp__pidx *ix; /* read by records: one unit per record of its index (table
				 plan_index); NULL: read whole */
	uint32_t units;	      /* 1: read whole; else one unit per indexed record */
	bool live;	      /* in the latest listing of this rank */
};

/*
 * One request in flight and the units it carries: a whole object (one
 * unit), or a run of neighbouring records of one object (nunits units,
 * consecutive numbers, contiguous bytes).  Lives until the transfer is
 * over and no record of it is left in the shuffle buffer.
 */
struct smp__job {
	struct smp__job *prev, *next; /* s->jobs */
	struct smp__pobj *obj;
	char *key;	      /* obj's key, read from the catalog when the job is made; malloc'd */
	uint64_t unit;	      /* first unit */
	uint32_t nunits;      /* 1 for a whole object */
	struct smp__idx *run; /* [nunits] an indexed object's records of the run, from its
				 index; NULL for a whole object; malloc'd */
	uint64_t off, len;    /* byte range; len 0: the whole object */
	uint64_t bytes;	      /* budget bytes it needs */
	uint64_t reserve;     /* reserved in the budget, not yet handed to a writer */
	uint32_t refs;	      /* its records in the shuffle buffer */
	uint64_t written;     /* its records appended to shards */
	uint64_t done_mask;   /* runs: units completed (bit i: unit + i) */
	bool over;	      /* the transfer ended */
	bool ok;	      /* ... with every byte */
	bool cancelled;	      /* ... because the sampler stopped: units stay unsettled */
	bool lost;	      /* a record of it was lost (records_lost): the object counts in
				 failed_objects when the job ends (smp__job_maybe_end) */
	uint64_t nlost;	      /* runs: its records the readers counted in records_lost */
	uint64_t *skip;	      /* a partial object fetched again: offsets of its records
				 that are resident, ascending (never admitted twice) */
	size_t nskip;
	uint64_t good_end; /* a whole object: offset after its last record delivered */
	bool plain;	   /* ... and it is not compressed (so a new transfer may resume there) */
	uint64_t low;	   /* scratch of smp__plan_lows */
	bool exhausted;	   /* a whole object the transport gave up on faults that may pass
			      (SMP_XFER_EXHAUSTED): resumed, not lost (reader.c obj_done) */
	uint64_t pending;  /* ... its records of bad data at good_end, for the resume */
	uint32_t rounds;   /* ingest's rounds it was held for (plan.c, smp__job_hold) */
};

struct smp_sampler {
	const struct cmn_config *cfg;
	struct cfs_store *cstore;
	struct cfs_catalog *cat;
	struct cfs_catalog *keys; /* a read-only connection to cat's file: the objects'
				     keys (plan.c, job_key), read without waiting for a seal */
	bool keys_snap;		  /* a read snapshot of keys is open (plan.c, job_key) */
	struct smp_source *source;
	struct smp_fetch *fetch;
	struct smp_stats stats;
	uint64_t seed;
	bool stop_when_full;
	bool follow; /* go on pass after pass until stopped (the mount) */
	uint64_t room_wait_ms;
	smp_progress_cb progress;
	void *progress_ctx;
	_Atomic bool stop;

	/* control from other threads (pause / resume); ctl_mu protects these */
	pthread_mutex_t ctl_mu;
	pthread_cond_t ctl_cv;
	bool pause_req;	     /* protected by ctl_mu */
	bool paused;	     /* protected by ctl_mu: the run loop sealed and holds */
	bool resume_req;     /* protected by ctl_mu */
	uint32_t next_epoch; /* protected by ctl_mu */
	bool relabel;	     /* protected by ctl_mu: smp_sampler_set_epoch() was called ... */
	uint32_t set_epoch;  /* protected by ctl_mu: ... with this epoch */
	_Atomic uint64_t refresh_req; /* fresh counts asked for (smp_sampler_wanted_fresh) */
	uint64_t refresh_done;	      /* protected by ctl_mu: the last request served */
	uint64_t refresh_seen;	      /* the run loop's: the last request taken */
	_Atomic bool idle;	      /* nothing to fetch until something changes */
	_Atomic bool running;	      /* inside smp_sampler_run */

	/* listing state (relist.c) */
	int64_t source_id;
	bool listed;
	uint32_t listed_epoch;
	uint64_t listed_end_ms; /* cmn_mono_ms() when the last listing ended */
	uint64_t list_cost_ms;	/* what it took (relist_if_due paces relists by it) */
	bool list_failed;	/* the last smp__relist() failed in the source's listing itself */
	char list_validator[SMP_ETAG_MAX]; /* of the listing applied last (relist.c); "" when
					      the source gave none or none is applied */
	bool ever_listed;		   /* a listing succeeded in this sampler's life */

	/*
	 * Healing (sampler.c, heal()): a mount's run waits out a failure that
	 * goes away by itself - a full disk (ENOSPC, EDQUOT), a source that
	 * cannot be listed - instead of ending, and tries again after a
	 * back-off that doubles from SMP_HEAL_FIRST_MS to SMP_HEAL_MAX_MS.
	 */
	uint64_t heal_delay_ms; /* the back-off of the last wait; 0: none yet */
	uint64_t heal_admitted; /* stats.records_admitted when that wait began */
	char heal_why[640];	/* protected by ctl_mu: the cause waited out, "" when none */
	uint64_t heal_retry_ms; /* protected by ctl_mu: cmn_mono_ms() of the next try */

	/* the sampling plan (plan.c) */
	struct cmn_plan *plan;
	int64_t plan_id;
	int unit_kind;		   /* CFS_PLAN_OBJECTS or CFS_PLAN_RECORDS */
	struct smp__pobj **pobj;   /* [npobj], ordered by first */
	struct cmn_arena pobj_mem; /* the plan's objects (plan.c), until unload */
	size_t npobj, pobj_cap;
	/* the objects whose index is loaded, least recently used first (plan.c, index_of) */
	struct smp__pobj *idx_cache[SMP_IDX_CACHE_OBJECTS];
	size_t nidx_cache;
	uint64_t idx_cache_bytes;
	_Atomic uint64_t wanted;     /* bytes of units neither resident nor dropped (plan.c);
					UINT64_MAX until the plan is loaded */
	struct cfs_partial *partial; /* partial objects (plan.c, catalog.h), by id */
	size_t npartial;
	int64_t *cut; /* cut objects (catalog.h, plan_cut), by id */
	size_t ncut;
	uint64_t failed_at; /* (pass << 32 | epoch) + 1 that the bits of failed are of */
	uint64_t *failed;   /* bit i: s->pobj[i] counted in failed_objects then; each
			       object counts once per pass and epoch (smp__count_failed) */
	size_t failed_words;
	uint64_t *pend; /* completed units waiting for a file to commit with */
	size_t npend, pend_cap;
	uint64_t marks_since_save;
	bool rolled;		   /* the plan rolled over and nothing was fetched since */
	uint32_t rolled_epoch;	   /* the epoch of that roll */
	uint64_t admitted_at_roll; /* stats.records_admitted at the last roll */
	bool has_rolled;	   /* this sampler rolled the plan at least once */
	struct smp__job *jobs;	   /* in flight */
	struct smp__job *waiting;  /* built, waiting for room in the budget */
	/*
	 * ingest's rounds (plan.c): exhausted whole objects held, their units
	 * in flight, for the next round (again), or handed out again by the
	 * plan in this one (ready); lists through ->next.
	 */
	struct smp__job *again, *ready;
	uint32_t round;	   /* rounds begun after the pass (<= SMP_ROUNDS) */
	unsigned inflight; /* jobs handed to the fetcher */

	/* the run */
	uint32_t epoch;
	struct cfs_shard_writer *w; /* shard being filled, or NULL */
	uint64_t shard_cap;	    /* target size of the shard being filled (drain.c) */
	bool first_shard;  /* shard_cap is opts.first_shard: the first shard is not sealed */
	bool first_opened; /* ... and it was opened */
	struct smp_shuffle *shuf;
	bool full;	    /* budget exhausted (stop_when_full) */
	int fatal;	    /* a local write failure: ends the run (a mount waits out
			       -ENOSPC and -EDQUOT: heal() in sampler.c) */
	bool need_room;	    /* a record waits for budget; transfers are held */
	uint64_t room_need; /* its bytes */
	bool may_block;	    /* smp__write_record runs outside transfer callbacks */
	char fatal_msg[700];
	struct smp_progress prog;
	uint64_t t0, last_progress;
	uint64_t records0, bytes0; /* stats at the start of the run */

	/* the sealer thread (seal.c) */
	pthread_t sealer;
	bool sealer_started;
	pthread_mutex_t seal_mu;
	pthread_cond_t seal_cv;
	struct cfs_shard_writer *seal_q[SMP_SEAL_QUEUE]; /* protected by seal_mu */
	int seal_n;					 /* protected by seal_mu */
	struct cfs_shard_writer *raw_q[SMP_RAW_GROUP];	 /* protected by seal_mu */
	int raw_n;					 /* protected by seal_mu */
	bool seal_busy, seal_quit;			 /* protected by seal_mu */
	int seal_err;					 /* protected by seal_mu */
	char seal_msg[600];				 /* protected by seal_mu */
};

/* sampler.c: records the first local failure (ends the pass); returns rc. */
int smp__fail_local(struct smp_sampler *s, int rc, const char *what);

/* relist.c: lists the source and brings the plan's objects up to date */
int smp__relist(struct smp_sampler *s, uint32_t epoch, char *err, size_t errlen);

/* plan.c: the sampling plan of this source and rank */
int smp__plan_load(struct smp_sampler *s, char *err, size_t errlen);
void smp__plan_unload(struct smp_sampler *s);
/*
 * Appends the objects of a listing that the plan does not know (ids[i],
 * keys and sizes from l, has_idx[i]: a sidecar is listed) and drops the
 * plan's objects not in it.  Fetches the sidecars of new objects
 * (strategy=records).  Returns 0 or -errno with a message.
 */
int smp__plan_merge(struct smp_sampler *s, const struct smp_listing *l, const int64_t *ids,
		    const bool *has_idx, char *err, size_t errlen);
/* Re-reads which units are resident from the catalog.  0 or -errno. */
int smp__plan_refresh_resident(struct smp_sampler *s);
/* The plan object holding unit u. */
struct smp__pobj *smp__plan_obj(const struct smp_sampler *s, uint64_t u);
/*
 * The next job: the plan's next unit (and, with strategy=records, the run of
 * its free neighbours).  Returns CMN_PLAN_UNIT and *out (malloc'd, not yet
 * in s->jobs), or CMN_PLAN_WAIT / CMN_PLAN_END, or -errno (-ENOMEM, or the
 * catalog's error recording a whole object's transfer).
 */
int smp__plan_next_job(struct smp_sampler *s, struct smp__job **out);
/*
 * Ends the read snapshot the jobs' keys were read in since the last call
 * (job_key opens one at the first key): the caller of smp__plan_next_job
 * calls it before it waits for anything, so that no snapshot is held
 * while the thread sleeps (it would hold the catalog's WAL).
 */
void smp__plan_keys_end(struct smp_sampler *s);
/*
 * Where room for job j's bytes from object offset `from` may end, given
 * room up to `upto`: the end of the last of its records that fits whole, so
 * that a ranged transfer never stops inside a record (a partial record would
 * be bytes downloaded and not admitted while its transfer waits for room).
 * When not even the record starting at `from` fits, its end (more than
 * asked); a job without a record index (a whole object) gets `upto`.
 */
uint64_t smp__job_room_end(const struct smp__job *j, uint64_t from, uint64_t upto);
/*
 * The lows of the whole objects in flight (catalog.h, plan_partial): the
 * offset of the first of their records still in the shuffle buffer, else
 * their good_end.  Every record below is in a file handed to the sealer,
 * so it is committed once the last file handed is.  *units and *lows are
 * malloc'd [count]; returns the count, or 0 (none, or out of memory: both
 * NULL).
 */
size_t smp__plan_lows(struct smp_sampler *s, uint64_t **units, uint64_t **lows);
/*
 * Writes them now: where every file handed to the sealer is committed
 * (after a checkpoint).  0 or -errno.
 */
int smp__plan_partial_low(struct smp_sampler *s);
/*
 * Frees job j (not linked in s->jobs any more, or never was), giving back
 * the room it holds reserved.  NULL is ignored.
 */
void smp__job_free(struct smp_sampler *s, struct smp__job *j);
/* Whether the record of j at object_offset is resident already (j->skip). */
bool smp__job_skips(const struct smp__job *j, uint64_t object_offset);
/* Unit u, of `bytes` in the source, is in a file (or failed: ok false); see plan.c. */
void smp__unit_complete(struct smp_sampler *s, uint64_t u, uint64_t bytes, bool ok);
/*
 * Object o was given up, or lost a record: counted in failed_objects once
 * per pass and epoch, however many of its runs failed.  Returns whether it
 * was counted now (false: counted already in this pass and epoch).
 */
bool smp__count_failed(struct smp_sampler *s, struct smp__pobj *o);
/*
 * ingest's rounds: the number of objects held for a round (s->again).
 * _begin: they become the round's (s->ready), handed out by
 * smp__plan_next_job first.  _settle: every object held, and a held one
 * waiting for room, is given up for this run (failed_objects,
 * objects_partial), its unit settled; call after smp__plan_partial_low so
 * that a new run resumes them where they stopped.
 */
size_t smp__plan_held(const struct smp_sampler *s);
void smp__plan_round_begin(struct smp_sampler *s);
void smp__plan_settle_held(struct smp_sampler *s);
/* Ends job j if its transfer is over and none of its records is buffered. */
void smp__job_maybe_end(struct smp_sampler *s, struct smp__job *j);
/*
 * Seals the current shard, waits for the sealer, commits waiting marks and
 * saves the plan's state (a point where nothing completed is uncommitted).
 * Returns 0 or -errno (recorded with smp__fail_local).
 */
int smp__plan_checkpoint(struct smp_sampler *s);
/* Starts the next pass (after a checkpoint).  0 or -errno. */
int smp__plan_roll(struct smp_sampler *s);

/* dispatch.c: the run loop's transfers */
int smp__dispatch_job(struct smp_sampler *s, struct smp__job *j);

/* reader.c: one object's reader, handed to the fetcher with smp__reader_ops */
struct smp__reader;
extern const struct smp_xfer_ops smp__reader_ops;
/*
 * A reader of job j (whose room is reserved: a raw object's writer takes
 * that reservation).  Returns 0 and *out, or -errno (a local failure is
 * recorded with smp__fail_local).
 */
int smp__reader_new(struct smp_sampler *s, struct smp__job *j, struct smp__reader **out);
/* Frees a reader the fetcher never took. */
void smp__reader_free(struct smp__reader *o);

/* drain.c */
int smp__write_record(const struct smp_rec *r, void *ctx);
/* Bytes the budget would grant now (under both limit and admit). */
uint64_t smp__budget_avail(struct cfs_budget *b);
int smp__get_room(struct smp_sampler *s, struct cfs_shard_writer *w, uint64_t need, uint64_t ahead,
		  bool may_block);
int smp__wait_for_room(struct smp_sampler *s);
void smp__drain(struct smp_sampler *s);

/* seal.c */
int smp__sealer_start(struct smp_sampler *s, char *err, size_t errlen);
void smp__sealer_stop(struct smp_sampler *s);
int smp__open_shard(struct smp_sampler *s);
int smp__seal_current(struct smp_sampler *s);
int smp__seal_flush(struct smp_sampler *s);
int smp__seal_raw(struct smp_sampler *s, struct cfs_shard_writer *w);
/*
 * After a failure the run waits out (heal): waits until the sealer is idle
 * and forgets its error, so that shards seal again.  Writers queued after
 * the failing one were aborted, not sealed (as after a crash, nothing
 * commits after a file that did not).
 */
void smp__seal_reset(struct smp_sampler *s);

/* sampler.c: a pause or an epoch change is asked for (any thread may ask). */
bool smp__pause_wanted(struct smp_sampler *s);

/* progress.c */
void smp__progress_begin(struct smp_sampler *s);
void smp__report(struct smp_sampler *s, bool force);

#endif
