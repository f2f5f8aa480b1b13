/*
 * events.c - pending event bits with one waiter (see events.h).
 */
#include "common/events.h"

#include "common/clock.h"

#include <time.h>

void cmn_events_init(struct cmn_events *ev)
{
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_mutex_init(&ev->mu, NULL);
	pthread_cond_init(&ev->cv, &ca);
	pthread_condattr_destroy(&ca);
	ev->bits = 0;
}

void cmn_events_destroy(struct cmn_events *ev)
{
	pthread_cond_destroy(&ev->cv);
	pthread_mutex_destroy(&ev->mu);
}

void cmn_events_post(struct cmn_events *ev, uint32_t bits)
{
	pthread_mutex_lock(&ev->mu);
	ev->bits |= bits;
	pthread_cond_broadcast(&ev->cv);
	pthread_mutex_unlock(&ev->mu);
}

uint32_t cmn_events_wait(struct cmn_events *ev, uint32_t timeout_ms)
{
	struct timespec ts;
	cmn_mono_deadline(&ts, timeout_ms);
	pthread_mutex_lock(&ev->mu);
	while (!ev->bits && timeout_ms)
		if (pthread_cond_timedwait(&ev->cv, &ev->mu, &ts) != 0)
			break;
	uint32_t bits = ev->bits;
	ev->bits = 0;
	pthread_mutex_unlock(&ev->mu);
	return bits;
}
