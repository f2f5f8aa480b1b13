/*
 * feeder.c - the feeder pipeline and the public rc_feeder_* / rc_batch_* API.
 *
 * Pipeline (terms in feeder_i.h):
 *
 *   reader threads --pread--> chunks --lane queues--> window --shuffle-->
 *   decoder threads --cmn_ex_decode--> slot (pinned) --cudaMemcpyAsync-->
 *   device --event--> rc_feeder_next --> consumer --> rc_batch_release
 *
 * Readers take a lane that has fewer than `ra` chunks queued, fill a free
 * chunk from it (reader.c) and queue it.  A decoder takes a free slot and,
 * alone (the `assembling` flag), picks the batch's records: the window is
 * topped up to W chunks from the lanes in round-robin order (waiting for the
 * lane whose turn it is), then one record is picked uniformly among the
 * window's pending records (the first one without shuffle).  The batch gets
 * the next batch index; the decoder then decodes its records straight into
 * the slot without the lock, issues the device copy and marks the slot READY.
 * rc_feeder_next hands out slots in batch-index order, after their copy
 * event completed.
 *
 * Epochs: the consumer reads generation `gen`; the producer works on `pgen`.
 * For plain directories, globs and lists the producer moves on to the next
 * epoch (pgen = gen + 1) as soon as gen's last batch is assembled
 * (producer_advance), and rc_feeder_next_epoch then only switches the
 * consumer (consumer_switch).  In a rollcache mount, and when the consumer
 * abandons an epoch early, rc_feeder_next_epoch pauses everything and
 * rebuilds the pipeline (epoch_reset).  Errors are kept per generation.
 *
 * Invariants:
 *  - every record of this rank's files is taken by exactly one batch per
 *    epoch (or dropped by drop_last at the very end); tests check it;
 *  - steady state allocates nothing: slots are allocated at open, chunk
 *    buffers and ragged values grow only past their largest size so far
 *    (st_allocs counts every allocation after open);
 *  - a slot's device buffers are not overwritten before the consumer's
 *    stream passed the point where it released the slot (ev_release).
 *
 * Locking: one mutex f->mu and three conditions under it, one per kind of
 * waiter: f->cv_rd (readers: a free chunk, room in a lane queue), f->cv_dec
 * (decoders: a free slot, the end of an assembly, a chunk for the window,
 * old_decoding during an advance) and f->cv_cons (the consumer: a ready slot, a
 * release when the ring is full, active == 0 for a pause, the end of an
 * advance).  Every state change broadcasts the conditions of the waiters
 * it may concern (wake()); when in doubt, all three.  f->mu protects the
 * fields marked f->mu in feeder_i.h.  Reading, decoding and CUDA calls run without it.
 * rc_feeder_next_epoch pauses the workers (paused, then waits for
 * active == 0) before it touches lanes and files.  Statistics are atomics.
 * f->copy_mu only serialises the enqueueing of one slot's device copies; it
 * is never held together with f->mu (so there is no lock order to keep).
 */
#include "feeder/feeder_i.h"

#include "common/example.h"
#include "common/log.h"
#include "feeder/cuda_i.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define READAHEAD 2 /* chunks queued per lane */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Whom a state change may concern: readers, decoders, the consumer. */
enum { WAKE_RD = 1, WAKE_DEC = 2, WAKE_CONS = 4, WAKE_ALL = 7 };

/*
 * Wakes the threads waiting on the conditions in `who`; f->mu held or not
 * (the state change it announces was made under f->mu).  Each
 * kind of thread waits on its own condition, so that a chunk queued by a
 * reader does not also wake the consumer, and a batch made ready does not
 * wake the reader: most broadcasts find no waiter and cost no system call.
 * The hot paths call it right after unlocking f->mu (unlock_wake), so that a
 * woken thread does not run only to block on the mutex its waker still holds
 * (on 2 CPUs that was a third of all context switches).
 */
static void wake(struct rc_feeder *f, unsigned who)
{
	if (who & WAKE_RD)
		pthread_cond_broadcast(&f->cv_rd);
	if (who & WAKE_DEC)
		pthread_cond_broadcast(&f->cv_dec);
	if (who & WAKE_CONS)
		pthread_cond_broadcast(&f->cv_cons);
}

/* Unlocks f->mu, then wakes `who` and what window_topup left pending. */
static void unlock_wake(struct rc_feeder *f, unsigned who)
{
	who |= f->wk.wake_pending;
	f->wk.wake_pending = 0;
	pthread_mutex_unlock(&f->mu);
	wake(f, who);
}

static size_t align64(size_t n)
{
	return (n + 63) & ~(size_t)63;
}

/*
 * Records a failure at batch index `batch`; f->mu held.  The earliest batch
 * wins, so the consumer gets every batch before it and then the same error
 * whatever the thread timing was.
 */
static void set_error(struct rc_feeder *f, int rc, const char *msg, uint32_t gen, uint64_t batch)
{
	struct fdr_err *e = &f->ep.errs[gen & 1];
	if (gen != f->ep.gen && gen != f->ep.pgen)
		return; /* an epoch the consumer already left */
	if (e->rc && e->batch <= batch)
		return;
	e->rc = rc;
	e->batch = batch;
	snprintf(e->msg, sizeof e->msg, "%s", msg);
	cmn_log(CMN_LOG_DEBUG, "feeder: %s", msg);
}

/* ---- chunks and the window (f->mu held) ------------------------------- */

static void chunk_put_free(struct rc_feeder *f, struct fdr_chunk *c)
{
	c->nrec = 0;
	c->remaining = 0;
	c->refs = 0;
	c->next = f->prod.free_chunks;
	f->prod.free_chunks = c;
}

static void chunk_unref(struct rc_feeder *f, struct fdr_chunk *c)
{
	if (--c->refs == 0 && c->remaining == 0)
		chunk_put_free(f, c);
}

static void picks_drop(struct rc_feeder *f, struct rc_batch *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		chunk_unref(f, s->picks[i].c);
}

static bool lane_exhausted(const struct fdr_lane *l)
{
	return l->done && l->qn == 0 && !l->busy;
}

/*
 * Tops the window up to W chunks, taking the lanes in round-robin order.
 * Returns 1 when records can be picked (window full, or all lanes
 * exhausted with records left), 0 when the epoch's records are all taken,
 * -EAGAIN when paused or stopping, or the epoch's error.  May wait on
 * f->cv_dec.
 */
static int window_topup(struct rc_feeder *f)
{
	for (;;) {
		if (f->wk.stop || f->wk.paused)
			return -EAGAIN;
		if (f->ep.errs[f->ep.pgen & 1].rc)
			return f->ep.errs[f->ep.pgen & 1].rc;
		while (f->prod.nwin < f->cfg.W && f->prod.lanes_done < f->prod.nlanes) {
			struct fdr_lane *l = &f->prod.lanes[f->prod.rr];
			if (l->finished) {
				/* finished lanes leave the rotation */
			} else if (l->qn > 0) {
				struct fdr_chunk *c = l->qh;
				l->qh = c->next;
				if (!l->qh)
					l->qt = NULL;
				l->qn--;
				c->next = NULL;
				c->remaining = c->nrec;
				f->prod.win[f->prod.nwin++] = c;
				f->prod.win_pending += c->nrec;
				/* the lane's queue has room: readers are woken when
				 * the assembly lets go of f->mu (or waits) */
				f->wk.wake_pending |= WAKE_RD;
			} else if (lane_exhausted(l)) {
				if (l->err_rc) {
					/* the lane's read failed here in the chunk order */
					set_error(f, l->err_rc, l->err, f->ep.pgen,
						  f->prod.next_batch);
					return l->err_rc;
				}
				l->finished = true;
				f->prod.lanes_done++;
			} else {
				break; /* wait for this lane: its turn comes first */
			}
			f->prod.rr = (f->prod.rr + 1) % f->prod.nlanes;
		}
		if (f->prod.nwin == f->cfg.W || f->prod.lanes_done == f->prod.nlanes)
			return f->prod.win_pending > 0 ? 1 : 0;
		wake(f, WAKE_RD | f->wk.wake_pending); /* lane queues shrank: readers may go on */
		f->wk.wake_pending = 0;
		pthread_cond_wait(&f->cv_dec, &f->mu);
	}
}

/* Takes one record from the window (win_pending > 0). */
static struct fdr_pick window_pick(struct rc_feeder *f)
{
	uint64_t r = f->cfg.o.shuffle ? fdr__rng_below(&f->prod.rng, f->prod.win_pending) : 0;
	size_t w = 0;
	while (r >= f->prod.win[w]->remaining) {
		r -= f->prod.win[w]->remaining;
		w++;
	}
	struct fdr_chunk *c = f->prod.win[w];
	size_t first = c->nrec - c->remaining;
	struct fdr_rec tmp = c->recs[first + r];
	c->recs[first + r] = c->recs[first];
	c->recs[first] = tmp;
	c->remaining--;
	c->refs++;
	f->prod.win_pending--;
	if (c->remaining == 0) {
		memmove(&f->prod.win[w], &f->prod.win[w + 1],
			(f->prod.nwin - w - 1) * sizeof *f->prod.win);
		f->prod.nwin--;
	}
	return (struct fdr_pick){.c = c, .r = tmp};
}

/* ---- slots ------------------------------------------------------------ */

struct decode_ctx {
	struct rc_feeder *f;
	struct rc_batch *s;
	size_t row;
	int grow_rc;
};

/* Grows a slot's ragged values to hold `need` bytes, keeping `used`. */
static int ragged_grow(struct rc_feeder *f, struct fdr_ragged *rg, size_t need, size_t i)
{
	size_t ncap = rg->cap ? rg->cap : 256;
	while (ncap < need)
		ncap *= 2;
	void *nb;
	int rc = fdr__mem_alloc(f, &nb, ncap);
	if (rc)
		return rc;
	if (rg->used)
		memcpy(nb, rg->h, rg->used);
	fdr__mem_free(f, rg->h);
	rg->h = nb;
	rg->cap = ncap;
	__atomic_add_fetch(&f->st.allocs, 1, __ATOMIC_RELAXED);
	cmn_log(CMN_LOG_DEBUG, "feeder: ragged values of '%s' grow to %zu bytes",
		f->cfg.schema->feature[i].name, ncap);
	size_t hwm = __atomic_load_n(&f->ring.rag_hwm[i], __ATOMIC_RELAXED);
	while (hwm < ncap && !__atomic_compare_exchange_n(&f->ring.rag_hwm[i], &hwm, ncap, false,
							  __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	return 0;
}

static void *ragged_reserve(void *ctx, size_t feature, size_t n_values, size_t n_items)
{
	struct decode_ctx *d = ctx;
	struct rc_batch *s = d->s;
	const struct cmn_feature *ft = &d->f->cfg.schema->feature[feature];
	struct fdr_ragged *rg = &s->rag[feature];
	size_t bytes = n_values * ft->elem_size;
	int64_t *off = s->t[feature].offsets;

	(void)n_items;
	if (rg->used + bytes > rg->cap) {
		d->grow_rc = ragged_grow(d->f, rg, rg->used + bytes, feature);
		if (d->grow_rc)
			return NULL;
	}
	void *dst = rg->h + rg->used;
	rg->used += bytes;
	off[d->row + 1] = off[d->row] + (int64_t)n_values;
	return dst;
}

/* Decodes raw record bytes: the fixed features, concatenated in schema order. */
static void decode_raw(const struct cmn_schema *sc, const uint8_t *p, void *const *fixed)
{
	for (size_t i = 0; i < sc->n; i++) {
		memcpy(fixed[i], p, sc->feature[i].row_bytes);
		p += sc->feature[i].row_bytes;
	}
}

/* Copies the slot's tensors to the device on the copy stream. */
static int slot_upload(struct rc_feeder *f, struct rc_batch *s)
{
	const struct cmn_schema *sc = f->cfg.schema;
	int rc = 0;

	if (s->released_once)
		rc = fdr__cuda_stream_wait_event(f->cfg.stream, s->ev_release);
	if (!rc)
		rc = fdr__cuda_event_record(s->ev_start, f->cfg.stream);
	s->h2d_bytes = 0;
	for (size_t i = 0; !rc && i < sc->n; i++) {
		struct rc_tensor *t = &s->t[i];
		if (sc->feature[i].ragged) {
			struct fdr_ragged *rg = &s->rag[i];
			if (rg->dcap < rg->cap) {
				fdr__cuda_free(rg->d);
				rg->d = NULL;
				rg->dcap = 0;
				rc = fdr__cuda_malloc(&rg->d, rg->cap);
				if (rc)
					break;
				rg->dcap = rg->cap;
				__atomic_add_fetch(&f->st.allocs, 1, __ATOMIC_RELAXED);
			}
			t->device_data = rg->d;
			size_t ob = (s->rows + 1) * sizeof(int64_t);
			rc = fdr__cuda_h2d_async(t->device_offsets, t->offsets, ob, f->cfg.stream);
			s->h2d_bytes += ob;
		}
		if (!rc && t->nbytes)
			rc = fdr__cuda_h2d_async(t->device_data, t->data, t->nbytes, f->cfg.stream);
		s->h2d_bytes += t->nbytes;
	}
	if (!rc)
		rc = fdr__cuda_event_record(s->ev_done, f->cfg.stream);
	return rc;
}

/*
 * Decodes the slot's picked records into it and starts the device copy.
 * Runs without f->mu.  Returns 0 or -errno with a message naming the file,
 * record and feature.
 */
static int slot_decode(struct rc_feeder *f, struct rc_batch *s, char *err, size_t errlen)
{
	const struct cmn_schema *sc = f->cfg.schema;
	struct decode_ctx d = {.f = f, .s = s};
	struct cmn_ex_sink sink = {.fixed = s->fixed, .reserve = ragged_reserve, .ctx = &d};
	char msg[512];
	uint64_t bytes = 0;
	int rc;

	for (size_t i = 0; i < sc->n; i++) {
		if (!sc->feature[i].ragged)
			continue;
		struct fdr_ragged *rg = &s->rag[i];
		size_t hwm = __atomic_load_n(&f->ring.rag_hwm[i], __ATOMIC_RELAXED);
		rg->used = 0;
		if (rg->cap < hwm) { /* catch up with the largest batch seen by any slot */
			fdr__mem_free(f, rg->h);
			rg->h = NULL;
			rg->cap = 0;
			rc = ragged_grow(f, rg, hwm, i);
			if (rc) {
				snprintf(err, errlen, "out of memory growing feature '%s'",
					 sc->feature[i].name);
				return rc;
			}
		}
		s->t[i].offsets[0] = 0;
	}
	for (size_t row = 0; row < s->rows; row++) {
		const struct fdr_pick *p = &s->picks[row];
		const uint8_t *rec = p->c->buf + p->r.off;
		if (f->cfg.o.shuffle && row + 1 < s->rows) {
			/* shuffled records are scattered over the window: start the
			 * next record's first cache lines (its tags) on their way.
			 * (In order, records are contiguous and the hardware
			 * prefetcher does this; the loop only stalled on full fill
			 * buffers there.) */
			const struct fdr_pick *q = &s->picks[row + 1];
			const uint8_t *nx = q->c->buf + q->r.off;
			for (size_t k = 0; k < 4096 && k < q->r.len; k += 64)
				__builtin_prefetch(nx + k);
		}
		for (size_t i = 0; i < sc->n; i++)
			if (!sc->feature[i].ragged)
				s->fixed[i] =
				    (uint8_t *)s->t[i].data + row * sc->feature[i].row_bytes;
		if (f->cfg.o.format == RC_FORMAT_RAW) {
			decode_raw(sc, rec, s->fixed);
		} else {
			d.row = row;
			d.grow_rc = 0;
			rc = cmn_ex_decode(sc, rec, p->r.len, &sink, msg, sizeof msg);
			if (rc) {
				if (rc == -ENOBUFS && d.grow_rc)
					rc = d.grow_rc;
				snprintf(err, errlen, "%s: record %" PRIu64 ": %s",
					 s->files[p->c->file], p->r.index, msg);
				return rc;
			}
		}
		bytes += p->r.len;
	}
	for (size_t i = 0; i < sc->n; i++) {
		const struct cmn_feature *ft = &sc->feature[i];
		struct rc_tensor *t = &s->t[i];
		if (ft->ragged) {
			t->data = s->rag[i].h;
			t->shape[0] = t->offsets[s->rows];
			t->nbytes = s->rag[i].used;
		} else {
			t->shape[0] = (int64_t)s->rows;
			t->nbytes = s->rows * ft->row_bytes;
		}
	}
	__atomic_add_fetch(&f->st.records, s->rows, __ATOMIC_RELAXED);
	__atomic_add_fetch(&f->st.record_bytes, bytes, __ATOMIC_RELAXED);
	if (f->cfg.device >= 0) {
		/* one slot's [start, copies, done] stay contiguous on the stream,
		 * so its event interval times only its own copies */
		pthread_mutex_lock(&f->copy_mu);
		rc = slot_upload(f, s);
		pthread_mutex_unlock(&f->copy_mu);
		if (rc) {
			snprintf(err, errlen, "copy to cuda:%d failed: %s", f->cfg.device,
				 fdr__cuda_last_error());
			return rc;
		}
	}
	return 0;
}

/* ---- worker threads ----------------------------------------------------- */

static struct fdr_lane *reader_pick_lane(struct rc_feeder *f)
{
	if (!f->prod.free_chunks)
		return NULL;
	/* the lane the window waits for first, then any other */
	for (size_t k = 0; k < f->prod.nlanes; k++) {
		struct fdr_lane *l = &f->prod.lanes[(f->prod.rr + k) % f->prod.nlanes];
		if (!l->busy && !l->done && !l->finished && l->qn < f->cfg.ra)
			return l;
	}
	return NULL;
}

static void *reader_main(void *arg)
{
	struct rc_feeder *f = arg;
	char err[1024];

	if (f->cfg.device >= 0)
		(void)fdr__cuda_set_device(f->cfg.device, NULL);
	pthread_mutex_lock(&f->mu);
	for (;;) {
		struct fdr_lane *l = NULL;
		while (!f->wk.stop && (f->wk.paused || f->ep.errs[f->ep.pgen & 1].rc ||
				       !(l = reader_pick_lane(f))))
			pthread_cond_wait(&f->cv_rd, &f->mu);
		if (f->wk.stop)
			break;
		struct fdr_chunk *c = f->prod.free_chunks;
		f->prod.free_chunks = c->next;
		c->next = NULL;
		l->busy = true;
		f->wk.active++;
		pthread_mutex_unlock(&f->mu);

		int rc = fdr__lane_fill(f, l, c, err, sizeof err);

		pthread_mutex_lock(&f->mu);
		f->wk.active--;
		l->busy = false;
		if (rc <= 0) {
			if (rc < 0) { /* reported when the window reaches this lane */
				l->err_rc = rc;
				snprintf(l->err, sizeof l->err, "%s", err);
			}
			l->done = true;
			chunk_put_free(f, c);
		} else {
			if (l->qt)
				l->qt->next = c;
			else
				l->qh = c;
			l->qt = c;
			l->qn++;
		}
		/* the window waits for lanes; other readers for the lane and
		 * free chunks; a pause (the consumer) for active == 0 */
		unlock_wake(f, WAKE_DEC | WAKE_RD | (f->wk.paused || f->wk.stop ? WAKE_CONS : 0));
		pthread_mutex_lock(&f->mu);
	}
	pthread_mutex_unlock(&f->mu);
	return NULL;
}

static struct rc_batch *free_slot(struct rc_feeder *f)
{
	for (size_t i = 0; i < f->cfg.S; i++)
		if (f->ring.slots[i].state == SLOT_FREE)
			return &f->ring.slots[i];
	return NULL;
}

static void producer_advance(struct rc_feeder *f);

/* Production of pgen is complete with `total` batches; f->mu held. */
static void production_done(struct rc_feeder *f, uint64_t total)
{
	f->prod.produced_all = true;
	if (f->ep.pgen == f->ep.gen) {
		f->ep.cons_done = true;
		f->ep.cons_total = total;
	} else {
		f->ep.ahead_done = true;
		f->ep.ahead_total = total;
	}
}

/* The slot's file list is done with; f->mu held. */
static void decode_finished(struct rc_feeder *f, struct rc_batch *s)
{
	f->ep.decoding--;
	if (s->files != f->ep.files && f->ep.old_decoding && --f->ep.old_decoding == 0) {
		fdr__files_free(f->ep.files_old, f->ep.nfiles_old);
		f->ep.files_old = NULL;
		f->ep.nfiles_old = 0;
	}
}

static void *decoder_main(void *arg)
{
	struct rc_feeder *f = arg;
	char err[1024];

	if (f->cfg.device >= 0)
		(void)fdr__cuda_set_device(f->cfg.device, NULL);
	pthread_mutex_lock(&f->mu);
	for (;;) {
		struct rc_batch *s = NULL;
		while (!f->wk.stop &&
		       (f->wk.paused || f->ep.errs[f->ep.pgen & 1].rc || f->ep.advancing ||
			(f->prod.produced_all && !(f->cfg.prefetch && f->ep.pgen == f->ep.gen)) ||
			(!f->prod.produced_all && (f->prod.assembling || !(s = free_slot(f))))))
			pthread_cond_wait(&f->cv_dec, &f->mu);
		if (f->wk.stop)
			break;
		if (f->prod.produced_all) {
			/* the consumer's epoch is produced: start the next one */
			producer_advance(f);
			continue;
		}
		f->prod.assembling = true;
		f->wk.active++;
		s->state = SLOT_FILLING;
		uint32_t gen = f->ep.pgen;
		size_t rows = 0;
		int rc = 0;
		while (rows < f->cfg.B) {
			rc = window_topup(f);
			if (rc <= 0)
				break;
			s->picks[rows++] = window_pick(f);
		}
		f->prod.assembling = false;
		if (rc < 0 || (rc == 0 && (rows == 0 || (rows < f->cfg.B && f->cfg.o.drop_last)))) {
			/* aborted, failed, or nothing (more) to hand out */
			picks_drop(f, s, rows);
			s->state = SLOT_FREE;
			if (rc == 0)
				production_done(f, f->prod.next_batch);
			f->wk.active--;
			unlock_wake(f, WAKE_ALL);
			pthread_mutex_lock(&f->mu);
			continue;
		}
		if (rc == 0) /* a last, short batch */
			production_done(f, f->prod.next_batch + 1);
		/* the next assembly may start; the end of production concerns all */
		s->rows = rows;
		s->index = f->prod.next_batch++;
		s->epoch = f->ep.pepoch;
		s->gen = gen;
		s->files = f->ep.files;
		f->ep.decoding++;
		unlock_wake(f, rc == 0 ? WAKE_ALL : WAKE_DEC);

		rc = slot_decode(f, s, err, sizeof err);

		pthread_mutex_lock(&f->mu);
		picks_drop(f, s, rows);
		decode_finished(f, s);
		f->wk.active--;
		if (rc) {
			set_error(f, rc, err, s->gen, s->index);
			s->state = SLOT_FREE;
		} else if (s->gen != f->ep.gen && s->gen != f->ep.pgen) {
			s->state = SLOT_FREE; /* the consumer left that epoch meanwhile */
		} else {
			s->state = SLOT_READY;
		}
		/* the consumer: a ready slot (or active == 0 for a pause); readers:
		 * chunks the batch freed; decoders only when a slot came free, an
		 * error stops them, or an advance waits for old_decoding */
		unlock_wake(
		    f,
		    WAKE_CONS | WAKE_RD |
			(s->state == SLOT_FREE || f->ep.advancing || f->wk.paused ? WAKE_DEC : 0));
		pthread_mutex_lock(&f->mu);
	}
	pthread_mutex_unlock(&f->mu);
	return NULL;
}

/* ---- epochs --------------------------------------------------------------- */

/* Pauses the workers and waits until none works outside the lock; f->mu held. */
static void pause_workers(struct rc_feeder *f)
{
	f->wk.paused = true;
	wake(f, WAKE_ALL);
	while (f->wk.active)
		pthread_cond_wait(&f->cv_cons, &f->mu);
}

/*
 * Points the producer at the start of epoch pepoch over f->ep.files: lanes,
 * window, shuffle state.  f->mu held; every lane finished (or the workers
 * paused); chunks pinned by batches being decoded are left alone.
 */
static void producer_reset(struct rc_feeder *f)
{
	size_t want_lanes = f->cfg.o.interleave;
	if (want_lanes > f->ep.nfiles)
		want_lanes = f->ep.nfiles ? f->ep.nfiles : 1;
	for (size_t i = 0; i < f->cfg.o.interleave; i++) {
		struct fdr_lane *l = &f->prod.lanes[i];
		if (l->open)
			fdr__lane_reset(l);
		*l = (struct fdr_lane){.id = (uint32_t)i, .fd = -1};
	}
	f->prod.nlanes = want_lanes;
	f->prod.lanes_done = 0;
	f->prod.nwin = 0;
	f->prod.win_pending = 0;
	f->prod.rr = 0;
	f->prod.rng = f->cfg.o.seed * 0x9e3779b97f4a7c15ull + f->ep.pepoch + 1;
	f->prod.assembling = false;
	f->prod.produced_all = false;
	f->ep.ahead_done = false;
	f->prod.next_batch = 0;
}

/*
 * Resets the whole pipeline for epoch f->ep.epoch over f->ep.files; workers
 * paused (nothing in flight), f->mu held.  Held slots stay held; everything
 * else returns to the pools.
 */
static void epoch_reset(struct rc_feeder *f)
{
	for (size_t i = 0; i < f->cfg.nchunks; i++) {
		f->prod.chunks[i].next = NULL;
		f->prod.chunks[i].refs = 0;
	}
	f->prod.free_chunks = NULL;
	/* chunks with buffers end on top of the (LIFO) free list, so that
	 * unused ones are only taken when more chunks are in flight than ever */
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < f->cfg.nchunks; i++)
			if ((f->prod.chunks[i].buf != NULL) == (pass == 1))
				chunk_put_free(f, &f->prod.chunks[i]);
	fdr__files_free(f->ep.files_old, f->ep.nfiles_old);
	f->ep.files_old = NULL;
	f->ep.nfiles_old = 0;
	f->ep.decoding = f->ep.old_decoding = 0;
	for (size_t i = 0; i < f->cfg.S; i++)
		if (f->ring.slots[i].state != SLOT_HELD)
			f->ring.slots[i].state = SLOT_FREE;
	f->ep.gen++;
	f->ep.pgen = f->ep.gen;
	f->ep.pepoch = f->ep.epoch;
	producer_reset(f);
	f->ring.next_out = 0;
	f->ep.cons_done = false;
	f->ep.cons_total = 0;
	memset(f->ep.errs, 0, sizeof f->ep.errs);
}

/* Lists (and shuffles) the files of `epoch`.  Takes no lock. */
static int list_epoch_files(struct rc_feeder *f, uint64_t epoch, char ***files, size_t *n,
			    char *err, size_t errlen)
{
	int rc = fdr__files_list(f->cfg.path, (const char *const *)f->cfg.paths, f->cfg.o.n_paths,
				 f->cfg.o.rank, f->cfg.o.world_size, files, n, err, errlen);
	if (rc)
		return rc;
	if (f->cfg.o.shuffle)
		fdr__files_shuffle(*files, *n, f->cfg.o.seed + epoch);
	return 0;
}

/*
 * Starts producing epoch pepoch + 1 while the consumer still reads pgen
 * (plain directories, globs and lists; never in a rollcache mount, whose
 * next epoch exists only after the consumer advanced it).  Called by a
 * decoder with f->mu held; drops it while listing.  Counts as active, so
 * rc_feeder_next_epoch's pause waits for it.
 */
static void producer_advance(struct rc_feeder *f)
{
	char err[1024];
	char **files = NULL;
	size_t n = 0;
	uint64_t ep = f->ep.pepoch + 1;

	f->ep.advancing = true;
	f->wk.active++;
	pthread_mutex_unlock(&f->mu);
	int rc = list_epoch_files(f, ep, &files, &n, err, sizeof err);
	pthread_mutex_lock(&f->mu);
	/* the list before the current one may still name records being decoded */
	while (f->ep.old_decoding > 0 && !f->wk.stop)
		pthread_cond_wait(&f->cv_dec, &f->mu);
	if (f->wk.stop) {
		fdr__files_free(files, n);
	} else {
		fdr__files_free(f->ep.files_old, f->ep.nfiles_old);
		f->ep.files_old = f->ep.files;
		f->ep.nfiles_old = f->ep.nfiles;
		f->ep.old_decoding = f->ep.decoding;
		if (f->ep.old_decoding == 0) {
			fdr__files_free(f->ep.files_old, f->ep.nfiles_old);
			f->ep.files_old = NULL;
			f->ep.nfiles_old = 0;
		}
		f->ep.files = rc ? NULL : files;
		f->ep.nfiles = rc ? 0 : n;
		f->ep.pgen++;
		f->ep.pepoch = ep;
		producer_reset(f);
		if (rc)
			set_error(f, rc, err, f->ep.pgen, 0);
	}
	f->ep.advancing = false;
	f->wk.active--;
	wake(f, WAKE_ALL);
}

/* The consumer moves to the epoch the producer runs ahead on; f->mu held. */
static void consumer_switch(struct rc_feeder *f)
{
	f->ep.gen = f->ep.pgen;
	f->ep.epoch = f->ep.pepoch;
	f->ring.next_out = 0;
	f->ep.cons_done = f->ep.ahead_done;
	f->ep.cons_total = f->ep.ahead_total;
	f->ep.ahead_done = false;
	for (size_t i = 0; i < f->cfg.S; i++)
		if (f->ring.slots[i].state == SLOT_READY && f->ring.slots[i].gen != f->ep.gen)
			f->ring.slots[i].state = SLOT_FREE;
	f->ep.errs[(f->ep.gen + 1) & 1].rc = 0; /* the epoch left behind */
	wake(f, WAKE_ALL);
}

/* Closes every lane's file; workers paused. */
static void lanes_close(struct rc_feeder *f)
{
	size_t cap = f->cfg.o.interleave;
	for (size_t i = 0; i < cap; i++)
		if (f->prod.lanes[i].open)
			fdr__lane_reset(&f->prod.lanes[i]);
}

int rc_feeder_next_epoch(struct rc_feeder *f)
{
	char err[1024];
	char **files = NULL;
	size_t n = 0;
	int rc = 0;

	pthread_mutex_lock(&f->mu);
	while (f->ep.advancing)
		pthread_cond_wait(&f->cv_cons, &f->mu);
	if (f->ep.pgen != f->ep.gen) { /* already produced ahead: just switch */
		consumer_switch(f);
		pthread_mutex_unlock(&f->mu);
		return 0;
	}
	pause_workers(f);
	if (f->ep.pgen != f->ep.gen) {
		/* an advance completed while pausing; the pause may have cut an
		 * assembly of that epoch short, so restart it from its start */
		f->ep.epoch = f->ep.pepoch;
		epoch_reset(f);
		f->wk.paused = false;
		wake(f, WAKE_ALL);
		pthread_mutex_unlock(&f->mu);
		return 0;
	}
	pthread_mutex_unlock(&f->mu);

	lanes_close(f);
	if (f->cfg.control[0]) {
		rc = fdr__advance_cache(f->cfg.control, err, sizeof err);
		if (rc)
			cmn_log(CMN_LOG_WARN, "feeder: cannot advance the cache: %s", err);
		rc = 0; /* the data of the current epoch can still be read */
	}
	rc = list_epoch_files(f, f->ep.epoch + 1, &files, &n, err, sizeof err);

	pthread_mutex_lock(&f->mu);
	f->ep.epoch++;
	fdr__files_free(f->ep.files, f->ep.nfiles);
	f->ep.files = rc ? NULL : files;
	f->ep.nfiles = rc ? 0 : n;
	epoch_reset(f);
	if (rc)
		set_error(f, rc, err, f->ep.gen, 0);
	f->wk.paused = false;
	wake(f, WAKE_ALL);
	pthread_mutex_unlock(&f->mu);
	return rc;
}

/* ---- public API ----------------------------------------------------------- */

void rc_feeder_opts_init(struct rc_feeder_opts *o)
{
	memset(o, 0, sizeof *o);
	o->abi = RC_FEEDER_ABI;
	o->verify_crc = true;
	o->world_size = 1;
	o->device = -1;
	o->pin = -1;
}

static int setup_cuda(struct rc_feeder *f, char *err, size_t errlen)
{
	int n = 0;
	char why[256];
	int rc = 0;

	f->cfg.device = -1;
	f->cfg.pinned = false;
	if (f->cfg.o.device < 0 && f->cfg.o.pin == 0)
		return 0;
	rc = fdr__cuda_devices(&n, why, sizeof why);
	if (rc && f->cfg.o.device < 0 && f->cfg.o.pin < 0) {
		/* host mode, pin auto: no usable CUDA device, plain memory */
		cmn_log(CMN_LOG_DEBUG, "feeder: host slots not pinned: %s", why);
		return 0;
	}
	if (rc) {
		snprintf(err, errlen, "%s%d: %s",
			 f->cfg.o.device >= 0 ? "device cuda:" : "pinned memory, device ",
			 f->cfg.o.device, why);
		return rc;
	}
	int dev = f->cfg.o.device >= 0 ? f->cfg.o.device : 0;
	if (dev >= n) {
		snprintf(err, errlen, "device cuda:%d: only %d CUDA device(s)", dev, n);
		return -ENODEV;
	}
	rc = fdr__cuda_set_device(dev, NULL);
	if (rc) {
		snprintf(err, errlen, "device cuda:%d: %s", dev, fdr__cuda_last_error());
		return rc;
	}
	f->cfg.pinned = f->cfg.o.pin != 0;
	if (f->cfg.o.device >= 0) {
		f->cfg.device = dev;
		rc = fdr__cuda_stream_create(&f->cfg.stream);
		if (rc) {
			snprintf(err, errlen, "device cuda:%d: stream: %s", dev,
				 fdr__cuda_last_error());
			return rc;
		}
	}
	return 0;
}

static void slot_free(struct rc_feeder *f, struct rc_batch *s)
{
	const struct cmn_schema *sc = f->cfg.schema;
	if (s->rag)
		for (size_t i = 0; i < sc->n; i++) {
			fdr__mem_free(f, s->rag[i].h);
			fdr__cuda_free(s->rag[i].d);
		}
	fdr__mem_free(f, s->host);
	if (f->cfg.device >= 0) {
		fdr__cuda_free(s->dev);
		fdr__cuda_event_destroy(s->ev_done);
		fdr__cuda_event_destroy(s->ev_start);
		fdr__cuda_event_destroy(s->ev_release);
	}
	free(s->rag);
	free(s->t);
	free(s->fixed);
	free(s->picks);
}

static int slot_init(struct rc_feeder *f, struct rc_batch *s)
{
	const struct cmn_schema *sc = f->cfg.schema;
	int rc;

	s->f = f;
	s->picks = calloc(f->cfg.B, sizeof *s->picks);
	s->t = calloc(sc->n, sizeof *s->t);
	s->rag = calloc(sc->n, sizeof *s->rag);
	s->fixed = calloc(sc->n, sizeof *s->fixed);
	if (!s->picks || !s->t || !s->rag || !s->fixed)
		return -ENOMEM;
	rc = fdr__mem_alloc(f, (void **)&s->host, f->cfg.block_len);
	if (rc)
		return rc;
	if (f->cfg.device >= 0) {
		rc = fdr__cuda_malloc(&s->dev, f->cfg.block_len);
		if (!rc)
			rc = fdr__cuda_event_create(&s->ev_done, 1);
		if (!rc)
			rc = fdr__cuda_event_create(&s->ev_start, 1);
		if (!rc)
			rc = fdr__cuda_event_create(&s->ev_release, 0);
		if (rc)
			return rc;
	}
	for (size_t i = 0; i < sc->n; i++) {
		const struct cmn_feature *ft = &sc->feature[i];
		struct rc_tensor *t = &s->t[i];
		t->name = ft->name;
		t->dtype = (int32_t)ft->dtype; /* enum cmn_dtype and enum rc_dtype agree */
		t->device = f->cfg.device;
		if (ft->ragged) {
			t->ragged = 1;
			t->ndim = 1;
			t->offsets = (int64_t *)(s->host + f->cfg.fixed_off[i]);
			if (f->cfg.device >= 0)
				t->device_offsets =
				    (int64_t *)((uint8_t *)s->dev + f->cfg.fixed_off[i]);
			rc = ragged_grow(
			    f, &s->rag[i],
			    f->cfg.B * (f->cfg.o.ragged_hint ? f->cfg.o.ragged_hint : 256), i);
			if (rc)
				return rc;
			t->data = s->rag[i].h;
		} else {
			t->ndim = (int32_t)ft->ndims + 1;
			for (unsigned k = 0; k < ft->ndims; k++)
				t->shape[k + 1] = (int64_t)ft->dims[k];
			t->data = s->host + f->cfg.fixed_off[i];
			if (f->cfg.device >= 0)
				t->device_data = (uint8_t *)s->dev + f->cfg.fixed_off[i];
		}
	}
	return 0;
}

_Static_assert((int)CMN_DT_FLOAT32 == (int)RC_DT_FLOAT32 && (int)CMN_DT_INT64 == (int)RC_DT_INT64 &&
		   (int)CMN_DT_UINT8 == (int)RC_DT_UINT8 && (int)CMN_DT_BYTES == (int)RC_DT_BYTES,
	       "public and schema dtypes must agree");

/*
 * Decoder threads when the options say 0: two, but no more than the CPUs
 * left beside the readers (at least one), so that readers, decoders and the
 * consumer do not outnumber the cores and pay for context switches.
 */
static size_t default_decoders(size_t nreaders)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	if (ncpu <= 0 || (size_t)ncpu >= nreaders + 2)
		return 2;
	return 1;
}

static char *dup_or_null(const char *s, bool *oom)
{
	if (!s)
		return NULL;
	char *d = strdup(s);
	if (!d)
		*oom = true;
	return d;
}

struct rc_feeder *rc_feeder_open(const struct rc_feeder_opts *o, char *err, size_t errlen)
{
	struct rc_feeder *f;
	bool oom = false;
	int rc;

	if (!o || o->abi != RC_FEEDER_ABI) {
		snprintf(err, errlen,
			 "rc_feeder_opts: call rc_feeder_opts_init() first (abi %u, want %u)",
			 o ? o->abi : 0, RC_FEEDER_ABI);
		return NULL;
	}
	if (!o->schema || !*o->schema) {
		snprintf(err, errlen, "no schema given (e.g. \"x:float32[3],y:int64\")");
		return NULL;
	}
	if (o->batch_size == 0) {
		snprintf(err, errlen, "batch_size must be at least 1");
		return NULL;
	}
	if (!o->path && (!o->paths || !o->n_paths)) {
		snprintf(err, errlen,
			 "no input: give a directory, a glob, a file or a list of files");
		return NULL;
	}
	uint32_t world = o->world_size ? o->world_size : 1;
	if (o->rank >= world) {
		snprintf(err, errlen, "rank %u out of range for world_size %u", o->rank, world);
		return NULL;
	}
	if (o->format != RC_FORMAT_TFRECORD && o->format != RC_FORMAT_RAW) {
		snprintf(err, errlen, "format %d: expected tfrecord (0) or raw (1)", o->format);
		return NULL;
	}
	f = calloc(1, sizeof *f);
	if (!f) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&f->mu, NULL);
	pthread_mutex_init(&f->copy_mu, NULL);
	pthread_cond_init(&f->cv_cons, NULL);
	pthread_cond_init(&f->cv_rd, NULL);
	pthread_cond_init(&f->cv_dec, NULL);
	f->cfg.device = -1;
	f->cfg.o = *o;
	f->cfg.o.world_size = world;
	f->cfg.path = dup_or_null(o->path, &oom);
	f->cfg.schema_str = dup_or_null(o->schema, &oom);
	if (!o->path) {
		f->cfg.paths = calloc(o->n_paths, sizeof *f->cfg.paths);
		oom |= !f->cfg.paths;
		for (size_t i = 0; f->cfg.paths && i < o->n_paths; i++)
			f->cfg.paths[i] = dup_or_null(o->paths[i], &oom);
	}
	f->cfg.o.path = f->cfg.path;
	f->cfg.o.schema = f->cfg.schema_str;
	f->cfg.o.paths = (const char *const *)f->cfg.paths;
	if (oom) {
		snprintf(err, errlen, "out of memory");
		goto fail_free;
	}
	rc = cmn_schema_parse(o->schema, &f->cfg.schema, err, errlen);
	if (rc)
		goto fail_free;
	const struct cmn_schema *sc = f->cfg.schema;
	if (o->format == RC_FORMAT_RAW) {
		if (sc->n_ragged) {
			snprintf(err, errlen,
				 "raw format: every feature needs a fixed shape (no [] or bytes)");
			goto fail_free;
		}
		f->cfg.raw_size = sc->fixed_row_bytes;
	}
	f->cfg.B = o->batch_size;
	f->cfg.S = o->ring_slots ? o->ring_slots : 4;
	f->cfg.read_size = o->read_size ? o->read_size : ((size_t)4 << 20);
	if (f->cfg.read_size < 4096)
		f->cfg.read_size = 4096;
	f->cfg.W = o->shuffle ? (o->shuffle_window ? o->shuffle_window : 8) : 1;
	f->cfg.o.interleave = o->interleave ? o->interleave : (o->shuffle ? 4 : 1);
	f->cfg.ra = READAHEAD;
	/*
	 * Enough chunks that the lane the window waits for always gets one:
	 * the others can hold at most W (window) + (lanes - 1) * ra (queued)
	 * + B - 1 (drained chunks pinned by the batch being assembled); chunks
	 * pinned by batches being decoded come back without waiting.  Buffers
	 * are allocated on first use, so unused chunks cost a few bytes.
	 */
	f->cfg.nchunks = f->cfg.W + f->cfg.o.interleave * f->cfg.ra + f->cfg.B + 2;
	f->cfg.fixed_off = calloc(sc->n, sizeof *f->cfg.fixed_off);
	f->ring.rag_hwm = calloc(sc->n, sizeof *f->ring.rag_hwm);
	if (!f->cfg.fixed_off || !f->ring.rag_hwm) {
		snprintf(err, errlen, "out of memory");
		goto fail_free;
	}
	for (size_t i = 0; i < sc->n; i++) {
		f->cfg.fixed_off[i] = f->cfg.block_len;
		if (sc->feature[i].ragged)
			f->cfg.block_len += align64((f->cfg.B + 1) * sizeof(int64_t));
		else
			f->cfg.block_len += align64(f->cfg.B * sc->feature[i].row_bytes);
	}

	rc = fdr__files_list(f->cfg.path, (const char *const *)f->cfg.paths, o->n_paths, o->rank,
			     world, &f->ep.files, &f->ep.nfiles, err, errlen);
	if (rc)
		goto fail_free;
	if (fdr__find_control(f->cfg.path, f->ep.nfiles ? f->ep.files[0] : NULL, f->cfg.control,
			      sizeof f->cfg.control))
		f->cfg.control[0] = '\0';
	if (o->shuffle)
		fdr__files_shuffle(f->ep.files, f->ep.nfiles, o->seed);

	rc = setup_cuda(f, err, errlen);
	if (rc)
		goto fail_free;

	f->prod.chunks = calloc(f->cfg.nchunks, sizeof *f->prod.chunks);
	f->prod.lanes = calloc(f->cfg.o.interleave, sizeof *f->prod.lanes);
	f->prod.win = calloc(f->cfg.W, sizeof *f->prod.win);
	f->ring.slots = calloc(f->cfg.S, sizeof *f->ring.slots);
	if (!f->prod.chunks || !f->prod.lanes || !f->prod.win || !f->ring.slots) {
		snprintf(err, errlen, "out of memory");
		goto fail_free;
	}
	for (size_t i = 0; i < f->cfg.o.interleave; i++)
		f->prod.lanes[i].fd = -1;
	/* the chunks normally in flight get their buffers now (see reader.c) */
	size_t nreaders = o->readers ? o->readers : 1;
	size_t ndecoders = o->threads ? o->threads : default_decoders(nreaders);
	size_t warm = f->cfg.W + f->cfg.o.interleave * f->cfg.ra + 2 * (ndecoders + 1) + 1;
	for (size_t i = 0; i < warm && i < f->cfg.nchunks; i++) {
		struct fdr_chunk *c = &f->prod.chunks[i];
		if (fdr__chunk_reserve(f, c, FDR_CHUNK_CAP(f), 0)) {
			snprintf(err, errlen, "out of memory for %zu read chunks of %zu bytes",
				 warm, FDR_CHUNK_CAP(f));
			goto fail_free;
		}
		c->rec_cap = FDR_CHUNK_RECS(f);
		c->recs = malloc(c->rec_cap * sizeof *c->recs);
		if (!c->recs) {
			snprintf(err, errlen, "out of memory");
			goto fail_free;
		}
	}
	for (size_t i = 0; i < f->cfg.S; i++) {
		rc = slot_init(f, &f->ring.slots[i]);
		if (rc) {
			snprintf(err, errlen, "allocating %zu ring slots of %zu bytes%s: %s",
				 f->cfg.S, f->cfg.block_len, f->cfg.pinned ? " (pinned)" : "",
				 f->cfg.device >= 0 || f->cfg.pinned ? fdr__cuda_last_error()
								     : strerror(-rc));
			goto fail_free;
		}
	}
	f->cfg.prefetch = f->cfg.control[0] == '\0';
	f->ep.epoch = 0;
	epoch_reset(f);
	f->st.allocs = 0; /* count from here: steady state */

	f->wk.threads = calloc(nreaders + ndecoders, sizeof *f->wk.threads);
	if (!f->wk.threads) {
		snprintf(err, errlen, "out of memory");
		goto fail_free;
	}
	for (size_t i = 0; i < nreaders + ndecoders; i++) {
		rc = pthread_create(&f->wk.threads[i], NULL,
				    i < nreaders ? reader_main : decoder_main, f);
		if (rc) {
			snprintf(err, errlen, "starting feeder threads: %s", strerror(rc));
			rc_feeder_close(f);
			return NULL;
		}
		f->wk.nthreads++;
	}
	f->cfg.nreaders = nreaders;
	return f;

fail_free:
	rc_feeder_close(f);
	return NULL;
}

int rc_feeder_next(struct rc_feeder *f, struct rc_batch **out)
{
	uint64_t t0 = now_ns();
	struct rc_batch *s = NULL;
	struct timespec dl = {0};
	bool busy_deadline = false;
	int rc;

	pthread_mutex_lock(&f->mu);
	for (;;) {
		for (size_t i = 0; i < f->cfg.S; i++) {
			struct rc_batch *c = &f->ring.slots[i];
			if (c->state == SLOT_READY && c->gen == f->ep.gen &&
			    c->index == f->ring.next_out) {
				s = c;
				break;
			}
		}
		if (s) {
			s->state = SLOT_HELD;
			f->ring.next_out++;
			rc = 1;
			break;
		}
		struct fdr_err *e = &f->ep.errs[f->ep.gen & 1];
		if (e->rc && f->ring.next_out >= e->batch) {
			rc = e->rc;
			snprintf(f->ring.err_out, sizeof f->ring.err_out, "%s", e->msg);
			break;
		}
		if (f->ep.cons_done && f->ring.next_out >= f->ep.cons_total) {
			rc = 0;
			break;
		}
		size_t held = 0;
		for (size_t i = 0; i < f->cfg.S; i++)
			held += f->ring.slots[i].state == SLOT_HELD;
		if (held == f->cfg.S) {
			/* only a release (maybe from another thread) can help */
			if (!busy_deadline) {
				uint32_t ms =
				    f->cfg.o.busy_timeout_ms ? f->cfg.o.busy_timeout_ms : 10000;
				clock_gettime(CLOCK_REALTIME, &dl);
				dl.tv_sec += ms / 1000;
				dl.tv_nsec += (long)(ms % 1000) * 1000000L;
				if (dl.tv_nsec >= 1000000000L) {
					dl.tv_sec++;
					dl.tv_nsec -= 1000000000L;
				}
				busy_deadline = true;
			}
			if (pthread_cond_timedwait(&f->cv_cons, &f->mu, &dl) == ETIMEDOUT) {
				rc = -EBUSY;
				snprintf(f->ring.err_out, sizeof f->ring.err_out,
					 "all %zu ring slots are held: release batches (or raise "
					 "ring_slots)",
					 f->cfg.S);
				break;
			}
			continue;
		}
		busy_deadline = false;
		pthread_cond_wait(&f->cv_cons, &f->mu);
	}
	/* taking a slot concerns no other thread: no wake-up */
	pthread_mutex_unlock(&f->mu);

	if (s && f->cfg.device >= 0) {
		float ms = 0;
		rc = fdr__cuda_event_sync(s->ev_done);
		if (!rc && !fdr__cuda_event_elapsed_ms(s->ev_start, s->ev_done, &ms))
			__atomic_add_fetch(&f->st.h2d_ns, (uint64_t)(ms * 1e6), __ATOMIC_RELAXED);
		__atomic_add_fetch(&f->st.h2d_bytes, s->h2d_bytes, __ATOMIC_RELAXED);
		if (rc) {
			snprintf(f->ring.err_out, sizeof f->ring.err_out,
				 "copy to cuda:%d failed: %s", f->cfg.device,
				 fdr__cuda_last_error());
			rc_batch_release(s);
			s = NULL;
		} else {
			rc = 1;
		}
	}
	__atomic_add_fetch(&f->st.wait_ns, now_ns() - t0, __ATOMIC_RELAXED);
	if (rc == 1) {
		__atomic_add_fetch(&f->st.batches, 1, __ATOMIC_RELAXED);
		*out = s;
	}
	return rc;
}

uint64_t rc_batch_rows(const struct rc_batch *b)
{
	return b->rows;
}

uint64_t rc_batch_epoch(const struct rc_batch *b)
{
	return b->epoch;
}

uint64_t rc_batch_index(const struct rc_batch *b)
{
	return b->index;
}

const struct rc_tensor *rc_batch_get(const struct rc_batch *b, const char *name)
{
	if (!b || !name)
		return NULL;
	int i = cmn_schema_find(b->f->cfg.schema, name, strlen(name));
	return i < 0 ? NULL : &b->t[i];
}

size_t rc_batch_count(const struct rc_batch *b)
{
	return b ? b->f->cfg.schema->n : 0;
}

const struct rc_tensor *rc_batch_at(const struct rc_batch *b, size_t i)
{
	return b && i < b->f->cfg.schema->n ? &b->t[i] : NULL;
}

void rc_batch_release(struct rc_batch *b)
{
	if (!b)
		return;
	struct rc_feeder *f = b->f;
	if (f->cfg.device >= 0) {
		int prev = -1;
		/* the slot's next copy waits for what the consumer queued so far */
		if (!fdr__cuda_set_device(f->cfg.device, &prev) &&
		    !fdr__cuda_event_record(b->ev_release, f->cfg.o.consumer_stream))
			b->released_once = true;
		if (prev >= 0 && prev != f->cfg.device)
			(void)fdr__cuda_set_device(prev, NULL);
	}
	pthread_mutex_lock(&f->mu);
	b->state = SLOT_FREE;
	unlock_wake(f, WAKE_DEC | WAKE_CONS); /* a free slot; a consumer held up by a full ring */
}

uint64_t rc_feeder_epoch(const struct rc_feeder *f)
{
	return f->ep.epoch;
}

const char *rc_feeder_error(const struct rc_feeder *f)
{
	return f->ring.err_out;
}

void rc_feeder_stats(const struct rc_feeder *f, struct rc_feeder_stats *o)
{
	memset(o, 0, sizeof *o);
	o->records = __atomic_load_n(&f->st.records, __ATOMIC_RELAXED);
	o->batches = __atomic_load_n(&f->st.batches, __ATOMIC_RELAXED);
	o->bytes_read = __atomic_load_n(&f->st.bytes_read, __ATOMIC_RELAXED);
	o->record_bytes = __atomic_load_n(&f->st.record_bytes, __ATOMIC_RELAXED);
	o->wait_ns = __atomic_load_n(&f->st.wait_ns, __ATOMIC_RELAXED);
	o->h2d_bytes = __atomic_load_n(&f->st.h2d_bytes, __ATOMIC_RELAXED);
	o->h2d_ns = __atomic_load_n(&f->st.h2d_ns, __ATOMIC_RELAXED);
	o->allocations = __atomic_load_n(&f->st.allocs, __ATOMIC_RELAXED);
	pthread_mutex_lock((pthread_mutex_t *)&f->mu); /* nfiles changes at an advance */
	o->files = (uint32_t)f->ep.nfiles;
	pthread_mutex_unlock((pthread_mutex_t *)&f->mu);
	o->device = f->cfg.device;
	o->pinned = f->cfg.pinned;
}

void rc_feeder_close(struct rc_feeder *f)
{
	if (!f)
		return;
	if (f->wk.threads) {
		pthread_mutex_lock(&f->mu);
		f->wk.stop = true;
		wake(f, WAKE_ALL);
		pthread_mutex_unlock(&f->mu);
		for (size_t i = 0; i < f->wk.nthreads; i++)
			pthread_join(f->wk.threads[i], NULL);
		free(f->wk.threads);
	}
	if (f->prod.lanes) {
		lanes_close(f);
		free(f->prod.lanes);
	}
	if (f->ring.slots) {
		if (f->cfg.device >= 0 && f->cfg.stream)
			(void)fdr__cuda_stream_sync(f->cfg.stream);
		for (size_t i = 0; i < f->cfg.S; i++)
			slot_free(f, &f->ring.slots[i]);
		free(f->ring.slots);
	}
	if (f->prod.chunks) {
		for (size_t i = 0; i < f->cfg.nchunks; i++) {
			free(f->prod.chunks[i].buf);
			free(f->prod.chunks[i].recs);
		}
		free(f->prod.chunks);
	}
	if (f->cfg.stream)
		fdr__cuda_stream_destroy(f->cfg.stream);
	free(f->prod.win);
	free(f->cfg.fixed_off);
	free(f->ring.rag_hwm);
	fdr__files_free(f->ep.files, f->ep.nfiles);
	fdr__files_free(f->ep.files_old, f->ep.nfiles_old);
	cmn_schema_free(f->cfg.schema);
	for (size_t i = 0; f->cfg.paths && i < f->cfg.o.n_paths; i++)
		free(f->cfg.paths[i]);
	free(f->cfg.paths);
	free(f->cfg.path);
	free(f->cfg.schema_str);
	pthread_mutex_destroy(&f->mu);
	pthread_mutex_destroy(&f->copy_mu);
	pthread_cond_destroy(&f->cv_cons);
	pthread_cond_destroy(&f->cv_rd);
	pthread_cond_destroy(&f->cv_dec);
	free(f);
}
