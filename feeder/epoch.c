/*
 * epoch.c - epochs: ending one, starting the next, and their errors.
 *
 * The consumer reads generation gen; the producer works on pgen.  For plain
 * directories, globs and lists the producer moves on to the next epoch
 * (pgen = gen + 1) as soon as gen's last batch is assembled
 * (fdr__producer_advance, run by a decoder), and rc_feeder_next_epoch then
 * only switches the consumer (consumer_switch).  In a rollcache mount, and
 * when the consumer abandons an epoch early, rc_feeder_next_epoch pauses
 * the workers and rebuilds the pipeline (fdr__epoch_reset).  Owns
 * f->ep (file lists, generations, per-generation errors) and resets
 * f->prod; does not list directories itself (files.c) and does not touch
 * slots' memory (slot.c).
 *
 * Invariants: only gen and gen + 1 are ever live, so errors are kept per
 * generation parity (f->ep.errs[gen & 1]); a file list stays alive while a
 * batch that names it is being decoded (old_decoding).
 *
 * Locking: f->ep is protected by f->mu.  rc_feeder_next_epoch pauses the
 * workers (paused, then waits for active == 0) before it touches lanes and
 * files; listing files runs without f->mu.
 */
#include "feeder/feeder_i.h"

#include "common/log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/*
 * Records a failure at batch index `batch`; f->mu held.  The earliest batch
 * wins, so the consumer gets every batch before it and then the same error
 * whatever the thread timing was.
 */
void fdr__error_set(struct rc_feeder *f, int rc, const char *msg, uint32_t gen, uint64_t batch)
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

/* Production of pgen is complete with `total` batches; f->mu held. */
void fdr__production_done(struct rc_feeder *f, uint64_t total)
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
void fdr__decode_finished(struct rc_feeder *f, struct rc_batch *s)
{
	f->ep.decoding--;
	if (s->files != f->ep.files && f->ep.old_decoding && --f->ep.old_decoding == 0) {
		fdr__files_free(f->ep.files_old, f->ep.nfiles_old);
		f->ep.files_old = NULL;
		f->ep.nfiles_old = 0;
	}
}

/* Pauses the workers and waits until none works outside the lock; f->mu held. */
static void pause_workers(struct rc_feeder *f)
{
	f->wk.paused = true;
	fdr__wake(f, FDR_WAKE_ALL);
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
void fdr__epoch_reset(struct rc_feeder *f)
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
				fdr__chunk_put_free(f, &f->prod.chunks[i]);
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
void fdr__producer_advance(struct rc_feeder *f)
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
			fdr__error_set(f, rc, err, f->ep.pgen, 0);
	}
	f->ep.advancing = false;
	f->wk.active--;
	fdr__wake(f, FDR_WAKE_ALL);
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
	fdr__wake(f, FDR_WAKE_ALL);
}

/* Closes every lane's file; workers paused. */
void fdr__lanes_close(struct rc_feeder *f)
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
		fdr__epoch_reset(f);
		f->wk.paused = false;
		fdr__wake(f, FDR_WAKE_ALL);
		pthread_mutex_unlock(&f->mu);
		return 0;
	}
	pthread_mutex_unlock(&f->mu);

	fdr__lanes_close(f);
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
	fdr__epoch_reset(f);
	if (rc)
		fdr__error_set(f, rc, err, f->ep.gen, 0);
	f->wk.paused = false;
	fdr__wake(f, FDR_WAKE_ALL);
	pthread_mutex_unlock(&f->mu);
	return rc;
}
