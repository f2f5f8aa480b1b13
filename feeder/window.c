/*
 * window.c - the chunk pool and the shuffle window.
 *
 * Owns the free list of chunks, the lanes' queues once chunks leave them,
 * and the window: up to W chunks taken from the lanes in round-robin order
 * (waiting for the lane whose turn it is), from which a batch's records are
 * picked uniformly (the first pending one without shuffle).  Does not read
 * files (reader.c fills chunks) and does not decode (slot.c).
 *
 * Invariants: chunks enter the window in a fixed order and records are
 * picked with the producer's seeded rng, so the sequence of picks depends
 * only on the files, the seed and the options, never on thread timing; a
 * chunk returns to the free list only when every record of it was picked
 * (remaining == 0) and decoded (refs == 0).
 *
 * Locking: every function here runs with f->mu held, by the one decoder
 * that assembles (f->prod.assembling); fdr__window_topup may wait on
 * f->cv_dec, which drops f->mu.
 */
#include "feeder/feeder_i.h"

#include <errno.h>
#include <string.h>

void fdr__chunk_put_free(struct rc_feeder *f, struct fdr_chunk *c)
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
		fdr__chunk_put_free(f, c);
}

void fdr__picks_drop(struct rc_feeder *f, struct rc_batch *s, size_t n)
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
int fdr__window_topup(struct rc_feeder *f)
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
				f->wk.wake_pending |= FDR_WAKE_RD;
			} else if (lane_exhausted(l)) {
				if (l->err_rc) {
					/* the lane's read failed here in the chunk order */
					fdr__error_set(f, l->err_rc, l->err, f->ep.pgen,
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
		fdr__wake(f, FDR_WAKE_RD |
				 f->wk.wake_pending); /* lane queues shrank: readers may go on */
		f->wk.wake_pending = 0;
		pthread_cond_wait(&f->cv_dec, &f->mu);
	}
}

/* Takes one record from the window (win_pending > 0). */
struct fdr_pick fdr__window_pick(struct rc_feeder *f)
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
