/*
 * ingest.c - the `objects` strategy: this rank's objects in a seeded random
 * order, `connections` at a time, records CRC-checked as they stream in,
 * shuffled, packed into shards under the byte budget.
 *
 * Owns the sampler (struct smp_sampler), the per-object readers and the
 * shard being written.  Does not speak HTTP (fetch.c, source.c) and does not
 * touch SQL or the disk directly (cachefs/shard_writer.h, catalog.h).
 *
 * Records and retries: an uncompressed object is read as one TFRecord stream
 * through the push decoder.  Each delivered record advances `good_end`, the
 * object offset after the last good record.  Bad data - a payload CRC
 * mismatch, lost framing, a body ending inside a record - makes the reader
 * answer -EAGAIN; fetch.c retries from good_end with a Range request, so no
 * record is delivered twice and a transient corruption costs no record.  On
 * the last attempt the reader turns lenient: a record whose CRC fails is
 * counted and skipped (DESIGN 5) and the rest of the object is kept.  GZIP
 * objects cannot be resumed mid-stream: they restart at 0 and skip the
 * records already delivered.
 *
 * Invariants: DESIGN 4 (every byte reserved before it is written: records
 * go through cfs_shard_writer_reserve/try_reserve), DESIGN 5 (only records
 * whose CRC passed reach the shard writer), DESIGN 7 (keys go to the
 * catalog and the display-name sanitizer, never into a path).
 * Threads: all of this runs on the thread calling smp_sampler_run(), except
 * sealing (a sealer thread per sampler: seal_mu guards its queue and error;
 * stats are atomics); `stop` is the only field touched from elsewhere
 * (atomic).  Lock order: seal_mu is never held while calling into cachefs.
 */
#include "sampler/sampler.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cachefs/catalog.h"
#include "cachefs/shard_writer.h"
#include "cachefs/store.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/tfrecord.h"
#include "sampler/fetch.h"
#include "sampler/records.h"
#include "sampler/shuffle.h"
#include "sampler/source.h"

#define RESERVE_CHUNK ((uint64_t)4 << 20) /* reserve ahead in steps of this */
#define SEAL_QUEUE    2			  /* shards waiting for the sealer thread */

struct obj_reader;

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

	/* listing state, kept across passes */
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
	bool may_block;	    /* write_record runs outside transfer callbacks */
	char fatal_msg[700];
	unsigned inflight; /* objects being read */
	struct smp_progress prog;
	uint64_t t0, last_progress;
	uint64_t records0, bytes0; /* stats at the start of the pass */

	/* the sealer thread; seal_mu protects seal_q, seal_n, seal_busy, seal_quit, seal_err,
	 * seal_msg */
	pthread_t sealer;
	bool sealer_started;
	pthread_mutex_t seal_mu;
	pthread_cond_t seal_cv;
	struct cfs_shard_writer *seal_q[SEAL_QUEUE];
	int seal_n;
	bool seal_busy, seal_quit;
	int seal_err;
	char seal_msg[600];
};

struct obj_reader {
	struct smp_sampler *s;
	const struct smp_object *obj;
	int64_t object_id;
	struct cmn_tfr_push *push;
	uint64_t base;		  /* object offset where the push stream starts */
	uint64_t good_end;	  /* object offset after the last delivered record */
	uint64_t delivered;	  /* records delivered from this object */
	uint64_t attempt_records; /* records seen in this attempt (gzip skip) */
	uint64_t skip;		  /* gzip restart: records to skip */
	uint64_t bad_seen;	  /* decoder's bad_records already accounted */
	bool lenient;		  /* last attempt: skip bad records instead of retrying */
	bool gzip;
	struct cfs_shard_writer *raw; /* format=raw */
	uint64_t raw_bytes;
	const uint64_t *wanted; /* strategy=records: offsets to admit (sorted), else NULL */
	uint32_t nwanted, wi;
};

/* One request of a pass: a whole object, or a range of drawn records. */
struct work {
	uint32_t obj;
	uint64_t off, len; /* len 0: the whole object */
	const uint64_t *wanted;
	uint32_t nwanted;
};

/* ---- shard side ----------------------------------------------------------- */

static int fail_local(struct smp_sampler *s, int rc, const char *what)
{
	if (!s->fatal) {
		s->fatal = rc;
		snprintf(s->fatal_msg, sizeof(s->fatal_msg), "%s: %s", what, strerror(-rc));
	}
	return rc;
}

/*
 * Sealing runs on a sealer thread: the fsyncs of invariant 2 take as long as
 * the disk needs, and meanwhile the fetch loop keeps the connections busy.
 * The hand-off queue is bounded (SEAL_QUEUE writers; their reservations stay
 * counted in the budget until sealed, so invariant 4 holds throughout).
 */
static void *sealer_main(void *arg)
{
	struct smp_sampler *s = arg;
	pthread_mutex_lock(&s->seal_mu);
	for (;;) {
		while (s->seal_n == 0 && !s->seal_quit)
			pthread_cond_wait(&s->seal_cv, &s->seal_mu);
		if (s->seal_n == 0 && s->seal_quit)
			break;
		struct cfs_shard_writer *w = s->seal_q[0];
		memmove(s->seal_q, s->seal_q + 1, (size_t)(s->seal_n - 1) * sizeof(s->seal_q[0]));
		s->seal_n--;
		s->seal_busy = true;
		pthread_cond_broadcast(&s->seal_cv);
		pthread_mutex_unlock(&s->seal_mu);

		char err[512];
		uint64_t bytes = cfs_shard_writer_bytes(w), recs = cfs_shard_writer_records(w);
		int rc = cfs_shard_writer_seal(w, NULL, err, sizeof(err));
		if (rc == 0) {
			SMP_STAT_ADD(&s->stats, records_admitted, recs);
			SMP_STAT_ADD(&s->stats, bytes_admitted, bytes);
		} else if (rc != -ENODATA) {
			cmn_log(CMN_LOG_ERROR, "sealing a shard: %s", err);
		}
		pthread_mutex_lock(&s->seal_mu);
		if (rc && rc != -ENODATA && !s->seal_err) {
			s->seal_err = rc;
			snprintf(s->seal_msg, sizeof(s->seal_msg), "sealing a shard: %s", err);
		}
		s->seal_busy = false;
		pthread_cond_broadcast(&s->seal_cv);
	}
	pthread_mutex_unlock(&s->seal_mu);
	return NULL;
}

/* Hands the current shard to the sealer (waits while its queue is full). */
static int seal_current(struct smp_sampler *s)
{
	if (!s->w)
		return 0;
	struct cfs_shard_writer *w = s->w;
	s->w = NULL;
	pthread_mutex_lock(&s->seal_mu);
	while (s->seal_n == SEAL_QUEUE && !s->seal_err)
		pthread_cond_wait(&s->seal_cv,
				  &s->seal_mu); /* bounded: the sealer always progresses */
	int err = s->seal_err;
	if (!err) {
		s->seal_q[s->seal_n++] = w;
		pthread_cond_broadcast(&s->seal_cv);
	}
	pthread_mutex_unlock(&s->seal_mu);
	if (err) {
		cfs_shard_writer_abort(w);
		return fail_local(s, err, "sealing a shard");
	}
	return 0;
}

/* Waits until every handed-off shard is sealed; returns the first error. */
static int seal_flush(struct smp_sampler *s)
{
	pthread_mutex_lock(&s->seal_mu);
	while (s->seal_n > 0 || s->seal_busy)
		pthread_cond_wait(&s->seal_cv, &s->seal_mu);
	int err = s->seal_err;
	if (err && !s->fatal) {
		s->fatal = err;
		snprintf(s->fatal_msg, sizeof(s->fatal_msg), "%s", s->seal_msg);
	}
	pthread_mutex_unlock(&s->seal_mu);
	return err;
}

/* Opens the sampler's shard writer if it has none. */
static int open_shard(struct smp_sampler *s)
{
	char err[512];
	if (s->w)
		return 0;
	int rc = cfs_shard_writer_open(&s->w, s->cstore, s->epoch, err, sizeof(err));
	if (rc) {
		cmn_log(CMN_LOG_ERROR, "%s", err);
		return fail_local(s, rc, "opening a shard");
	}
	return 0;
}

/*
 * Gets `need` bytes of room in writer w: a chunk ahead when possible, else
 * exactly what is needed; waits for room unless stop_when_full.  Before it
 * sleeps it seals the sampler's partial shard, so w may then be replaced
 * by a new writer: callers go on with s->w.  Returns 0, -ENOSPC (full,
 * stop_when_full), -EFBIG (can never fit), -ECANCELED.
 */
static int get_room(struct smp_sampler *s, struct cfs_shard_writer *w, uint64_t need,
		    uint64_t ahead, bool may_block)
{
	uint64_t room = cfs_shard_writer_room(w);
	if (room >= need)
		return 0;
	if (ahead > need && cfs_shard_writer_try_reserve(w, ahead - room) == 0)
		return 0;
	int rc = cfs_shard_writer_try_reserve(w, need - room);
	if (rc != -EAGAIN)
		return rc;
	if (s->stop_when_full) {
		s->full = true;
		return -ENOSPC;
	}
	if (!may_block && smp_source_scheme(s->source) != SMP_SCHEME_FILE) {
		/*
		 * Inside a transfer callback: do not sleep here (every transfer
		 * would stall).  Hold the transfers (they pause, keeping their
		 * data) and let the fetch loop wait for room (wait_for_room).
		 * file:// transfers cannot pause (curl reads the file in one go)
		 * and stall no server: they wait right here.
		 */
		s->need_room = true;
		s->room_need = need;
		smp_fetch_hold(s->fetch, true);
		return -EWOULDBLOCK;
	}
	/*
	 * About to sleep for room, perhaps until the next epoch boundary: seal
	 * what the current shard holds first, so that its records are in the
	 * next snapshot instead of waiting, unsealed, with the sampler.
	 */
	if (w == s->w && cfs_shard_writer_records(w) > 0) {
		rc = seal_current(s);
		if (rc == 0)
			rc = open_shard(s);
		if (rc)
			return rc;
		w = s->w;
		room = cfs_shard_writer_room(w);
		if (room >= need)
			return 0;
	}
	SMP_STAT_ADD(&s->stats, budget_waits, 1);
	/* sleeps on the budget's condition variable; re-waits until stopped */
	while (!atomic_load(&s->stop)) {
		rc = cfs_shard_writer_reserve(w, need - room, s->room_wait_ms);
		if (rc != -ETIMEDOUT)
			return rc;
	}
	return -ECANCELED;
}

/* Writes one shuffled record into the current shard (opening/sealing shards). */
static int write_record(const struct smp_rec *r, void *ctx)
{
	struct smp_sampler *s = ctx;
	uint64_t need = cfs_shard_writer_record_bytes(r->len);
	int rc;

	if (s->full || s->fatal)
		return -ENOSPC;
	if (s->w && cfs_shard_writer_records(s->w) > 0 &&
	    cfs_shard_writer_bytes(s->w) + need > s->cfg->shard_size) {
		rc = seal_current(s);
		if (rc)
			return rc;
	}
	rc = open_shard(s);
	if (rc)
		return rc;
	uint64_t left = s->cfg->shard_size > cfs_shard_writer_bytes(s->w)
			    ? s->cfg->shard_size - cfs_shard_writer_bytes(s->w)
			    : 0;
	uint64_t ahead = left < RESERVE_CHUNK ? left : RESERVE_CHUNK;
	rc = get_room(s, s->w, need, ahead, s->may_block);
	if (rc == -EFBIG) {
		cmn_log(CMN_LOG_WARN,
			"a record of %zu bytes can never fit the cache limit: skipped", r->len);
		return 0;
	}
	if (rc)
		return rc;
	rc = cfs_shard_writer_append(s->w, r->data, r->len, r->crc, r->object_id, r->object_offset);
	if (rc)
		return fail_local(s, rc, "writing a shard");
	return 0;
}

/*
 * Waits (on the budget's condition, in room_wait_ms slices so a stop is
 * seen) for the room a held record needs, then lets the shuffle buffer shed
 * what it took in meanwhile and releases the transfers.  Runs in the fetch
 * loop, never inside a callback.  Returns 0, -ECANCELED (stopped) or a
 * budget error.
 */
static int wait_for_room(struct smp_sampler *s)
{
	int rc = 0;
	if (s->w) {
		s->may_block = true;
		rc = get_room(s, s->w, s->room_need, 0, true);
		if (rc == -EFBIG)
			rc = 0; /* the limit shrank below the record: write_record skips it */
		if (rc == 0)
			rc = smp_shuffle_shed(s->shuf, write_record, s);
		s->may_block = false;
	}
	if (rc == 0) {
		s->need_room = false;
		smp_fetch_hold(s->fetch, false);
	}
	return rc;
}

/* ---- object readers (fetch callbacks) -------------------------------------- */

static int on_record(const struct cmn_tfr_record *rec, void *ctx)
{
	struct obj_reader *o = ctx;
	struct smp_sampler *s = o->s;
	uint64_t bad = cmn_tfr_push_bad_records(o->push);
	if (bad > o->bad_seen) {
		SMP_STAT_ADD(&s->stats, bad_records, bad - o->bad_seen);
		o->bad_seen = bad;
		if (!o->lenient)
			return -EAGAIN; /* retry from good_end: this record is re-read */
	}
	if (o->gzip && o->attempt_records++ < o->skip)
		return 0;
	if (o->wanted) { /* a coalesced range: admit only the drawn records */
		uint64_t at = o->base + rec->offset;
		while (o->wi < o->nwanted && o->wanted[o->wi] < at)
			o->wi++;
		if (o->wi >= o->nwanted || o->wanted[o->wi] != at) {
			o->good_end = at + CMN_TFR_OVERHEAD + rec->len;
			return 0;
		}
		o->wi++;
	}
	struct smp_rec r = {
	    .data = rec->data,
	    .len = rec->len,
	    .crc = rec->crc,
	    .object_id = o->object_id,
	    .object_offset = o->base + rec->offset,
	};
	/*
	 * A record cut by chunk boundaries (with libcurl every record above
	 * 16 KiB) was gathered by the decoder: the shuffle buffer takes that
	 * buffer over, with a spare from its pool in exchange, instead of
	 * copying the record once more.
	 */
	size_t spare_cap, bcap;
	void *spare = smp_shuffle_spare(s->shuf, CMN_TFR_OVERHEAD + rec->len, &spare_cap), *blk;
	int rc;
	if (cmn_tfr_push_take(o->push, spare, spare_cap, &blk, &bcap) == 0) {
		rc = smp_shuffle_add_block(s->shuf, &r, blk, bcap, write_record, s);
	} else {
		smp_shuffle_unspare(s->shuf, spare, spare_cap); /* the record is in the chunk */
		rc = smp_shuffle_add(s->shuf, &r, write_record, s);
	}
	if (rc)
		return rc == -EAGAIN ? -EIO : rc;
	o->delivered++;
	if (!o->gzip)
		o->good_end = o->base + rec->offset + CMN_TFR_OVERHEAD + rec->len;
	return 0;
}

static int obj_data(void *ctx, const void *p, size_t n)
{
	struct obj_reader *o = ctx;
	struct smp_sampler *s = o->s;
	if (atomic_load(&s->stop) || s->full || s->fatal)
		return -ECANCELED;
	if (o->raw) {
		int rc = cfs_raw_writer_write(o->raw, p, n);
		if (rc)
			return rc == -ENOBUFS ? -EAGAIN : fail_local(s, rc, "writing a raw object");
		o->raw_bytes += n;
		return 0;
	}
	int rc = cmn_tfr_push_feed(o->push, p, n);
	if (rc == 0) {
		uint64_t bad = cmn_tfr_push_bad_records(o->push);
		if (bad > o->bad_seen) {
			SMP_STAT_ADD(&s->stats, bad_records, bad - o->bad_seen);
			o->bad_seen = bad;
			if (!o->lenient)
				return -EAGAIN;
		}
		return 0;
	}
	if (rc == -EAGAIN || rc == -EILSEQ || rc == -EMSGSIZE || rc == -EPROTO || rc == -EIO) {
		if (rc != -EAGAIN)
			cmn_log(CMN_LOG_INFO, "%s: %s", o->obj->key, cmn_tfr_push_error(o->push));
		if (rc == -EILSEQ || rc == -EIO)
			SMP_STAT_ADD(&s->stats, bad_records, 1);
		return o->lenient && rc != -EAGAIN ? -EBADMSG : -EAGAIN;
	}
	return rc; /* -ENOSPC (full), local write errors, -ENOMEM */
}

static int obj_end(void *ctx)
{
	struct obj_reader *o = ctx;
	if (o->raw)
		return 0;
	int rc = cmn_tfr_push_finish(o->push);
	if (rc == -EPROTO)
		return o->lenient ? -EPROTO : -EAGAIN;
	if (rc == 0) {
		uint64_t bad = cmn_tfr_push_bad_records(o->push);
		if (bad > o->bad_seen) {
			SMP_STAT_ADD(&o->s->stats, bad_records, bad - o->bad_seen);
			o->bad_seen = bad;
			if (!o->lenient)
				return -EAGAIN;
		}
	}
	return rc;
}

static int raw_open(struct obj_reader *o, char *err, size_t errlen);

static uint64_t obj_restart(void *ctx, bool final)
{
	struct obj_reader *o = ctx;
	o->lenient = final;
	if (o->raw) {
		char err[256];
		cfs_shard_writer_abort(o->raw);
		o->raw = NULL;
		o->raw_bytes = 0;
		if (raw_open(o, err, sizeof(err)) == 0 &&
		    cfs_shard_writer_try_reserve(o->raw, o->obj->size) == 0)
			return 0;
		cmn_log(CMN_LOG_WARN, "%s: cannot restart the raw object: %s", o->obj->key, err);
		return 0; /* obj_data fails on the missing writer */
	}
	cmn_tfr_push_reset(o->push);
	o->bad_seen = 0;
	if (o->gzip) {
		o->skip = o->delivered;
		o->attempt_records = 0;
		o->base = 0;
		return 0;
	}
	o->base = o->good_end;
	return o->good_end;
}

static void obj_done(void *ctx, int rc, const char *msg)
{
	struct obj_reader *o = ctx;
	struct smp_sampler *s = o->s;
	s->inflight--;
	if (o->raw) {
		if (rc == 0) {
			char err[512];
			uint64_t bytes = o->raw_bytes;
			int src = cfs_shard_writer_seal(o->raw, NULL, err, sizeof(err));
			o->raw = NULL;
			if (src) {
				cmn_log(CMN_LOG_ERROR, "%s: sealing: %s", o->obj->key, err);
				if (src != -EEXIST && src != -EINVAL)
					fail_local(s, src, "sealing a raw object");
				rc = src;
			} else {
				SMP_STAT_ADD(&s->stats, records_admitted, 1);
				SMP_STAT_ADD(&s->stats, bytes_admitted, bytes);
			}
		} else {
			cfs_shard_writer_abort(o->raw);
			o->raw = NULL;
		}
	}
	if (rc == 0) {
		s->prog.objects_done++;
		if (!o->wanted) { /* a whole object, not a range of drawn records */
			SMP_STAT_ADD(&s->stats, objects_done, 1);
			cfs_catalog_object_fetched(s->cat, o->object_id, s->epoch);
		}
	} else if (rc != -ECANCELED && rc != -ENOSPC && !s->fatal) {
		cmn_log(CMN_LOG_WARN, "%s", msg);
	}
	cmn_tfr_push_free(o->push);
	free(o);
}

static const struct smp_xfer_ops obj_ops = {
    .data = obj_data,
    .end = obj_end,
    .restart = obj_restart,
    .done = obj_done,
};

static int raw_open(struct obj_reader *o, char *err, size_t errlen)
{
	return cfs_raw_writer_open(&o->raw, o->s->cstore, o->s->epoch, o->object_id, o->obj->key,
				   err, errlen);
}

/* Starts reading work item w.  Returns 0, or -ENOSPC when the cache is full. */
static int dispatch(struct smp_sampler *s, const struct work *w)
{
	char err[512];
	struct obj_reader *o = calloc(1, sizeof(*o));
	int rc;
	if (!o)
		return fail_local(s, -ENOMEM, "starting an object");
	o->s = s;
	o->obj = &s->listing.v[w->obj];
	o->object_id = s->object_ids[w->obj];
	o->base = o->good_end = w->off;
	o->wanted = w->wanted;
	o->nwanted = w->nwanted;
	if (s->cfg->format == CMN_FORMAT_RAW) {
		rc = raw_open(o, err, sizeof(err));
		if (rc) {
			free(o);
			cmn_log(CMN_LOG_ERROR, "%s", err);
			return fail_local(s, rc, "opening a raw object");
		}
		rc = get_room(s, o->raw, o->obj->size, 0, true);
		if (rc) {
			cfs_shard_writer_abort(o->raw);
			if (rc == -EFBIG)
				cmn_log(CMN_LOG_WARN,
					"%s: %llu bytes can never fit the cache limit: skipped",
					o->obj->key, (unsigned long long)o->obj->size);
			free(o);
			return rc == -EFBIG ? 0 : rc;
		}
	} else {
		struct cmn_tfr_opts to = {
		    .compression =
			s->cfg->compression == CMN_COMPRESSION_GZIP ? CMN_TFR_GZIP : CMN_TFR_NONE,
		    .name = o->obj->key,
		};
		o->gzip = to.compression == CMN_TFR_GZIP;
		rc = cmn_tfr_push_new(&o->push, &to, on_record, o, err, sizeof(err));
		if (rc) {
			free(o);
			return fail_local(s, rc, "starting a record reader");
		}
	}
	struct smp_fetch_req r = {
	    .key = o->obj->key,
	    .off = w->off,
	    .len = w->len,
	    .size = o->obj->size,
	    .ops = &obj_ops,
	    .ctx = o,
	};
	rc = smp_fetch_add(s->fetch, &r);
	if (rc) {
		cmn_tfr_push_free(o->push);
		cfs_shard_writer_abort(o->raw);
		free(o);
		return fail_local(s, rc, "queueing an object");
	}
	s->inflight++;
	return 0;
}

/* ---- listing ---------------------------------------------------------------- */

static bool is_sidecar(const struct smp_listing *l, size_t i)
{
	const char *k = l->v[i].key;
	size_t n = strlen(k);
	return n > 4 && !strcmp(k + n - 4, ".idx");
}

static int relist(struct smp_sampler *s, uint32_t epoch, char *err, size_t errlen)
{
	struct smp_listing l;
	int rc = smp_source_list(s->source, &l, err, errlen);
	if (rc)
		return rc;
	/*
	 * Index sidecars are not objects (strategy=records reads them): note
	 * which objects have one, then drop them from the listing.  The listing
	 * is sorted, so "x.idx" is found by binary search for "x".
	 */
	bool *idx = calloc(l.n ? l.n : 1, sizeof(*idx));
	if (!idx) {
		smp_listing_free(&l);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < l.n; i++) {
		if (!is_sidecar(&l, i))
			continue;
		size_t kl = strlen(l.v[i].key) - 4, lo = 0, hi = l.n;
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;
			int c = strncmp(l.v[mid].key, l.v[i].key, kl);
			if (c == 0 && l.v[mid].key[kl] != '\0')
				c = 1;
			if (c < 0)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < l.n && !strncmp(l.v[lo].key, l.v[i].key, kl) && l.v[lo].key[kl] == '\0')
			idx[lo] = true;
	}
	size_t w = 0;
	for (size_t i = 0; i < l.n; i++) {
		if (is_sidecar(&l, i)) {
			free(l.v[i].key);
			free(l.v[i].etag);
			continue;
		}
		idx[w] = idx[i];
		l.v[w++] = l.v[i];
	}
	l.n = w;
	struct cfs_listing_entry *ents = calloc(l.n ? l.n : 1, sizeof(*ents));
	int64_t *ids = calloc(l.n ? l.n : 1, sizeof(*ids));
	if (!ents || !ids) {
		free(ents);
		free(ids);
		smp_listing_free(&l);
		snprintf(err, errlen, "out of memory for a listing of %zu objects", w);
		return -ENOMEM;
	}
	for (size_t i = 0; i < l.n; i++)
		ents[i] = (struct cfs_listing_entry){l.v[i].key, l.v[i].size, l.v[i].etag};
	struct cfs_sync_result res = {0};
	rc = cfs_catalog_objects_sync(s->cat, s->source_id, ents, l.n, epoch, ids, &res);
	free(ents);
	if (rc) {
		free(ids);
		free(idx);
		smp_listing_free(&l);
		snprintf(err, errlen, "recording the listing in the catalog: %s", strerror(-rc));
		return rc;
	}
	if (res.changed)
		cmn_log(CMN_LOG_INFO,
			"%s: %llu objects changed (old samples retire at the next epoch)",
			s->cfg->url, (unsigned long long)res.changed);
	smp_listing_free(&s->listing);
	free(s->object_ids);
	free(s->has_idx);
	s->listing = l;
	s->object_ids = ids;
	s->has_idx = idx;
	s->listed = true;
	s->listed_epoch = epoch;
	return 0;
}

/* ---- strategy=records: sidecars and the plan ------------------------------- */

struct idx_fetch {
	char *buf;
	size_t len, cap;
	int rc;
	bool done;
	char msg[512];
};

static int idx_data(void *ctx, const void *p, size_t n)
{
	struct idx_fetch *x = ctx;
	if (x->len + n > SMP_INDEX_CAP)
		return -EFBIG;
	if (x->len + n > x->cap) {
		size_t nc = x->cap ? x->cap : 65536;
		while (nc < x->len + n)
			nc *= 2;
		char *nb = realloc(x->buf, nc);
		if (!nb)
			return -ENOMEM;
		x->buf = nb;
		x->cap = nc;
	}
	memcpy(x->buf + x->len, p, n);
	x->len += n;
	return 0;
}

static int idx_end(void *ctx)
{
	return 0;
}

static uint64_t idx_restart(void *ctx, bool final)
{
	struct idx_fetch *x = ctx;
	x->len = 0;
	return 0;
}

static void idx_done(void *ctx, int rc, const char *msg)
{
	struct idx_fetch *x = ctx;
	x->rc = rc;
	x->done = true;
	snprintf(x->msg, sizeof(x->msg), "%s", msg);
}

static const struct smp_xfer_ops idx_ops = {idx_data, idx_end, idx_restart, idx_done};

/*
 * Fetches the sidecars of the n objects in order[] that have one (in
 * parallel), parses them and plans the ranges.  use_idx[k] tells whether
 * order[k] is covered by the plan; objects whose sidecar failed are read
 * whole.  Returns 0 or -errno (only for local failures: memory, engine).
 */
static int load_plan(struct smp_sampler *s, const size_t *order, size_t n, uint64_t seed,
		     bool *use_idx, struct smp_plan *plan)
{
	struct idx_fetch *fx = calloc(n ? n : 1, sizeof(*fx));
	struct smp_idx_entry *ents = NULL;
	size_t ne = 0, cap = 0;
	int rc = 0;
	if (!fx)
		return -ENOMEM;
	for (size_t k = 0; k < n; k++) {
		use_idx[k] = false;
		if (!s->has_idx[order[k]])
			continue;
		char key[SMP_KEY_MAX + 8];
		snprintf(key, sizeof(key), "%s.idx", s->listing.v[order[k]].key);
		struct smp_fetch_req r = {.key = key, .ops = &idx_ops, .ctx = &fx[k]};
		rc = smp_fetch_add(s->fetch, &r);
		if (rc)
			goto out;
		use_idx[k] = true;
	}
	while (smp_fetch_pending(s->fetch) && !atomic_load(&s->stop)) {
		rc = smp_fetch_step(s->fetch, 250);
		if (rc)
			goto out;
	}
	smp_fetch_cancel_all(s->fetch);
	for (size_t k = 0; k < n; k++) {
		if (!use_idx[k])
			continue;
		const struct smp_object *o = &s->listing.v[order[k]];
		char err[512];
		size_t before = ne;
		int prc = fx[k].done && fx[k].rc == 0
			      ? smp__parse_index(fx[k].buf ? fx[k].buf : "", fx[k].len,
						 (uint32_t)order[k], o->size, &ents, &ne, &cap, err,
						 sizeof(err))
			      : -EIO;
		if (prc == -ENOMEM) {
			rc = prc;
			goto out;
		}
		if (prc) {
			cmn_log(CMN_LOG_WARN, "%s.idx: %s: reading the whole object instead",
				o->key, fx[k].done && fx[k].rc == 0 ? err : fx[k].msg);
			ne = before;
			use_idx[k] = false;
		}
	}
	rc = smp__plan_ranges(ents, ne, seed, plan);
out:
	for (size_t k = 0; k < n; k++)
		free(fx[k].buf);
	free(fx);
	free(ents);
	return rc;
}

/* ---- public ------------------------------------------------------------------ */

int smp_sampler_new(struct smp_sampler **out, const struct smp_sampler_opts *o, char *err,
		    size_t errlen)
{
	struct smp_sampler *s = calloc(1, sizeof(*s));
	int rc;
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	s->cfg = o->cfg;
	s->cstore = o->store;
	s->cat = cfs_store_catalog(o->store);
	s->seed = o->seed;
	s->stop_when_full = o->stop_when_full;
	s->room_wait_ms = o->room_wait_ms ? o->room_wait_ms : 60000;
	s->progress = o->progress;
	s->progress_ctx = o->progress_ctx;
	struct smp_source_opts so = {
	    .url = o->cfg->url,
	    .endpoint = o->cfg->endpoint,
	    .region = o->cfg->region,
	    .profile = o->cfg->profile,
	    .credentials_file = o->credentials_file,
	    .timeout_ms = o->cfg->timeout_ms,
	    .retries = o->cfg->retries,
	    .stats = &s->stats,
	};
	rc = smp_source_open(&s->source, &so, err, errlen);
	if (rc)
		goto fail;
	rc = smp_fetch_new(&s->fetch, s->source, o->cfg->connections, o->cfg->retries, o->seed, err,
			   errlen);
	if (rc)
		goto fail;
	rc = cfs_catalog_source(s->cat, o->cfg->url, &s->source_id);
	if (rc) {
		snprintf(err, errlen, "recording the source in the catalog: %s", strerror(-rc));
		goto fail;
	}
	pthread_mutex_init(&s->seal_mu, NULL);
	pthread_cond_init(&s->seal_cv, NULL);
	rc = -pthread_create(&s->sealer, NULL, sealer_main, s);
	if (rc) {
		snprintf(err, errlen, "cannot start the sealer thread: %s", strerror(-rc));
		pthread_cond_destroy(&s->seal_cv);
		pthread_mutex_destroy(&s->seal_mu);
		goto fail;
	}
	s->sealer_started = true;
	*out = s;
	return 0;
fail:
	smp_fetch_free(s->fetch);
	smp_source_free(s->source);
	free(s);
	return rc;
}

void smp_sampler_free(struct smp_sampler *s)
{
	if (!s)
		return;
	if (s->sealer_started) {
		pthread_mutex_lock(&s->seal_mu);
		s->seal_quit = true;
		pthread_cond_broadcast(&s->seal_cv);
		pthread_mutex_unlock(&s->seal_mu);
		pthread_join(s->sealer, NULL);
		pthread_cond_destroy(&s->seal_cv);
		pthread_mutex_destroy(&s->seal_mu);
	}
	smp_fetch_free(s->fetch);
	smp_source_free(s->source);
	smp_listing_free(&s->listing);
	free(s->object_ids);
	free(s->has_idx);
	free(s);
}

void smp_sampler_stop(struct smp_sampler *s)
{
	atomic_store(&s->stop, true);
	smp_fetch_wakeup(s->fetch);
}

const struct smp_stats *smp_sampler_stats(const struct smp_sampler *s)
{
	return &s->stats;
}

void smp_sampler_progress(const struct smp_sampler *s, struct smp_progress *p)
{
	*p = s->prog;
}

static uint64_t splitmix(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void report(struct smp_sampler *s, bool force)
{
	uint64_t now = cmn_mono_ms();
	if (!s->progress || (!force && now - s->last_progress < 500))
		return;
	s->last_progress = now;
	s->prog.elapsed_ms = now - s->t0;
	s->prog.fetched = SMP_STAT_GET(&s->stats, bytes_fetched);
	s->prog.records = SMP_STAT_GET(&s->stats, records_admitted) - s->records0;
	s->prog.bytes = SMP_STAT_GET(&s->stats, bytes_admitted) - s->bytes0;
	s->prog.full = s->full;
	s->progress(&s->prog, &s->stats, s->progress_ctx);
}

int smp_sampler_run(struct smp_sampler *s, uint32_t epoch, char *err, size_t errlen)
{
	const struct cmn_config *c = s->cfg;
	int rc = 0;
	s->epoch = epoch;
	s->full = false;
	s->fatal = 0;
	s->fatal_msg[0] = '\0';
	memset(&s->prog, 0, sizeof(s->prog));
	s->t0 = s->last_progress = cmn_mono_ms();
	uint64_t records0 = SMP_STAT_GET(&s->stats, records_admitted);
	uint64_t bytes0 = SMP_STAT_GET(&s->stats, bytes_admitted);
	s->records0 = records0;
	s->bytes0 = bytes0;

	uint32_t every = c->relist ? c->relist : 1;
	if (!s->listed || epoch >= s->listed_epoch + every) {
		rc = relist(s, epoch, err, errlen);
		if (rc)
			return rc;
	}
	/* this rank's objects, in a seeded random order (Fisher-Yates) */
	size_t *order = malloc((s->listing.n ? s->listing.n : 1) * sizeof(*order)), n = 0;
	if (!order) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	uint32_t ws = c->world_size ? c->world_size : 1;
	for (size_t i = 0; i < s->listing.n; i++)
		if (smp_key_hash(s->listing.v[i].key) % ws == c->rank)
			order[n++] = i;
	uint64_t rng = s->seed ^ ((uint64_t)epoch << 32) ^ 0x2545f4914f6cdd1dull;
	for (size_t i = n; i > 1; i--) {
		size_t j = (size_t)(splitmix(&rng) % i);
		size_t t = order[i - 1];
		order[i - 1] = order[j];
		order[j] = t;
	}
	/* the work of this pass: ranges of drawn records, and whole objects */
	bool by_records = c->strategy == CMN_STRATEGY_RECORDS;
	if (by_records &&
	    (c->format != CMN_FORMAT_TFRECORD || c->compression != CMN_COMPRESSION_NONE)) {
		cmn_log(
		    CMN_LOG_INFO,
		    "strategy=records needs uncompressed TFRecord objects: reading whole objects");
		by_records = false;
	}
	struct smp_plan plan = {0};
	bool *use_idx = calloc(n ? n : 1, sizeof(*use_idx));
	if (!use_idx) {
		free(order);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	if (by_records) {
		rc = load_plan(s, order, n, splitmix(&rng), use_idx, &plan);
		if (rc) {
			free(order);
			free(use_idx);
			snprintf(err, errlen, "planning records from index sidecars: %s",
				 strerror(-rc));
			return rc;
		}
	}
	struct work *items = malloc((n + plan.n + 1) * sizeof(*items));
	size_t nitems = 0;
	if (!items) {
		free(order);
		free(use_idx);
		smp__plan_free(&plan);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < plan.n; i++)
		items[nitems++] = (struct work){plan.r[i].obj, plan.r[i].off, plan.r[i].len,
						plan.r[i].wanted, plan.r[i].nwanted};
	for (size_t k = 0; k < n; k++)
		if (!use_idx[k])
			items[nitems++] = (struct work){(uint32_t)order[k], 0, 0, NULL, 0};
	if (by_records) /* whole objects (no sidecar) mixed in among the ranges */
		for (size_t i = nitems; i > 1; i--) {
			size_t j = (size_t)(splitmix(&rng) % i);
			struct work t = items[i - 1];
			items[i - 1] = items[j];
			items[j] = t;
		}
	free(use_idx);
	s->prog.objects_total = nitems;

	size_t shuf_cap =
	    c->shard_size < SMP_SHUFFLE_MAX_BYTES ? (size_t)c->shard_size : SMP_SHUFFLE_MAX_BYTES;
	rc = smp_shuffle_new(&s->shuf, shuf_cap, splitmix(&rng));
	if (rc) {
		free(order);
		free(items);
		smp__plan_free(&plan);
		snprintf(err, errlen, "out of memory for the shuffle buffer");
		return rc;
	}
	/* keep up to 2 x connections requests queued so the engine never idles */
	size_t next = 0, window = 2 * (size_t)(c->connections ? c->connections : 1);
	n = nitems;
	while (!atomic_load(&s->stop) && !s->full && !s->fatal) {
		while (next < n && s->inflight < window && !s->full && !s->fatal) {
			rc = dispatch(s, &items[next]);
			if (rc && rc != -ENOSPC)
				break;
			next++;
		}
		if (s->full || s->fatal)
			break;
		if (s->need_room) {
			rc = wait_for_room(s);
			if (rc == -ECANCELED)
				break;
			if (rc && rc != -EWOULDBLOCK) {
				fail_local(s, rc, "waiting for room in the cache");
				break;
			}
			continue;
		}
		if (next >= n && smp_fetch_pending(s->fetch) == 0)
			break;
		rc = smp_fetch_step(s->fetch, 250);
		if (rc) {
			fail_local(s, rc, "transfer engine");
			break;
		}
		report(s, false);
	}
	smp_fetch_cancel_all(s->fetch);
	/* what the shuffle buffer still holds goes out in random order */
	s->may_block = true;
	if (!s->fatal && !atomic_load(&s->stop))
		smp_shuffle_drain(s->shuf, write_record, s);
	s->may_block = false;
	s->need_room = false;
	smp_fetch_hold(s->fetch, false);
	smp_shuffle_free(s->shuf);
	s->shuf = NULL;
	if (!s->fatal)
		seal_current(s);
	if (s->w) {
		cfs_shard_writer_abort(s->w);
		s->w = NULL;
	}
	seal_flush(s);
	s->prog.records = SMP_STAT_GET(&s->stats, records_admitted) - records0;
	s->prog.bytes = SMP_STAT_GET(&s->stats, bytes_admitted) - bytes0;
	free(order);
	free(items);
	smp__plan_free(&plan);
	report(s, true);
	if (s->fatal) {
		snprintf(err, errlen, "%s", s->fatal_msg);
		return s->fatal;
	}
	return 0;
}
