/*
 * budget.c - byte accounting for DESIGN invariant 4 (see budget.h).
 *
 * Owns four counters and the condition writers wait on.  Does not know
 * about files, the catalog or epochs beyond the admit counter.
 *
 * Invariants kept here (asserted in debug builds):
 *   B1. a reservation is granted only when, afterwards,
 *       reserved + sealed + draining <= limit      (DESIGN 4)
 *       and, unless it is a copy of resident records
 *       (cfs_budget_try_reserve_copy), admit_used <= admit;
 *   B2. admit_used >= reserved (in-flight bytes count against the epoch
 *       they will be sealed in);
 *   B3. no counter goes below zero (callers give back only what they hold).
 *
 * Locking: b->mu protects every field; it is a leaf lock (nothing else is
 * taken while it is held).  Waiters sleep on b->cv, a CLOCK_MONOTONIC
 * condition, woken by broadcast whenever room may have appeared.
 */
#include "cachefs/budget.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

struct cfs_budget {
	pthread_mutex_t mu;
	pthread_cond_t cv;	/* room may have appeared; uses b->mu */
	uint64_t limit;		/* protected by mu */
	uint64_t admit;		/* protected by mu */
	uint64_t reserved;	/* protected by mu */
	uint64_t sealed;	/* protected by mu */
	uint64_t draining;	/* protected by mu */
	uint64_t admit_used;	/* protected by mu */
	uint64_t peak;		/* protected by mu */
	uint32_t waiting_limit; /* protected by mu */
	uint32_t waiting_admit; /* protected by mu */
	bool cancelled;		/* protected by mu */
};

int cfs_budget_new(struct cfs_budget **out, uint64_t limit)
{
	struct cfs_budget *b = calloc(1, sizeof(*b));
	pthread_condattr_t ca;

	if (!b)
		return -ENOMEM;
	if (pthread_condattr_init(&ca) != 0)
		goto fail_free;
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	if (pthread_cond_init(&b->cv, &ca) != 0)
		goto fail_attr;
	if (pthread_mutex_init(&b->mu, NULL) != 0)
		goto fail_cond;
	pthread_condattr_destroy(&ca);
	b->limit = limit;
	b->admit = CFS_BUDGET_UNLIMITED;
	*out = b;
	return 0;

fail_cond:
	pthread_cond_destroy(&b->cv);
fail_attr:
	pthread_condattr_destroy(&ca);
fail_free:
	free(b);
	return -ENOMEM;
}

void cfs_budget_free(struct cfs_budget *b)
{
	if (!b)
		return;
	assert(b->waiting_limit == 0 && b->waiting_admit == 0);
	pthread_cond_destroy(&b->cv);
	pthread_mutex_destroy(&b->mu);
	free(b);
}

static uint64_t held(const struct cfs_budget *b)
{
	return b->reserved + b->sealed + b->draining;
}

/*
 * 0: fits now; 1: wait for limit room; 2: wait for the next epoch (never
 * for a copy: it admits nothing new).
 */
static int room_for(const struct cfs_budget *b, uint64_t bytes, bool copy)
{
	if (held(b) > b->limit || b->limit - held(b) < bytes)
		return 1;
	if (!copy && b->admit != CFS_BUDGET_UNLIMITED &&
	    (b->admit_used > b->admit || b->admit - b->admit_used < bytes))
		return 2;
	return 0;
}

/* Waits longer than this are cut to it (no time_t overflow). */
#define MAX_WAIT_MS ((uint64_t)366 * 24 * 3600 * 1000)

static void deadline_after(struct timespec *ts, uint64_t ms)
{
	if (ms > MAX_WAIT_MS)
		ms = MAX_WAIT_MS;
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += (time_t)(ms / 1000);
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

static int reserve(struct cfs_budget *b, uint64_t bytes, uint64_t timeout_ms, bool copy)
{
	struct timespec deadline;
	int rc = 0, why;

	if (bytes == 0)
		return 0;
	if (timeout_ms)
		deadline_after(&deadline, timeout_ms);
	pthread_mutex_lock(&b->mu);
	for (;;) {
		if (b->cancelled) {
			rc = -ECANCELED;
			break;
		}
		/* bigger than the whole cache: waiting could only end by timeout.
		 * (Bigger than this epoch's admit is different: a later epoch may
		 * admit more, so that waits like any other shortage.) */
		if (bytes > b->limit) {
			rc = -EFBIG;
			break;
		}
		why = room_for(b, bytes, copy);
		if (why == 0)
			break;
		if (timeout_ms == 0) {
			rc = -EAGAIN;
			break;
		}
		if (why == 1)
			b->waiting_limit++;
		else
			b->waiting_admit++;
		int w = pthread_cond_timedwait(&b->cv, &b->mu, &deadline);
		if (why == 1)
			b->waiting_limit--;
		else
			b->waiting_admit--;
		if (w == ETIMEDOUT && room_for(b, bytes, copy) != 0 && !b->cancelled) {
			rc = -ETIMEDOUT;
			break;
		}
	}
	if (rc == 0) {
		b->reserved += bytes;
		b->admit_used += bytes;
		if (held(b) > b->peak)
			b->peak = held(b);
		assert(held(b) <= b->limit); /* B1 */
		assert(copy || b->admit == CFS_BUDGET_UNLIMITED || b->admit_used <= b->admit);
		assert(b->admit_used >= b->reserved); /* B2 */
	}
	pthread_mutex_unlock(&b->mu);
	return rc;
}

int cfs_budget_reserve(struct cfs_budget *b, uint64_t bytes, uint64_t timeout_ms)
{
	return reserve(b, bytes, timeout_ms, false);
}

int cfs_budget_try_reserve(struct cfs_budget *b, uint64_t bytes)
{
	return reserve(b, bytes, 0, false);
}

int cfs_budget_try_reserve_copy(struct cfs_budget *b, uint64_t bytes)
{
	return reserve(b, bytes, 0, true);
}

/* Gives back `bytes` of reservation; b->mu held. */
static void unreserve(struct cfs_budget *b, uint64_t bytes)
{
	assert(bytes <= b->reserved); /* B3 */
	if (bytes > b->reserved)
		bytes = b->reserved;
	b->reserved -= bytes;
	b->admit_used = b->admit_used >= bytes ? b->admit_used - bytes : 0;
	assert(b->admit_used >= b->reserved); /* B2 */
}

void cfs_budget_release(struct cfs_budget *b, uint64_t bytes)
{
	if (bytes == 0)
		return;
	pthread_mutex_lock(&b->mu);
	unreserve(b, bytes);
	pthread_cond_broadcast(&b->cv);
	pthread_mutex_unlock(&b->mu);
}

void cfs_budget_commit(struct cfs_budget *b, uint64_t reserved, uint64_t used)
{
	assert(used <= reserved);
	if (used > reserved)
		used = reserved;
	pthread_mutex_lock(&b->mu);
	assert(reserved <= b->reserved);
	if (reserved > b->reserved)
		reserved = b->reserved;
	/* used bytes move from reserved to sealed and stay in admit_used. */
	b->reserved -= used;
	b->sealed += used;
	unreserve(b, reserved - used);
	pthread_cond_broadcast(&b->cv);
	pthread_mutex_unlock(&b->mu);
}

void cfs_budget_add_sealed(struct cfs_budget *b, uint64_t bytes)
{
	pthread_mutex_lock(&b->mu);
	b->sealed += bytes;
	if (held(b) > b->peak)
		b->peak = held(b);
	pthread_mutex_unlock(&b->mu);
}

void cfs_budget_sealed_to_draining(struct cfs_budget *b, uint64_t bytes)
{
	pthread_mutex_lock(&b->mu);
	assert(bytes <= b->sealed);
	if (bytes > b->sealed)
		bytes = b->sealed;
	b->sealed -= bytes;
	b->draining += bytes;
	pthread_mutex_unlock(&b->mu);
}

void cfs_budget_draining_removed(struct cfs_budget *b, uint64_t bytes)
{
	pthread_mutex_lock(&b->mu);
	assert(bytes <= b->draining);
	b->draining -= bytes <= b->draining ? bytes : b->draining;
	pthread_cond_broadcast(&b->cv);
	pthread_mutex_unlock(&b->mu);
}

void cfs_budget_set_limit(struct cfs_budget *b, uint64_t limit)
{
	pthread_mutex_lock(&b->mu);
	b->limit = limit;
	pthread_cond_broadcast(&b->cv);
	pthread_mutex_unlock(&b->mu);
}

void cfs_budget_new_epoch(struct cfs_budget *b, uint64_t admit)
{
	pthread_mutex_lock(&b->mu);
	b->admit = admit;
	b->admit_used = b->reserved; /* B2 */
	pthread_cond_broadcast(&b->cv);
	pthread_mutex_unlock(&b->mu);
}

void cfs_budget_raise_admit(struct cfs_budget *b, uint64_t admit)
{
	pthread_mutex_lock(&b->mu);
	if (admit > b->admit) {
		b->admit = admit;
		pthread_cond_broadcast(&b->cv);
	}
	pthread_mutex_unlock(&b->mu);
}

void cfs_budget_cancel(struct cfs_budget *b)
{
	pthread_mutex_lock(&b->mu);
	b->cancelled = true;
	pthread_cond_broadcast(&b->cv);
	pthread_mutex_unlock(&b->mu);
}

void cfs_budget_get(struct cfs_budget *b, struct cfs_budget_stat *st)
{
	pthread_mutex_lock(&b->mu);
	st->limit = b->limit;
	st->admit = b->admit;
	st->reserved = b->reserved;
	st->sealed = b->sealed;
	st->draining = b->draining;
	st->admit_used = b->admit_used;
	st->peak = b->peak;
	st->waiting_limit = b->waiting_limit;
	st->waiting_admit = b->waiting_admit;
	st->cancelled = b->cancelled;
	pthread_mutex_unlock(&b->mu);
}
