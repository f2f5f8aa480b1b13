/*
 * sampler_i.h - the sampler's state and the internals its files share:
 * sampler.c (lifecycle, the pass), plan.c (what to take), relist.c (the
 * listing), dispatch.c (handing transfers to the fetcher), reader.c (one
 * object's records), drain.c (records into shards under the budget),
 * seal.c (the sealer thread), progress.c (reports).
 *
 * Threads: everything runs on the thread calling smp_sampler_run(), except
 * the sealer thread (seal.c), which touches only the seal_* fields (under
 * seal_mu) and the atomic stats; `stop` is atomic and may be set from any
 * thread.  Lock order: seal_mu is the only lock and is never held while
 * calling into cachefs.
 */
#ifndef RC_SAMPLER_SAMPLER_I_H
#define RC_SAMPLER_SAMPLER_I_H

#include "sampler/sampler.h"

#include <pthread.h>
#include <stdatomic.h>

#include "sampler/fetch.h"
#include "sampler/records.h"
#include "sampler/shuffle.h"
#include "sampler/source.h"

#define SMP_RESERVE_CHUNK ((uint64_t)4 << 20) /* reserve ahead in steps of this */
#define SMP_SEAL_QUEUE	  2		      /* shards waiting for the sealer thread */

struct cfs_catalog;
struct cfs_shard_writer;

struct smp_sampler {
	const struct cmn_config *cfg;
	struct cfs_store *cstore;
	struct cfs_catalog *cat;
	struct smp_source *source;
	struct smp_fetch *fetch;
	struct smp_stats stats;
	uint64_t seed;
	bool stop_when_full;
	uint64_t room_wait_ms;
	smp_progress_cb progress;
	void *progress_ctx;
	_Atomic bool stop;

	/* listing state, kept across passes (relist.c) */
	struct smp_listing listing;
	int64_t *object_ids; /* [listing.n] */
	bool *has_idx;	     /* [listing.n]: an `<key>.idx` sidecar was listed */
	int64_t source_id;
	bool listed;
	uint32_t listed_epoch;

	/* one pass */
	uint32_t epoch;
	struct cfs_shard_writer *w; /* shard being filled, or NULL */
	struct smp_shuffle *shuf;
	bool full;	    /* budget exhausted (stop_when_full) */
	int fatal;	    /* a local write failure: ends the pass */
	bool need_room;	    /* a record waits for budget; transfers are held */
	uint64_t room_need; /* its bytes */
	bool may_block;	    /* smp__write_record runs outside transfer callbacks */
	char fatal_msg[700];
	unsigned inflight; /* objects being read */
	struct smp_progress prog;
	uint64_t t0, last_progress;
	uint64_t records0, bytes0; /* stats at the start of the pass */

	/* the sealer thread (seal.c) */
	pthread_t sealer;
	bool sealer_started;
	pthread_mutex_t seal_mu;
	pthread_cond_t seal_cv;
	struct cfs_shard_writer *seal_q[SMP_SEAL_QUEUE]; /* protected by seal_mu */
	int seal_n;					 /* protected by seal_mu */
	bool seal_busy, seal_quit;			 /* protected by seal_mu */
	int seal_err;					 /* protected by seal_mu */
	char seal_msg[600];				 /* protected by seal_mu */
};

/* One request of a pass: a whole object, or a range of drawn records. */
struct smp__work {
	uint32_t obj;	   /* index into s->listing */
	uint64_t off, len; /* len 0: the whole object */
	const uint64_t *wanted;
	uint32_t nwanted;
};

/* The work of one pass (plan.c); items point into plan. */
struct smp__pass {
	struct smp__work *items;
	size_t n;
	struct smp_plan plan;
};

/* splitmix64: the pass's seeded random stream. */
static inline uint64_t smp__splitmix(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* sampler.c: records the first local failure (ends the pass); returns rc. */
int smp__fail_local(struct smp_sampler *s, int rc, const char *what);

/* relist.c */
int smp__relist(struct smp_sampler *s, uint32_t epoch, char *err, size_t errlen);

/* plan.c */
int smp__plan_pass(struct smp_sampler *s, uint64_t *rng, struct smp__pass *out, char *err,
		   size_t errlen);
void smp__pass_free(struct smp__pass *p);

/* dispatch.c */
void smp__dispatch_pass(struct smp_sampler *s, const struct smp__pass *p);

/* reader.c: one object's reader, handed to the fetcher with smp__reader_ops */
struct smp__reader;
extern const struct smp_xfer_ops smp__reader_ops;
/*
 * A reader of work item w, its room reserved (format=raw).  Returns 0 and
 * *out, 0 and *out NULL (the object can never fit: skipped, logged), or
 * -errno (a local failure is recorded with smp__fail_local; -ENOSPC: the
 * budget is full with stop_when_full).
 */
int smp__reader_new(struct smp_sampler *s, const struct smp__work *w, struct smp__reader **out);
/* Frees a reader the fetcher never took. */
void smp__reader_free(struct smp__reader *o);

/* drain.c */
int smp__write_record(const struct smp_rec *r, void *ctx);
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

/* progress.c */
void smp__progress_begin(struct smp_sampler *s);
void smp__report(struct smp_sampler *s, bool force);

#endif
