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
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
	if (s->files != f->ep.lst.files && f->ep.old_decoding && --f->ep.old_decoding == 0) {
		fdr__files_free(f->ep.files_old, f->ep.nfiles_old);
		f->ep.files_old = NULL;
		f->ep.nfiles_old = 0;
	}
}

void fdr__workers_pause(struct rc_feeder *f)
{
	f->wk.paused = true;
	fdr__wake(f, FDR_WAKE_ALL);
	while (f->wk.active)
		pthread_cond_wait(&f->cv_cons, &f->mu);
}

/*
 * Points the producer at the start of epoch pepoch over f->ep.lst.files: lanes,
 * window, shuffle state.  f->mu held; every lane finished (or the workers
 * paused); chunks pinned by batches being decoded are left alone.
 */
static void producer_reset(struct rc_feeder *f)
{
	size_t want_lanes = f->cfg.o.interleave;
	if (want_lanes > f->ep.lst.nsegs)
		want_lanes = f->ep.lst.nsegs ? f->ep.lst.nsegs : 1;
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
	f->prod.skip = 0;
}

/*
 * Resets the whole pipeline for epoch f->ep.epoch over f->ep.lst.files; workers
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
	f->ep.limit = UINT64_MAX;
	memset(f->ep.errs, 0, sizeof f->ep.errs);
}

void fdr__listing_free(struct fdr_listing *l)
{
	fdr__files_free(l->files, l->nfiles);
	free(l->segs);
	free(l->excl);
	free(l->first_pos);
	if (l->dirfd >= 0)
		close(l->dirfd);
	*l = (struct fdr_listing){.records = FDR_UNKNOWN, .dirfd = -1};
}

int fdr__epoch_list(struct rc_feeder *f, uint64_t epoch, struct fdr_listing *out, char *err,
		    size_t errlen)
{
	struct fdr_listing l = {.records = FDR_UNKNOWN, .dirfd = -1};
	char dir[4200];
	const char *path = f->cfg.path;
	int rc = 0;

	if (f->cfg.mount_epochs) {
		/* the epoch's directory stays listed while we hold it open (cachefs) */
		rc = fdr__mount_epoch_dir(f, f->ep.base + (int64_t)epoch, dir, sizeof dir);
		if (!rc) {
			path = dir;
			l.dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (l.dirfd < 0) {
				rc = -errno;
				snprintf(err, errlen, "%s: %s%s", dir, strerror(-rc),
					 rc == -ENOENT ? " (the mount has left that epoch)" : "");
			}
		}
	}
	if (!rc)
		rc = fdr__files_list(path, (const char *const *)f->cfg.paths, f->cfg.o.n_paths,
				     f->cfg.mount_epochs, &l.files, &l.nfiles, err, errlen);
	if (!rc && f->cfg.o.shuffle)
		fdr__files_shuffle(l.files, l.nfiles, f->cfg.o.seed + epoch);
	if (!rc)
		rc = fdr__split_plan(f, l.files, l.nfiles, &l.segs, &l.nsegs, &l.records, err,
				     errlen);
	if (rc) {
		fdr__listing_free(&l);
		return rc;
	}
	*out = l;
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
	struct fdr_listing l;
	uint64_t ep = f->ep.pepoch + 1;

	f->ep.advancing = true;
	f->wk.active++;
	pthread_mutex_unlock(&f->mu);
	int rc = fdr__epoch_list(f, ep, &l, err, sizeof err);
	pthread_mutex_lock(&f->mu);
	/* the list before the current one may still name records being decoded */
	while (f->ep.old_decoding > 0 && !f->wk.stop)
		pthread_cond_wait(&f->cv_dec, &f->mu);
	if (f->wk.stop) {
		if (!rc)
			fdr__listing_free(&l);
	} else {
		fdr__files_free(f->ep.files_old, f->ep.nfiles_old);
		f->ep.files_old = f->ep.lst.files; /* batches being decoded name it */
		f->ep.nfiles_old = f->ep.lst.nfiles;
		f->ep.lst.files = NULL;
		f->ep.lst.nfiles = 0;
		fdr__listing_free(&f->ep.lst); /* its lanes are done: segments go */
		f->ep.old_decoding = f->ep.decoding;
		if (f->ep.old_decoding == 0) {
			fdr__files_free(f->ep.files_old, f->ep.nfiles_old);
			f->ep.files_old = NULL;
			f->ep.nfiles_old = 0;
		}
		if (!rc)
			f->ep.lst = l;
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
	f->ep.limit = UINT64_MAX;
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

/*
 * Restarts the pipeline on epoch `epoch` from batch `skip`: asks a mount
 * for the epoch, lists and plans it, resets the producer.  Workers paused,
 * f->mu not held; unpauses them.  `legacy_next` writes "next" first (a
 * glob or list inside a mount).  Returns 0 or the listing's error, which
 * is also the epoch's error (rc_feeder_next returns it).
 */
static int epoch_restart(struct rc_feeder *f, uint64_t epoch, uint64_t skip, bool legacy_next)
{
	char err[1024];
	struct fdr_listing l;
	int rc;

	fdr__lanes_close(f);
	if (f->cfg.mount_epochs)
		rc = fdr__mount_ask(f, f->ep.base + (int64_t)epoch, false, err, sizeof err);
	else if (f->cfg.control[0] && legacy_next)
		rc = fdr__advance_cache(f->cfg.control, "next", err, sizeof err);
	else
		rc = 0;
	if (rc) /* the listing says whether the epoch is there anyway */
		cmn_log(CMN_LOG_WARN, "feeder: cannot advance the cache: %s", err);
	rc = fdr__epoch_list(f, epoch, &l, err, sizeof err);
	return fdr__epoch_install(f, epoch, &l, skip, rc, err);
}

int fdr__epoch_install(struct rc_feeder *f, uint64_t epoch, struct fdr_listing *l, uint64_t skip,
		       int rc, const char *err)
{
	pthread_mutex_lock(&f->mu);
	f->ep.epoch = epoch;
	fdr__listing_free(&f->ep.lst);
	if (!rc)
		f->ep.lst = *l;
	fdr__epoch_reset(f);
	f->prod.skip = skip;
	f->ring.next_out = skip;
	if (rc) {
		fdr__error_set(f, rc, err, f->ep.gen, skip);
		snprintf(f->ring.err_out, sizeof f->ring.err_out, "%s", err);
	}
	f->wk.paused = false;
	fdr__wake(f, FDR_WAKE_ALL);
	pthread_mutex_unlock(&f->mu);
	return rc;
}

int rc_feeder_next_epoch(struct rc_feeder *f)
{
	pthread_mutex_lock(&f->mu);
	while (f->ep.advancing)
		pthread_cond_wait(&f->cv_cons, &f->mu);
	if (f->ep.pgen != f->ep.gen) { /* already produced ahead: just switch */
		consumer_switch(f);
		pthread_mutex_unlock(&f->mu);
		return 0;
	}
	fdr__workers_pause(f);
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
	return epoch_restart(f, f->ep.epoch + 1, 0, true);
}

int rc_feeder_seek(struct rc_feeder *f, uint64_t epoch, uint64_t batch, int64_t mount_epoch)
{
	if (mount_epoch >= 0 && (uint64_t)mount_epoch < epoch) {
		snprintf(f->ring.err_out, sizeof f->ring.err_out,
			 "seek: mount epoch %" PRId64 " below the feeder's epoch %" PRIu64,
			 mount_epoch, epoch);
		return -EINVAL;
	}
	pthread_mutex_lock(&f->mu);
	while (f->ep.advancing)
		pthread_cond_wait(&f->cv_cons, &f->mu);
	fdr__workers_pause(f);
	pthread_mutex_unlock(&f->mu);
	if (mount_epoch >= 0)
		f->ep.base = mount_epoch - (int64_t)epoch;
	return epoch_restart(f, epoch, batch, false);
}

int rc_feeder_advance_to(struct rc_feeder *f, uint64_t mount_epoch)
{
	if (!f->cfg.control[0]) {
		snprintf(f->ring.err_out, sizeof f->ring.err_out,
			 "advance_to: the feeder does not read a rollcache mount");
		return -ENOTSUP;
	}
	if (mount_epoch > INT64_MAX)
		return -EINVAL;
	int rc =
	    fdr__mount_ask(f, (int64_t)mount_epoch, false, f->ring.err_out, sizeof f->ring.err_out);
	return rc;
}

int64_t rc_feeder_mount_epoch(const struct rc_feeder *f)
{
	return f->cfg.mount_epochs ? f->ep.base + (int64_t)f->ep.epoch : -1;
}

int rc_feeder_batches(struct rc_feeder *f, uint64_t *out)
{
	char err[1024];
	pthread_mutex_lock(&f->mu);
	for (;;) {
		uint64_t n;
		if (f->ep.cons_done) {
			n = f->ep.cons_total;
		} else if (f->ep.pgen == f->ep.gen && f->ep.lst.records != FDR_UNKNOWN) {
			n = fdr__batches_of(f, f->ep.lst.records);
		} else {
			/* world_size 1: count the epoch's files (a copy: the
			 * producer may replace the list once it is done) */
			uint32_t gen = f->ep.gen;
			size_t nf = f->ep.lst.nfiles;
			char **copy = calloc(nf ? nf : 1, sizeof *copy);
			bool oom = !copy;
			for (size_t i = 0; !oom && i < nf; i++)
				oom = !(copy[i] = strdup(f->ep.lst.files[i]));
			pthread_mutex_unlock(&f->mu);
			uint64_t total = 0;
			int rc =
			    oom ? -ENOMEM : fdr__count_files(f, copy, nf, &total, err, sizeof err);
			fdr__files_free(copy, nf);
			if (rc) {
				snprintf(f->ring.err_out, sizeof f->ring.err_out, "%s",
					 oom ? "out of memory" : err);
				return rc;
			}
			pthread_mutex_lock(&f->mu);
			if (f->ep.gen == gen && f->ep.pgen == gen)
				f->ep.lst.records = total;
			continue; /* or the producer finished meanwhile: cons_total */
		}
		*out = n < f->ep.limit ? n : f->ep.limit;
		pthread_mutex_unlock(&f->mu);
		return 0;
	}
}

void rc_feeder_truncate(struct rc_feeder *f, uint64_t batches)
{
	pthread_mutex_lock(&f->mu);
	f->ep.limit = batches;
	fdr__unlock_wake(f, FDR_WAKE_CONS);
}
