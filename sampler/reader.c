/*
 * reader.c - one object's reader: the fetch callbacks that turn a body into
 * records (or, for format=raw, into one local file).
 *
 * Records and retries: an uncompressed object is read as one TFRecord stream
 * through the push decoder.  Each delivered record advances `good_end`, the
 * object offset after the last good record.  Bad data - a payload CRC
 * mismatch, lost framing, a body ending inside a record - makes the reader
 * answer -EAGAIN; fetch.c retries from good_end with a Range request, so no
 * record is delivered twice and a transient corruption costs no record.  On
 * the last attempt the reader turns lenient: a record whose CRC fails is
 * counted and skipped (DESIGN 5) and the rest of the object is kept.  Lost
 * framing is never skipped over: on the last attempt too the reader answers
 * -EAGAIN, the transport gives the object up as exhausted
 * (SMP_XFER_EXHAUSTED), and a later transfer resumes it at good_end -
 * ingest's next round, a mount's next epoch, a new run (plan.c).
 * Compression (config `compression`, default auto) is told per object by
 * the decoder from the body's first bytes (cmn_tfr_detect, the detection
 * the feeder and `check` use too).  GZIP and ZLIB objects cannot be resumed
 * mid-stream: they restart at 0 and skip the records already delivered; a
 * plain object resumed at good_end keeps the compression found (none).
 * A file:// object whose stream is lost (framing, corrupt compressed data)
 * is not retried: the same bytes would be read again.  It counts as a
 * failed object (`ingest` exits 1), its good records before the bad spot
 * are kept.
 * Counting (docs/counters.md): records_lost counts only records no resume
 * will deliver, added when the job ends for good (job->nlost, plan.c); a
 * cancelled job's records are fetched again.  Bad data on an attempt that
 * is retried is pending until
 * the record at that place is delivered (records_recovered) or given up:
 * lost when the last attempt skips it or the object is refused (a 4xx),
 * but a whole object the transport gave up on faults that may pass keeps
 * it for its resume (job->pending; the object counts in objects_partial
 * if no round heals it).  An object that lost a record counts once in
 * failed_objects: marked here (job->lost) when the reader itself ended or
 * finished it, counted when the job ends; an object the transport refused,
 * or a run it gave up, is counted in obj_done; an exhausted whole object
 * when its job ends for good (plan.c, whole_end); each through
 * smp__count_failed, once per pass and epoch.
 *
 * Owns struct smp__reader (one per request in flight).  Does not decide
 * what to read (plan.c), queue requests (dispatch.c) or write shards
 * (records go to the shuffle buffer, whose sink is drain.c).
 * Invariants: DESIGN 5 (only records whose CRC passed are passed on),
 * DESIGN 7 (the key goes to the raw writer as a display name, never into a
 * path).  Threads: the sampler's thread (fetch callbacks run inside
 * smp_fetch_step()).
 */
#include "sampler/sampler_i.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cachefs/budget.h"
#include "cachefs/catalog.h"
#include "cachefs/shard_writer.h"
#include "common/log.h"
#include "cachefs/store.h"
#include "common/tfrecord.h"

struct smp__reader {
	struct smp_sampler *s;
	struct smp__job *job;
	const struct smp__pobj *obj;
	int64_t object_id;
	struct cmn_tfr_push *push;
	uint64_t base;		  /* object offset where the push stream starts */
	uint64_t good_end;	  /* object offset after the last delivered record */
	uint64_t delivered;	  /* records delivered from this object */
	uint64_t attempt_records; /* records seen in this attempt (gzip skip) */
	uint64_t skip;		  /* gzip restart: records to skip */
	uint64_t bad_seen;	  /* decoder's bad_records already accounted */
	uint64_t pending;	  /* bad records seen on a retried attempt, not yet re-read */
	uint64_t lost;		  /* records of this object given up (records_lost) */
	uint64_t lost_tail;	  /* ... of them since the last record delivered */
	bool rejected;		  /* the reader gave the object up (lenient, framing lost) */
	bool lenient;		  /* last attempt: skip bad records instead of retrying */
	uint64_t granted;	  /* object offset up to which the job reserved room (obj_grant) */
	uint64_t partial;	  /* bytes fed to the decoder past good_end (stats partial_bytes) */
	struct cfs_shard_writer *raw; /* format=raw */
	uint64_t raw_bytes;
};

/* GZIP or ZLIB: told by the decoder once it has seen the first bytes. */
static bool compressed(const struct smp__reader *o)
{
	enum cmn_tfr_compression c = cmn_tfr_push_compression(o->push);
	return c == CMN_TFR_GZIP || c == CMN_TFR_ZLIB;
}

/*
 * n records of bad data were seen.  Retried (not lenient): they wait to be
 * re-read from good_end (pend), where a retry sees the same records again
 * (so the most seen at once, not the sum).  On the last attempt they are
 * lost, and the pending ones with them: they are the same records.
 */
static void pend(struct smp__reader *o, uint64_t n)
{
	if (n > o->pending)
		o->pending = n;
}

static void bad_data(struct smp__reader *o, uint64_t n)
{
	if (!o->lenient) {
		pend(o, n);
		return;
	}
	o->lost += n; /* records_lost when the job ends for good (obj_done) */
	o->lost_tail += n;
	o->pending = 0;
}

/* A record was delivered: the bad data once at its place was read intact. */
static void recovered(struct smp__reader *o)
{
	if (o->pending) {
		SMP_STAT_ADD(&o->s->stats, records_recovered, o->pending);
		o->pending = 0;
	}
}

/*
 * partial_bytes (docs/counters.md): body bytes fed to the decoder beyond the
 * last whole record - the head of a record whose rest has not arrived (a
 * ranged transfer waiting for room).  They leave the gauge when the record
 * is whole, or when the reader drops them (a retry from good_end, the end).
 */
static void partial_less(struct smp__reader *o, uint64_t n)
{
	if (n > o->partial)
		n = o->partial;
	o->partial -= n;
	SMP_STAT_ADD(&o->s->stats, partial_bytes, (uint64_t)0 - n);
}

static int on_record(const struct cmn_tfr_record *rec, void *ctx)
{
	struct smp__reader *o = ctx;
	struct smp_sampler *s = o->s;
	uint64_t bad = cmn_tfr_push_bad_records(o->push);
	if (bad > o->bad_seen) {
		bad_data(o, bad - o->bad_seen);
		o->bad_seen = bad;
		if (!o->lenient)
			return -EAGAIN; /* retry from good_end: this record is re-read */
	}
	if (compressed(o) && o->attempt_records++ < o->skip)
		return 0; /* delivered before the restart */
	recovered(o);
	if (o->job->nskip && smp__job_skips(o->job, o->base + rec->offset)) {
		/* resident from an earlier, partial transfer of this object (invariant 8) */
		SMP_STAT_ADD(&s->stats, records_resident_skipped, 1);
		return 0;
	}
	struct smp_rec r = {
	    .data = rec->data,
	    .len = rec->len,
	    .crc = rec->crc,
	    .object_id = o->object_id,
	    .object_offset = o->base + rec->offset,
	    .job = o->job,
	};
	o->job->refs++; /* before the buffer may hand it on (and count it out) */
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
		rc = smp_shuffle_add_block(s->shuf, &r, blk, bcap, smp__write_record, s);
	} else {
		smp_shuffle_unspare(s->shuf, spare, spare_cap); /* the record is in the chunk */
		rc = smp_shuffle_add(s->shuf, &r, smp__write_record, s);
	}
	if (rc == -ENOMEM)
		o->job->refs--; /* not kept */
	if (rc)
		return rc == -EAGAIN ? -EIO : rc;
	o->delivered++;
	o->lost_tail = 0;
	if (!compressed(o)) {
		uint64_t end = o->base + rec->offset + CMN_TFR_OVERHEAD + rec->len;
		partial_less(o, end - o->good_end);
		o->good_end = end;
		o->job->good_end = end; /* a partial object's low (plan.c) */
		o->job->plain = true;
	}
	return 0;
}

static int obj_data(void *ctx, const void *p, size_t n)
{
	struct smp__reader *o = ctx;
	struct smp_sampler *s = o->s;
	if (atomic_load(&s->stop) || s->fatal)
		return -ECANCELED;
	if (o->raw) {
		int rc = cfs_raw_writer_write(o->raw, p, n);
		if (rc)
			return rc == -ENOBUFS ? -EAGAIN
					      : smp__fail_local(s, rc, "writing a raw object");
		o->raw_bytes += n;
		return 0;
	}
	if (!compressed(o)) { /* before the feed: its records leave the gauge in on_record */
		o->partial += n;
		SMP_STAT_ADD(&s->stats, partial_bytes, (uint64_t)n);
	}
	int rc = cmn_tfr_push_feed(o->push, p, n);
	if (compressed(o) && o->partial) /* told by these first bytes: not record bytes */
		partial_less(o, o->partial);
	if (rc == 0) {
		uint64_t bad = cmn_tfr_push_bad_records(o->push);
		if (bad > o->bad_seen) {
			bad_data(o, bad - o->bad_seen);
			o->bad_seen = bad;
			if (!o->lenient)
				return -EAGAIN;
		}
		return 0;
	}
	if (rc == -EAGAIN || rc == -EILSEQ || rc == -EMSGSIZE || rc == -EPROTO || rc == -EIO) {
		/* file://: a retry would read the same bytes again */
		bool give_up = rc != -EAGAIN && smp_source_scheme(s->source) == SMP_SCHEME_FILE;
		if (rc != -EAGAIN) { /* framing lost: the rest of the object, at least 1 */
			cmn_log(give_up ? CMN_LOG_ERROR : CMN_LOG_INFO, "%s",
				cmn_tfr_push_error(o->push));
			if (!give_up) {
				/*
				 * Re-read from good_end, on the last attempt too: the
				 * transport gives the object up as exhausted and a
				 * later transfer resumes it there (obj_done).
				 */
				pend(o, 1);
				return -EAGAIN;
			}
			o->lenient = true; /* counted as lost, not pending */
			bad_data(o, 1);
			o->rejected = true;
			return -EBADMSG;
		}
		return -EAGAIN;
	}
	return rc; /* -ENOSPC (full), local write errors, -ENOMEM */
}

static int obj_end(void *ctx)
{
	struct smp__reader *o = ctx;
	if (o->raw)
		return 0;
	int rc = cmn_tfr_push_finish(o->push);
	if (rc == -EPROTO) { /* the body ends inside a record */
		if (!o->lenient && smp_source_scheme(o->s->source) != SMP_SCHEME_FILE) {
			bad_data(o, 1);
			return -EAGAIN;
		}
		cmn_log(CMN_LOG_ERROR, "%s", cmn_tfr_push_error(o->push));
		o->lenient = true;
		bad_data(o, 1);
		o->rejected = true;
		return -EBADMSG; /* a truncated object: failed, its whole records kept */
	}
	if (rc == 0) {
		uint64_t bad = cmn_tfr_push_bad_records(o->push);
		if (bad > o->bad_seen) {
			bad_data(o, bad - o->bad_seen);
			o->bad_seen = bad;
			if (!o->lenient)
				return -EAGAIN;
		}
	}
	return rc;
}

static int raw_open(struct smp__reader *o, char *err, size_t errlen);

static uint64_t obj_restart(void *ctx, bool final)
{
	struct smp__reader *o = ctx;
	o->lenient = final;
	if (o->raw) {
		char err[256];
		cfs_shard_writer_abort(o->raw);
		o->raw = NULL;
		o->raw_bytes = 0;
		if (raw_open(o, err, sizeof(err)) == 0 &&
		    cfs_shard_writer_try_reserve(o->raw, o->obj->size) == 0)
			return 0;
		cmn_log(CMN_LOG_WARN, "%s: cannot restart the raw object: %s", o->job->key, err);
		return 0; /* obj_data fails on the missing writer */
	}
	o->bad_seen = 0;
	partial_less(o, o->partial); /* fetched again from good_end */
	if (compressed(o)) {
		cmn_tfr_push_reset(o->push);
		o->skip = o->delivered;
		o->attempt_records = 0;
		o->base = 0;
		return 0;
	}
	cmn_tfr_push_resume(o->push);
	o->base = o->good_end;
	return o->good_end;
}

/*
 * The transfer is over.  A raw object goes to the sealer's next group
 * commit with its plan mark (committed with its row); records of a TFRecord object may still wait
 * in the shuffle buffer, so its job ends when the last of them is written (smp__job_maybe_end).  A
 * transfer cancelled because the sampler stops leaves its units unsettled: the plan gives them
 * again after a restart.
 */
static void obj_done(void *ctx, int rc, enum smp_xfer_end how, const char *msg)
{
	struct smp__reader *o = ctx;
	struct smp_sampler *s = o->s;
	struct smp__job *j = o->job;
	/*
	 * A whole object given up on faults that may pass is resumed where it
	 * stopped (ingest's next round, a mount's next epoch, a new run):
	 * smp__job_maybe_end counts it; other give-ups are counted here.
	 */
	j->exhausted = how == SMP_XFER_EXHAUSTED && !j->obj->ix;
	if (how != SMP_XFER_ENDED && !j->exhausted)
		smp__count_failed(s, j->obj);
	s->inflight--;
	if (o->raw) {
		if (rc == 0) {
			/*
			 * Handed to the sealer's next group commit with its plan
			 * mark and fetch count (seal.c): the unit is resident for
			 * the plan now, as a record written into an open shard is;
			 * the catalog learns it with the file's row.
			 */
			uint64_t pass = cmn_plan_pass(s->plan);
			int src = cfs_shard_writer_add_marks(o->raw, s->plan_id, pass, &j->unit, 1);
			if (src == 0) {
				cfs_shard_writer_mark_fetched(o->raw);
				src = smp__seal_raw(s, o->raw);
			} else {
				cfs_shard_writer_abort(o->raw);
				cmn_log(CMN_LOG_ERROR, "%s: marking the sampling plan: %s",
					o->job->key, strerror(-src));
				smp__fail_local(s, src, "marking the sampling plan");
			}
			o->raw = NULL;
			if (src)
				rc = src;
			else
				j->written = 1;
		} else {
			cfs_shard_writer_abort(o->raw);
			o->raw = NULL;
		}
		if (rc == 0) { /* marked in the raw file's commit */
			cmn_plan_set_resident(s->plan, j->unit, true);
			cmn_plan_done(s->plan, j->unit);
			s->prog.objects_done++;
			SMP_STAT_ADD(&s->stats, objects_done, 1);
			j->cancelled = true; /* settled here, nothing left for maybe_end */
		}
	}
	if (o->rejected)
		; /* the reason was logged; failed_objects counts it once (job->lost) */
	else if (rc != 0 && rc != -ECANCELED && rc != -ENOSPC && !s->fatal)
		cmn_log(CMN_LOG_WARN, "%s", msg);
	if (o->pending && j->exhausted)
		j->pending = o->pending; /* its resume re-reads them from good_end: not lost */
	else if (o->pending && rc != 0 && rc != -ECANCELED) /* never re-read: lost */
		o->lost += o->pending;
	/*
	 * Counted in records_lost when the job ends for good (plan.c), not
	 * cancelled.  An exhausted object's resume re-reads what it skipped
	 * past its resume point: good_end, or the first byte of a compressed
	 * object - those are not lost.
	 */
	if (j->exhausted && o->lost)
		o->lost -= compressed(o) ? o->lost : o->lost_tail;
	j->nlost += o->lost;
	/* the transport's give-ups are counted above; these it finished */
	if (o->lost && (rc == 0 || o->rejected)) {
		j->lost = true;	  /* counted once in failed_objects when the job ends */
		if (!o->rejected) /* a rejected object's one line is logged already */
			cmn_log(CMN_LOG_WARN, "%s: %llu record%s lost (bad data on every attempt)",
				o->job->key, (unsigned long long)o->lost, o->lost == 1 ? "" : "s");
	}
	j->over = true;
	j->ok = rc == 0;
	if (rc == -ECANCELED || (rc != 0 && (atomic_load(&s->stop) || s->fatal)))
		j->cancelled = true;
	partial_less(o, o->partial);
	cmn_tfr_push_free(o->push);
	free(o);
	smp__job_maybe_end(s, j);
}

/*
 * The range a transfer asks for at once, its step: limit / (SMP_GRANT_SHARE *
 * connections) within [SMP_GRANT_FLOOR, SMP_GRANT_MAX] (sampler_i.h).  A
 * 200 GiB cache with 8 connections asks for 8 MiB ranges, a 128 MiB one
 * for 1 MiB ranges.
 */
static uint64_t grant_step(const struct smp_sampler *s, struct cfs_budget *b)
{
	struct cfs_budget_stat st;
	cfs_budget_get(b, &st);
	uint64_t conns = s->cfg->connections ? s->cfg->connections : 1;
	uint64_t step = st.limit / ((uint64_t)SMP_GRANT_SHARE * conns);
	if (step < SMP_GRANT_FLOOR)
		step = SMP_GRANT_FLOOR;
	return step < SMP_GRANT_MAX ? step : SMP_GRANT_MAX;
}

/*
 * How far the transfer may ask (fetch.h, grant): a mount's TFRecord object
 * is asked for in ranges of the room its job holds, reserved here before
 * the range is requested - so every byte the server sends has its room,
 * none waits in socket buffers for a boundary or is thrown away at a stop,
 * and policy=none fetches nothing once frozen.
 *
 * Steps: before each range the room held ahead of `cur` is topped up to
 * one step (grant_step) in one reservation that never waits: what the
 * budget has now, if that is at least SMP_RANGE_MIN or completes the
 * step (a step ends at the object's end).  The first range too: the job's first room (sampler.c) is
 * topped up before the first request, so a cold cache is filled by requests of a whole step each.
 * When the budget has less, the transfer asks for the room it already holds, or waits in the fetch
 * queue for its grant without a connection (fetch.c).
 *
 * With a record index (strategy=records) ranges end at record ends
 * (smp__job_room_end): a transfer waiting for its next grant holds no
 * partial record.  A whole object's ranges may end inside a record: that
 * head waits in the decoder for the next range (stats partial_bytes), it is
 * not thrown away.
 * Record bytes in the source are the bytes a shard needs
 * (cfs_shard_writer_record_bytes), so the job's reserve covers each record
 * that arrives (drain.c takes from it).  ingest reserved the whole unit, raw
 * objects are reserved whole (reader_new), and a GZIP or ZLIB stream's bytes are
 * not record bytes: those ask for everything at once.
 */
static uint64_t obj_grant(void *ctx, uint64_t cur, uint64_t want_end)
{
	struct smp__reader *o = ctx;
	struct smp_sampler *s = o->s;
	if (o->raw || compressed(o) || !s->follow)
		return want_end;
	uint64_t held = o->granted > cur ? o->granted : cur; /* room held up to here */
	if (atomic_load(&s->stop) || s->fatal || smp__pause_wanted(s))
		return held; /* a boundary: its snapshot, not new room */
	struct cfs_budget *b = cfs_store_budget(s->cstore);
	uint64_t step = grant_step(s, b);
	uint64_t target = want_end - cur < step ? want_end : cur + step;
	if (held >= target)
		return held;
	uint64_t rest = target - held;
	uint64_t least = rest < SMP_RANGE_MIN ? rest : SMP_RANGE_MIN;
	uint64_t avail = smp__budget_avail(b);
	uint64_t take = avail < rest ? avail : rest;
	if (take < least)
		return held;
	take = smp__job_room_end(o->job, held, held + take) - held; /* whole records */
	if (take > avail || cfs_budget_try_reserve(b, take) != 0)
		return held;
	o->job->reserve += take;
	o->granted = held + take;
	return o->granted;
}

const struct smp_xfer_ops smp__reader_ops = {
    .data = obj_data,
    .end = obj_end,
    .restart = obj_restart,
    .done = obj_done,
    .grant = obj_grant,
};

static int raw_open(struct smp__reader *o, char *err, size_t errlen)
{
	return cfs_raw_writer_open(&o->raw, o->s->cstore, o->s->epoch, o->object_id, o->job->key,
				   err, errlen);
}

int smp__reader_new(struct smp_sampler *s, struct smp__job *j, struct smp__reader **out)
{
	char err[512];
	struct smp__reader *o = calloc(1, sizeof(*o));
	int rc;
	*out = NULL;
	if (!o)
		return smp__fail_local(s, -ENOMEM, "starting an object");
	o->s = s;
	o->job = j;
	o->obj = j->obj;
	o->object_id = j->obj->object_id;
	o->base = o->good_end = j->off;
	o->pending = j->pending; /* an earlier round's bad data at good_end */
	j->pending = 0;
	o->granted = j->off + j->reserve; /* the first room, reserved before the job started */
	if (s->cfg->format == CMN_FORMAT_RAW) {
		rc = raw_open(o, err, sizeof(err));
		if (rc) {
			free(o);
			cmn_log(CMN_LOG_ERROR, "%s", err);
			return smp__fail_local(s, rc, "opening a raw object");
		}
		cfs_shard_writer_adopt(o->raw, j->reserve); /* reserved before the fetch */
		j->reserve = 0;
	} else {
		struct cmn_tfr_opts to = {
		    /* a partial object resumed at its low was found plain before */
		    .compression = j->off > 0 && !j->obj->ix			 ? CMN_TFR_NONE
				   : s->cfg->compression == CMN_COMPRESSION_GZIP ? CMN_TFR_GZIP
				   : s->cfg->compression == CMN_COMPRESSION_ZLIB ? CMN_TFR_ZLIB
				   : s->cfg->compression == CMN_COMPRESSION_NONE ? CMN_TFR_NONE
										 : CMN_TFR_AUTO,
		    .name = o->job->key,
		};
		rc = cmn_tfr_push_new(&o->push, &to, on_record, o, err, sizeof(err));
		if (rc) {
			free(o);
			return smp__fail_local(s, rc, "starting a record reader");
		}
	}
	*out = o;
	return 0;
}

void smp__reader_free(struct smp__reader *o)
{
	partial_less(o, o->partial);
	cmn_tfr_push_free(o->push);
	cfs_shard_writer_abort(o->raw);
	free(o);
}
