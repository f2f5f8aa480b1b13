/*
 * resplit.c - resuming an epoch at another world size.
 *
 * A state saved by every rank of a split of world size w0 after k batches
 * of epoch e (synchronous data-parallel training: every rank is at the
 * same batch) is loaded by the ranks of another world size w.  Which
 * records the w0 ranks consumed is not a prefix of anything: each rank
 * drew its batches through its shuffle window.  So the feeder replays
 * them: for each old rank it plans the old split of the epoch
 * (fdr__split_plan_rank) and runs the pipeline over it up to batch k, the
 * way rc_feeder_seek skips batches - records read and picked with the
 * same seeded draws, never decoded - marking the stream position of every
 * record picked (f->prod.replay; workers.c).  The records left unmarked,
 * in the epoch's stream order, are then split among the w ranks as an
 * epoch is (fdr__split_plan_rest); the readers skip the marked records
 * inside the segments (reader.c, the listing's excl).  Every new rank
 * replays the same old ranks, so they agree on the rest; together they
 * read it once (but for the padding without drop_last), each the same
 * number of batches.  The next epoch is split as usual.
 *
 * Costs: the replay reads what the old ranks read up to batch k (about
 * w0 * k batches of records, plus their shuffle windows), as a resume at
 * the same world size reads its skipped batches; memory one bit per
 * record of the epoch while it is read.
 *
 * Locking: the consumer thread runs this with the workers paused, but
 * while a replay runs, when it waits on f->cv_cons under f->mu like
 * rc_feeder_next.  A replay needs a free slot: when the consumer holds
 * every slot it fails with -EBUSY instead of waiting.
 */
#include "feeder/feeder_i.h"

#include "common/log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether the consumer holds every slot; f->mu held. */
static bool all_held(const struct rc_feeder *f)
{
	for (size_t i = 0; i < f->cfg.S; i++)
		if (f->ring.slots[i].state != SLOT_HELD)
			return false;
	return true;
}

/*
 * Runs the producer over one old rank's segments of the epoch up to batch
 * `batch`, marking what it picks in bits.  Workers paused on entry and on
 * return; f->mu not held.  0 or the replay's error (message in err).
 */
static int replay_rank(struct rc_feeder *f, uint64_t epoch, char **files, size_t nfiles,
		       struct fdr_seg *segs, size_t nsegs, uint64_t batch, uint8_t *bits,
		       const uint64_t *first_pos, char *err, size_t errlen)
{
	pthread_mutex_lock(&f->mu);
	fdr__listing_free(&f->ep.lst);
	f->ep.lst.files = files; /* borrowed: given back below */
	f->ep.lst.nfiles = nfiles;
	f->ep.lst.segs = segs;
	f->ep.lst.nsegs = nsegs;
	f->ep.epoch = epoch;
	fdr__epoch_reset(f);
	f->prod.skip = batch;
	f->prod.replay = bits;
	f->prod.replay_pos = first_pos;
	f->wk.paused = false;
	fdr__wake(f, FDR_WAKE_ALL);
	int rc = 0;
	while (!f->ep.cons_done && !f->ep.errs[f->ep.gen & 1].rc && !f->wk.stop) {
		if (all_held(f)) { /* the replay needs a slot to assemble in */
			rc = -EBUSY;
			snprintf(err, errlen,
				 "all %zu ring slots are held: release batches before resuming",
				 f->cfg.S);
			break;
		}
		pthread_cond_wait(&f->cv_cons, &f->mu);
	}
	if (!rc && f->ep.errs[f->ep.gen & 1].rc) {
		rc = f->ep.errs[f->ep.gen & 1].rc;
		snprintf(err, errlen, "replaying the batches before the resume: %s",
			 f->ep.errs[f->ep.gen & 1].msg);
	}
	fdr__workers_pause(f);
	f->prod.replay = NULL;
	f->prod.replay_pos = NULL;
	f->ep.lst.files = NULL;
	f->ep.lst.nfiles = 0;
	f->ep.lst.segs = NULL; /* the caller's */
	f->ep.lst.nsegs = 0;
	pthread_mutex_unlock(&f->mu);
	fdr__lanes_close(f);
	return rc;
}

/*
 * Lists epoch `epoch`, replays the old split and plans the rest into *out.
 * Workers paused, f->mu not held.  0 or -errno with a message.
 */
static int resplit_plan(struct rc_feeder *f, uint64_t epoch, uint32_t from_world,
			uint64_t from_batch, struct fdr_listing *out, char *err, size_t errlen)
{
	struct fdr_listing l;
	uint64_t *cnt = NULL, *first_pos = NULL;
	uint8_t *bits = NULL;
	int rc = fdr__epoch_list(f, epoch, &l, err, errlen);
	if (rc)
		return rc;
	size_t n = l.nfiles;
	cnt = calloc(n ? n : 1, sizeof *cnt);
	first_pos = calloc(n + 1, sizeof *first_pos);
	if (!cnt || !first_pos) {
		rc = -ENOMEM;
		goto nomem;
	}
	for (size_t i = 0; !rc && i < n; i++)
		rc = fdr__count_files(f, &l.files[i], 1, &cnt[i], err, errlen);
	if (rc)
		goto out;
	for (size_t i = 0; i < n; i++)
		first_pos[i + 1] = first_pos[i] + cnt[i];
	uint64_t total = first_pos[n];
	bits = calloc((size_t)(total / 8 + 1), 1);
	if (!bits) {
		rc = -ENOMEM;
		goto nomem;
	}
	for (uint32_t r = 0; !rc && r < from_world && from_batch > 0; r++) {
		struct fdr_seg *segs = NULL;
		size_t nsegs = 0;
		uint64_t recs;
		rc = fdr__split_plan_rank(f, l.files, n, from_world, r, &segs, &nsegs, &recs, err,
					  errlen);
		if (!rc)
			rc = replay_rank(f, epoch, l.files, n, segs, nsegs, from_batch, bits,
					 first_pos, err, errlen);
		free(segs);
	}
	if (rc)
		goto out;
	struct fdr_seg *segs;
	size_t nsegs;
	uint64_t recs;
	rc = fdr__split_plan_rest(f, l.files, n, cnt, total, bits, &segs, &nsegs, &recs, err,
				  errlen);
	if (rc)
		goto out;
	free(l.segs);
	l.segs = segs;
	l.nsegs = nsegs;
	l.records = recs;
	l.excl = bits;
	l.first_pos = first_pos;
	bits = NULL;
	first_pos = NULL;
	*out = l;
	free(cnt);
	return 0;
nomem:
	snprintf(err, errlen, "out of memory planning the resume at world size %u",
		 f->cfg.o.world_size);
out:
	free(cnt);
	free(first_pos);
	free(bits);
	fdr__listing_free(&l);
	return rc;
}

int rc_feeder_seek_resplit(struct rc_feeder *f, uint64_t epoch, uint64_t batch, int64_t mount_epoch,
			   uint32_t from_world_size, uint64_t from_batch)
{
	char err[1024];
	struct fdr_listing l;

	if (from_world_size == 0 || (mount_epoch >= 0 && (uint64_t)mount_epoch < epoch)) {
		snprintf(f->ring.err_out, sizeof f->ring.err_out, "seek_resplit: %s",
			 from_world_size == 0 ? "from_world_size 0: expected at least 1"
					      : "mount epoch below the feeder's epoch");
		return -EINVAL;
	}
	pthread_mutex_lock(&f->mu);
	while (f->ep.advancing)
		pthread_cond_wait(&f->cv_cons, &f->mu);
	fdr__workers_pause(f);
	pthread_mutex_unlock(&f->mu);
	if (mount_epoch >= 0)
		f->ep.base = mount_epoch - (int64_t)epoch;
	fdr__lanes_close(f);
	if (f->cfg.mount_epochs &&
	    fdr__mount_ask(f, f->ep.base + (int64_t)epoch, false, err, sizeof err))
		cmn_log(CMN_LOG_WARN, "feeder: cannot advance the cache: %s", err);

	int rc = resplit_plan(f, epoch, from_world_size, from_batch, &l, err, sizeof err);
	return fdr__epoch_install(f, epoch, &l, batch, rc, err);
}
