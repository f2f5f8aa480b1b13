/*
 * events.h - a set of pending event bits that one thread waits on.
 *
 * The way a lower layer tells an upper one that something happened without
 * calling up into it: the lower layer posts a bit (cmn_events_post), the
 * upper layer's thread sleeps in cmn_events_wait and takes every bit posted
 * since.  Posting never blocks on the waiter and never runs its code.
 * Bits are the caller's to define (each user documents its own).
 *
 * Locking: ev->mu is a leaf lock, held only inside these functions.
 */
#ifndef RC_COMMON_EVENTS_H
#define RC_COMMON_EVENTS_H

#include <pthread.h>
#include <stdint.h>

struct cmn_events {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint32_t bits; /* protected by mu */
};

void cmn_events_init(struct cmn_events *ev);
void cmn_events_destroy(struct cmn_events *ev);

/* Adds `bits` to the pending set and wakes the waiter.  Any thread, no lock needed. */
void cmn_events_post(struct cmn_events *ev, uint32_t bits);

/*
 * Waits until some bit is pending or timeout_ms passes (0: do not wait),
 * then takes and returns every pending bit (0 on timeout).
 */
uint32_t cmn_events_wait(struct cmn_events *ev, uint32_t timeout_ms);

#endif
