/*
 * workers.c - the reader and decoder threads, and how they wake each other.
 *
 * Readers take a lane that has fewer than `ra` chunks queued, fill a free
 * chunk from it (reader.c) and queue it.  A decoder takes a free slot and,
 * alone (f->prod.assembling), picks the batch's records from the window
 * (window.c); the batch gets the next batch index; the decoder then decodes
 * its records straight into the slot without the lock, issues the device
 * copy (slot.c) and marks the slot READY (batches before a resume point
 * are assembled and dropped).  A decoder that finds the
 * consumer's epoch fully produced starts the next one (epoch.c).  Owns the
 * threads' loops and the wake-up policy; does not own any data structure.
 *
 * Locking: one mutex f->mu and three conditions under it, one per kind of
 * waiter: f->cv_rd (readers: a free chunk, room in a lane queue),
 * f->cv_dec (decoders: a free slot, the end of an assembly, a chunk for the
 * window, old_decoding during an advance) and f->cv_cons (the consumer: a
 * ready slot, a release when the ring is full, active == 0 for a pause, the
 * end of an advance).  Every state change broadcasts the conditions of the
 * waiters it may concern (fdr__wake); when in doubt, all three.  Reading,
 * decoding and CUDA calls run without f->mu, counted in f->wk.active.
 * f->copy_mu is never held together with f->mu (no lock order to keep).
 */
#include "feeder/feeder_i.h"

#include "feeder/cuda_i.h"

#include <pthread.h>
#include <stdio.h>

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
void fdr__wake(struct rc_feeder *f, unsigned who)
{
	if (who & FDR_WAKE_RD)
		pthread_cond_broadcast(&f->cv_rd);
	if (who & FDR_WAKE_DEC)
		pthread_cond_broadcast(&f->cv_dec);
	if (who & FDR_WAKE_CONS)
		pthread_cond_broadcast(&f->cv_cons);
}

/* Unlocks f->mu, then wakes `who` and what fdr__window_topup left pending. */
void fdr__unlock_wake(struct rc_feeder *f, unsigned who)
{
	who |= f->wk.wake_pending;
	f->wk.wake_pending = 0;
	pthread_mutex_unlock(&f->mu);
	fdr__wake(f, who);
}

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

/*
 * Hands the lane back after fdr__lane_fill returned rc into chunk c; f->mu
 * held.  A filled chunk joins the lane's queue; otherwise the lane is done
 * and its failure, if any, waits in the lane until the window reaches it
 * (so that it is reported at the same batch whatever the timing).
 */
static void reader_queue(struct rc_feeder *f, struct fdr_lane *l, struct fdr_chunk *c, int rc,
			 const char *err)
{
	l->busy = false;
	if (rc <= 0) {
		if (rc < 0) {
			l->err_rc = rc;
			snprintf(l->err, sizeof l->err, "%s", err);
		}
		l->done = true;
		fdr__chunk_put_free(f, c);
		return;
	}
	if (l->qt)
		l->qt->next = c;
	else
		l->qh = c;
	l->qt = c;
	l->qn++;
}

void *fdr__reader_main(void *arg)
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
		reader_queue(f, l, c, rc, err);
		/* the window waits for lanes; other readers for the lane and
		 * free chunks; a pause (the consumer) for active == 0 */
		fdr__unlock_wake(f, FDR_WAKE_DEC | FDR_WAKE_RD |
					(f->wk.paused || f->wk.stop ? FDR_WAKE_CONS : 0));
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

/*
 * Whether a decoder has nothing to do now; f->mu held.  When it has, *s is
 * the free slot to fill, or left NULL when the consumer's epoch is fully
 * produced and the decoder is to start the next one.
 */
static bool decoder_idle(struct rc_feeder *f, struct rc_batch **s)
{
	if (f->wk.paused || f->ep.errs[f->ep.pgen & 1].rc || f->ep.advancing)
		return true;
	if (f->prod.produced_all) /* a replay (resplit.c) never runs ahead */
		return !(f->cfg.prefetch && f->ep.pgen == f->ep.gen && !f->prod.replay);
	if (f->prod.assembling)
		return true;
	*s = free_slot(f);
	return *s == NULL;
}

/*
 * Picks slot s's records from the window; f->mu held (fdr__window_topup may
 * wait).  Returns fdr__window_topup's last answer: 1 (a full batch), 0 (the
 * epoch's records ran out after *rows records) or -errno / -EAGAIN.
 */
static int batch_assemble(struct rc_feeder *f, struct rc_batch *s, size_t *rows)
{
	size_t n = 0;
	int rc = 0;

	f->prod.assembling = true;
	while (n < f->cfg.B) {
		rc = fdr__window_topup(f);
		if (rc <= 0)
			break;
		s->picks[n++] = fdr__window_pick(f);
	}
	f->prod.assembling = false;
	*rows = n;
	return rc;
}

/*
 * Fills one free slot s: assembles it under f->mu, decodes it without,
 * then marks it READY (or FREE after a failure, or when the consumer left
 * its epoch meanwhile).  Entered and left with f->mu held.
 */
static void decoder_fill(struct rc_feeder *f, struct rc_batch *s)
{
	char err[1024];
	size_t rows;

	if (f->prod.replay && f->prod.next_batch >= f->prod.skip) {
		/* a replay of another split ends at its resume point (resplit.c) */
		fdr__production_done(f, f->prod.next_batch);
		fdr__unlock_wake(f, FDR_WAKE_ALL);
		pthread_mutex_lock(&f->mu);
		return;
	}
	f->wk.active++;
	s->state = SLOT_FILLING;
	uint32_t gen = f->ep.pgen;
	int rc = batch_assemble(f, s, &rows);
	if (rc < 0 || (rc == 0 && (rows == 0 || (rows < f->cfg.B && f->cfg.o.drop_last)))) {
		/* aborted, failed, or nothing (more) to hand out */
		fdr__picks_drop(f, s, rows);
		s->state = SLOT_FREE;
		if (rc == 0)
			fdr__production_done(f, f->prod.next_batch);
		f->wk.active--;
		fdr__unlock_wake(f, FDR_WAKE_ALL);
		pthread_mutex_lock(&f->mu);
		return;
	}
	if (rc == 0) /* a last, short batch */
		fdr__production_done(f, f->prod.next_batch + 1);
	if (f->prod.next_batch < f->prod.skip) {
		/* before the resume point (rc_feeder_seek): the same picks as
		 * without the seek, dropped undecoded; a replay marks them */
		for (size_t i = 0; f->prod.replay && i < rows; i++) {
			uint64_t pos =
			    f->prod.replay_pos[s->picks[i].c->file] + s->picks[i].r.index;
			f->prod.replay[pos >> 3] |= (uint8_t)(1u << (pos & 7));
		}
		fdr__picks_drop(f, s, rows);
		f->prod.next_batch++;
		s->state = SLOT_FREE;
		f->wk.active--;
		fdr__unlock_wake(f, FDR_WAKE_ALL);
		pthread_mutex_lock(&f->mu);
		return;
	}
	s->rows = rows;
	s->index = f->prod.next_batch++;
	s->epoch = f->ep.pepoch;
	s->gen = gen;
	s->files = f->ep.lst.files;
	f->ep.decoding++;
	/* the next assembly may start; the end of production concerns all */
	fdr__unlock_wake(f, rc == 0 ? FDR_WAKE_ALL : FDR_WAKE_DEC);

	rc = fdr__slot_decode(f, s, err, sizeof err);

	pthread_mutex_lock(&f->mu);
	fdr__picks_drop(f, s, rows);
	fdr__decode_finished(f, s);
	f->wk.active--;
	if (rc) {
		fdr__error_set(f, rc, err, s->gen, s->index);
		s->state = SLOT_FREE;
	} else if (s->gen != f->ep.gen && s->gen != f->ep.pgen) {
		s->state = SLOT_FREE; /* the consumer left that epoch meanwhile */
	} else {
		s->state = SLOT_READY;
	}
	/* the consumer: a ready slot (or active == 0 for a pause); readers:
	 * chunks the batch freed; decoders only when a slot came free, an
	 * error stops them, or an advance waits for old_decoding */
	fdr__unlock_wake(
	    f, FDR_WAKE_CONS | FDR_WAKE_RD |
		   (s->state == SLOT_FREE || f->ep.advancing || f->wk.paused ? FDR_WAKE_DEC : 0));
	pthread_mutex_lock(&f->mu);
}

void *fdr__decoder_main(void *arg)
{
	struct rc_feeder *f = arg;

	if (f->cfg.device >= 0)
		(void)fdr__cuda_set_device(f->cfg.device, NULL);
	pthread_mutex_lock(&f->mu);
	for (;;) {
		struct rc_batch *s = NULL;
		while (!f->wk.stop && decoder_idle(f, &s))
			pthread_cond_wait(&f->cv_dec, &f->mu);
		if (f->wk.stop)
			break;
		if (s)
			decoder_fill(f, s);
		else /* the consumer's epoch is produced: start the next one */
			fdr__producer_advance(f);
	}
	pthread_mutex_unlock(&f->mu);
	return NULL;
}
