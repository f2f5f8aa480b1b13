/*
 * seal.c - shard sealing: the sealer thread, and opening and handing off
 * the shard being filled.
 *
 * Owns the sealer thread and its bounded queues: SMP_SEAL_QUEUE shard
 * writers, sealed one by one in order, and SMP_RAW_GROUP raw object
 * writers (format=raw), sealed together by one group commit: the sealer
 * takes every raw object queued while it sealed the previous group, so a
 * group is small when the disk keeps up and grows (to SMP_RAW_GROUP) when
 * it does not.  Does not choose which records go into a shard (drain.c)
 * and does not write a byte itself: cfs_shard_writer_seal() and
 * cfs_shard_writer_seal_group() do the renames and the catalog commit of
 * DESIGN 2 (a raw object's file is put in objects/ when it is handed
 * over, smp__seal_raw).
 *
 * Once a seal fails, the writers queued behind it are aborted, not sealed,
 * until smp__seal_reset(): as after a crash, nothing commits after a file
 * that did not, so plan marks never get ahead of the records they name.
 *
 * Invariants: DESIGN 2 (a shard is visible only once sealed), DESIGN 4 (a
 * queued writer's reservation stays counted in the budget until sealed).
 * Locking: seal_mu protects seal_q, seal_n, raw_q, raw_n, seal_busy,
 * seal_quit, seal_err and seal_msg; it is never held while calling into
 * cachefs.  Everything but sealer_main() runs on the sampler's thread.
 */
#include "sampler/sampler_i.h"

#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "cachefs/shard_writer.h"
#include "common/log.h"

/*
 * Seals the raw objects taken from raw_q as one group.  A file refused
 * alone (-EEXIST, -EINVAL: its display name or sample row) is logged and
 * skipped, as the single seal did; any other failure ends the run (returned
 * with its message).  seal_mu not held.
 */
static int seal_raw_group(struct smp_sampler *s, struct cfs_shard_writer **ws, int n, char *msg,
			  size_t msglen)
{
	uint64_t bytes[SMP_RAW_GROUP];
	int rcs[SMP_RAW_GROUP], rc = 0;
	char err[512];

	for (int i = 0; i < n; i++)
		bytes[i] = cfs_shard_writer_bytes(ws[i]);
	int grc = cfs_shard_writer_seal_group(ws, (size_t)n, rcs, err, sizeof(err));
	for (int i = 0; i < n; i++) {
		if (rcs[i] == 0) {
			SMP_STAT_ADD(&s->stats, records_admitted, 1);
			SMP_STAT_ADD(&s->stats, bytes_admitted, bytes[i]);
		} else if (!grc && (rcs[i] == -EEXIST || rcs[i] == -EINVAL)) {
			cmn_log(CMN_LOG_ERROR, "sealing a raw object: %s", err);
		} else if (!rc) {
			rc = rcs[i];
		}
	}
	if (rc) {
		cmn_log(CMN_LOG_ERROR, "sealing %d raw objects: %s", n, err);
		snprintf(msg, msglen, "sealing raw objects: %s", err);
	}
	return rc;
}

/*
 * Sealing runs on a sealer thread: a group's writes, renames and catalog
 * commit take their time, and meanwhile the fetch loop keeps the
 * connections busy.
 * The hand-off queue is bounded (SMP_SEAL_QUEUE writers; their reservations stay
 * counted in the budget until sealed, so invariant 4 holds throughout).
 */
static void *sealer_main(void *arg)
{
	struct smp_sampler *s = arg;
	struct cfs_shard_writer *group[SMP_RAW_GROUP];
	pthread_mutex_lock(&s->seal_mu);
	for (;;) {
		while (s->seal_n == 0 && s->raw_n == 0 && !s->seal_quit)
			pthread_cond_wait(&s->seal_cv, &s->seal_mu);
		if (s->seal_n == 0 && s->raw_n == 0 && s->seal_quit)
			break;
		if (s->seal_n == 0) { /* raw objects: all of those queued, one group */
			int n = s->raw_n;
			memcpy(group, s->raw_q, (size_t)n * sizeof(group[0]));
			s->raw_n = 0;
			s->seal_busy = true;
			bool failed = s->seal_err != 0;
			pthread_cond_broadcast(&s->seal_cv);
			pthread_mutex_unlock(&s->seal_mu);
			char msg[600];
			int rc = 0;
			if (failed) /* nothing commits after a file that did not */
				for (int i = 0; i < n; i++)
					cfs_shard_writer_abort(group[i]);
			else
				rc = seal_raw_group(s, group, n, msg, sizeof(msg));
			pthread_mutex_lock(&s->seal_mu);
			if (rc && !s->seal_err) {
				s->seal_err = rc;
				snprintf(s->seal_msg, sizeof(s->seal_msg), "%s", msg);
			}
			s->seal_busy = false;
			pthread_cond_broadcast(&s->seal_cv);
			continue;
		}
		struct cfs_shard_writer *w = s->seal_q[0];
		memmove(s->seal_q, s->seal_q + 1, (size_t)(s->seal_n - 1) * sizeof(s->seal_q[0]));
		s->seal_n--;
		s->seal_busy = true;
		bool failed = s->seal_err != 0;
		pthread_cond_broadcast(&s->seal_cv);
		pthread_mutex_unlock(&s->seal_mu);

		char err[512];
		uint64_t bytes = cfs_shard_writer_bytes(w), recs = cfs_shard_writer_records(w);
		int rc;
		if (failed) { /* nothing commits after a shard that did not (FIFO, as a crash) */
			cfs_shard_writer_abort(w);
			rc = -ENODATA;
		} else {
			rc = cfs_shard_writer_seal(w, NULL, err, sizeof(err));
		}
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

/*
 * Hands a finished raw object to the sealer's next group (waits while
 * SMP_RAW_GROUP are queued).  Its plan mark and fetch count go with it
 * (cfs_shard_writer_add_marks, cfs_shard_writer_mark_fetched), so they
 * commit with its row.  Its file is put in objects/ first, here
 * (cfs_raw_writer_place): the sealer's group then only commits rows, and
 * this thread, which would otherwise wait for the sealer, does the link
 * (for 2 KiB objects the sealer was the busier thread: 1.54 s running
 * against the fetch thread's 0.86 s for 20,000 objects, `perf sched`).
 * Takes w in every case; returns 0, or the first sealing error (the run
 * then ends, w discarded).
 */
int smp__seal_raw(struct smp_sampler *s, struct cfs_shard_writer *w)
{
	char perr[512];
	int prc = cfs_raw_writer_place(w, perr, sizeof(perr));
	if (prc) {
		cmn_log(CMN_LOG_ERROR, "sealing a raw object: %s", perr);
		cfs_shard_writer_abort(w);
		return smp__fail_local(s, prc, "sealing raw objects");
	}
	pthread_mutex_lock(&s->seal_mu);
	while (s->raw_n == SMP_RAW_GROUP && !s->seal_err)
		pthread_cond_wait(&s->seal_cv,
				  &s->seal_mu); /* bounded: the sealer always progresses */
	int err = s->seal_err;
	if (!err) {
		s->raw_q[s->raw_n++] = w;
		pthread_cond_broadcast(&s->seal_cv);
	}
	pthread_mutex_unlock(&s->seal_mu);
	if (err) {
		cfs_shard_writer_abort(w);
		return smp__fail_local(s, err, "sealing raw objects");
	}
	return 0;
}

/* Hands the current shard to the sealer (waits while its queue is full). */
int smp__seal_current(struct smp_sampler *s)
{
	if (!s->w)
		return 0;
	struct cfs_shard_writer *w = s->w;
	s->w = NULL;
	/*
	 * Units completed while no shard was open (a whole object whose last
	 * record went out earlier) commit with this shard: the sealer is FIFO,
	 * so the shards holding their records are committed first.
	 */
	if (s->npend && cfs_shard_writer_records(w) > 0 &&
	    cfs_shard_writer_add_marks(w, s->plan_id, cmn_plan_pass(s->plan), s->pend, s->npend) ==
		0)
		s->npend = 0;
	/*
	 * The lows of the objects in flight ride with it too: every record
	 * below them is in this file or an earlier one (a kill after its commit
	 * resumes them there, catalog.h).  Out of memory: the last low stands.
	 */
	uint64_t *units, *lows;
	size_t nl = cfs_shard_writer_records(w) > 0 ? smp__plan_lows(s, &units, &lows) : 0;
	if (nl)
		(void)cfs_shard_writer_set_lows(w, s->plan_id, units, lows, nl);
	if (nl) {
		free(units);
		free(lows);
	}
	pthread_mutex_lock(&s->seal_mu);
	while (s->seal_n == SMP_SEAL_QUEUE && !s->seal_err)
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
		return smp__fail_local(s, err, "sealing a shard");
	}
	return 0;
}

/* Waits until every handed-off shard is sealed; returns the first error. */
int smp__seal_flush(struct smp_sampler *s)
{
	pthread_mutex_lock(&s->seal_mu);
	while (s->seal_n > 0 || s->raw_n > 0 || s->seal_busy)
		pthread_cond_wait(&s->seal_cv, &s->seal_mu);
	int err = s->seal_err;
	if (err && !s->fatal) {
		if (err == -ENOSPC)
			SMP_STAT_ADD(&s->stats, enospc, 1);
		s->fatal = err;
		snprintf(s->fatal_msg, sizeof(s->fatal_msg), "%s", s->seal_msg);
	}
	pthread_mutex_unlock(&s->seal_mu);
	return err;
}

void smp__seal_reset(struct smp_sampler *s)
{
	pthread_mutex_lock(&s->seal_mu);
	while (s->seal_n > 0 || s->raw_n > 0 || s->seal_busy)
		pthread_cond_wait(&s->seal_cv, &s->seal_mu);
	s->seal_err = 0;
	s->seal_msg[0] = '\0';
	pthread_mutex_unlock(&s->seal_mu);
}

/* A shard writer's release callback: a record's block, written, goes back to the shuffle buffer. */
static void give_back(void *ctx, void *block, size_t cap)
{
	smp_shuffle_give_back(ctx, block, cap);
}

/* Opens the sampler's shard writer if it has none, with write-behind. */
int smp__open_shard(struct smp_sampler *s)
{
	char err[512];
	if (s->w)
		return 0;
	int rc = cfs_shard_writer_open(&s->w, s->cstore, s->epoch, err, sizeof(err));
	if (rc) {
		cmn_log(CMN_LOG_ERROR, "%s", err);
		return smp__fail_local(s, rc, "opening a shard");
	}
	rc = cfs_shard_writer_behind(s->w, give_back, s->shuf);
	if (rc) {
		cfs_shard_writer_abort(s->w);
		s->w = NULL;
		return smp__fail_local(s, rc, "opening a shard");
	}
	return 0;
}

/*
 * Starts the sealer thread.  Returns 0, or -errno with a message (nothing
 * is left to undo then).
 */
int smp__sealer_start(struct smp_sampler *s, char *err, size_t errlen)
{
	pthread_mutex_init(&s->seal_mu, NULL);
	pthread_cond_init(&s->seal_cv, NULL);
	int rc = -pthread_create(&s->sealer, NULL, sealer_main, s);
	if (rc) {
		snprintf(err, errlen, "cannot start the sealer thread: %s", strerror(-rc));
		pthread_cond_destroy(&s->seal_cv);
		pthread_mutex_destroy(&s->seal_mu);
		return rc;
	}
	s->sealer_started = true;
	return 0;
}

/* Stops the sealer thread once its queue is empty; a no-op if it never started. */
void smp__sealer_stop(struct smp_sampler *s)
{
	if (!s->sealer_started)
		return;
	pthread_mutex_lock(&s->seal_mu);
	s->seal_quit = true;
	pthread_cond_broadcast(&s->seal_cv);
	pthread_mutex_unlock(&s->seal_mu);
	pthread_join(s->sealer, NULL);
	pthread_cond_destroy(&s->seal_cv);
	pthread_mutex_destroy(&s->seal_mu);
	s->sealer_started = false;
}
