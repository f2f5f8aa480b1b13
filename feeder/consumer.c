/*
 * consumer.c - the consumer's side: rc_feeder_next, the batch accessors,
 * rc_batch_release and the statistics.
 *
 * Hands out READY slots in batch-index order, after their copy event
 * completed, and takes them back.  Does not produce batches (workers.c)
 * and does not change epochs (epoch.c).
 *
 * Invariants: batch i of an epoch is handed out only after batches 0..i-1,
 * and an epoch's error only after every batch before the failed one.
 *
 * Locking: f->mu protects the slots' states and f->ring.next_out; the
 * consumer waits on f->cv_cons.  rc_feeder_next is called by one consumer
 * thread at a time; rc_batch_release by any thread.  Statistics are
 * atomics.
 */
#include "feeder/feeder_i.h"

#include "common/clock.h"
#include "feeder/cuda_i.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* The READY slot holding the consumer's next batch, or NULL; f->mu held. */
static struct rc_batch *ring_next_ready(struct rc_feeder *f)
{
	for (size_t i = 0; i < f->cfg.S; i++) {
		struct rc_batch *c = &f->ring.slots[i];
		if (c->state == SLOT_READY && c->gen == f->ep.gen && c->index == f->ring.next_out)
			return c;
	}
	return NULL;
}

/* Whether the consumer holds every slot; f->mu held. */
static bool ring_all_held(const struct rc_feeder *f)
{
	size_t held = 0;
	for (size_t i = 0; i < f->cfg.S; i++)
		held += f->ring.slots[i].state == SLOT_HELD;
	return held == f->cfg.S;
}

/* busy_timeout_ms from now on f->cv_cons's clock (CLOCK_MONOTONIC, open.c). */
static struct timespec busy_deadline(const struct rc_feeder *f)
{
	uint32_t ms = f->cfg.o.busy_timeout_ms ? f->cfg.o.busy_timeout_ms : 10000;
	uint64_t at = cmn_mono_ns() + (uint64_t)ms * 1000000u;
	return (struct timespec){.tv_sec = (time_t)(at / 1000000000u),
				 .tv_nsec = (long)(at % 1000000000u)};
}

/*
 * Waits under f->mu for the consumer's next batch in index order.  Returns
 * 1 with the slot HELD in *out, 0 at the end of the epoch, the epoch's
 * error once every batch before it was handed out, or -EBUSY when every
 * slot stayed held for busy_timeout_ms; messages go to f->ring.err_out.
 */
static int ring_take(struct rc_feeder *f, struct rc_batch **out)
{
	struct timespec dl = {0};
	bool deadline_set = false;

	for (;;) {
		if (f->ring.next_out >= f->ep.limit)
			return 0; /* rc_feeder_truncate */
		struct rc_batch *s = ring_next_ready(f);
		if (s) {
			s->state = SLOT_HELD;
			f->ring.next_out++;
			*out = s;
			return 1;
		}
		struct fdr_err *e = &f->ep.errs[f->ep.gen & 1];
		if (e->rc && f->ring.next_out >= e->batch) {
			snprintf(f->ring.err_out, sizeof f->ring.err_out, "%s", e->msg);
			return e->rc;
		}
		if (f->ep.cons_done && f->ring.next_out >= f->ep.cons_total)
			return 0;
		if (!ring_all_held(f)) {
			deadline_set = false;
			pthread_cond_wait(&f->cv_cons, &f->mu);
			continue;
		}
		/* only a release (maybe from another thread) can help */
		if (!deadline_set) {
			dl = busy_deadline(f);
			deadline_set = true;
		}
		if (pthread_cond_timedwait(&f->cv_cons, &f->mu, &dl) == ETIMEDOUT) {
			snprintf(
			    f->ring.err_out, sizeof f->ring.err_out,
			    "all %zu ring slots are held: release batches (or raise ring_slots)",
			    f->cfg.S);
			return -EBUSY;
		}
	}
}

/*
 * Waits for slot s's device copy (device mode) and counts its bytes and
 * event time.  Returns 0, or -errno with the message in f->ring.err_out.
 */
static int batch_wait_copy(struct rc_feeder *f, struct rc_batch *s)
{
	float ms = 0;
	int rc = fdr__cuda_event_sync(s->ev_done);
	if (!rc && !fdr__cuda_event_elapsed_ms(s->ev_start, s->ev_done, &ms))
		__atomic_add_fetch(&f->st.h2d_ns, (uint64_t)(ms * 1e6), __ATOMIC_RELAXED);
	__atomic_add_fetch(&f->st.h2d_bytes, s->h2d_bytes, __ATOMIC_RELAXED);
	if (rc)
		snprintf(f->ring.err_out, sizeof f->ring.err_out, "copy to cuda:%d failed: %s",
			 f->cfg.device, fdr__cuda_last_error());
	return rc;
}

int rc_feeder_next(struct rc_feeder *f, struct rc_batch **out)
{
	uint64_t t0 = cmn_mono_ns();
	struct rc_batch *s = NULL;

	pthread_mutex_lock(&f->mu);
	int rc = ring_take(f, &s);
	/* taking a slot concerns no other thread: no wake-up */
	pthread_mutex_unlock(&f->mu);

	if (rc == 1 && f->cfg.device >= 0) {
		rc = batch_wait_copy(f, s);
		if (rc) {
			rc_batch_release(s);
			s = NULL;
		} else {
			rc = 1;
		}
	}
	__atomic_add_fetch(&f->st.wait_ns, cmn_mono_ns() - t0, __ATOMIC_RELAXED);
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
	fdr__unlock_wake(f, FDR_WAKE_DEC |
				FDR_WAKE_CONS); /* a free slot; a consumer held up by a full ring */
}

uint64_t rc_feeder_epoch(const struct rc_feeder *f)
{
	return f->ep.epoch;
}

uint64_t rc_feeder_position(const struct rc_feeder *f)
{
	return f->ring.next_out; /* the consumer thread's own field */
}

void rc_feeder_split(const struct rc_feeder *f, uint32_t *rank, uint32_t *world_size)
{
	*rank = f->cfg.o.rank;
	*world_size = f->cfg.o.world_size;
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
	o->files = (uint32_t)f->ep.lst.nsegs;
	pthread_mutex_unlock((pthread_mutex_t *)&f->mu);
	o->device = f->cfg.device;
	o->pinned = f->cfg.pinned;
	o->ring_slots = (uint32_t)f->cfg.S;
}
