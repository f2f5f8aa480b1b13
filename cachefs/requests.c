/*
 * requests.c - the FUSE view's requests to its owner (see requests.h).
 *
 * A request is answered exactly once: by cfs_requests_done() after a take,
 * or by cfs_requests_close() while still queued.  A taken request is the
 * owner's until answered, so close() cannot touch it; the owner answers
 * what it took before it destroys the queue.
 */
#include "cachefs/requests.h"

#include "common/clock.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

void cfs_requests_init(struct cfs_requests *q)
{
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_mutex_init(&q->mu, NULL);
	pthread_cond_init(&q->posted, &ca);
	pthread_cond_init(&q->answered, &ca);
	pthread_condattr_destroy(&ca);
	q->head = q->tail = NULL;
	q->closed = false;
}

void cfs_requests_destroy(struct cfs_requests *q)
{
	pthread_cond_destroy(&q->posted);
	pthread_cond_destroy(&q->answered);
	pthread_mutex_destroy(&q->mu);
}

int cfs_requests_call(struct cfs_requests *q, struct cfs_req *r)
{
	r->rc = 0;
	r->buf = NULL;
	r->len = 0;
	r->done = false;
	r->next = NULL;
	pthread_mutex_lock(&q->mu);
	if (q->closed) {
		pthread_mutex_unlock(&q->mu);
		return -ECANCELED;
	}
	if (q->tail)
		q->tail->next = r;
	else
		q->head = r;
	q->tail = r;
	pthread_cond_signal(&q->posted);
	while (!r->done)
		pthread_cond_wait(&q->answered, &q->mu);
	int rc = r->rc;
	pthread_mutex_unlock(&q->mu);
	return rc;
}

int cfs_requests_take(struct cfs_requests *q, uint32_t timeout_ms, struct cfs_req **out)
{
	struct timespec ts;
	cmn_mono_deadline(&ts, timeout_ms);
	int rc = 0;
	pthread_mutex_lock(&q->mu);
	while (!q->head && !q->closed && rc == 0)
		rc = pthread_cond_timedwait(&q->posted, &q->mu, &ts);
	if (q->closed) {
		rc = -ECANCELED;
	} else if (q->head) {
		struct cfs_req *r = q->head;
		q->head = r->next;
		if (!q->head)
			q->tail = NULL;
		r->next = NULL;
		*out = r;
		rc = 0;
	} else {
		rc = -EAGAIN;
	}
	pthread_mutex_unlock(&q->mu);
	return rc;
}

void cfs_requests_done(struct cfs_requests *q, struct cfs_req *r, int rc, char *buf, size_t len)
{
	pthread_mutex_lock(&q->mu);
	r->rc = rc;
	r->buf = buf;
	r->len = len;
	r->done = true;
	pthread_cond_broadcast(&q->answered);
	pthread_mutex_unlock(&q->mu);
}

void cfs_requests_close(struct cfs_requests *q)
{
	pthread_mutex_lock(&q->mu);
	q->closed = true;
	for (struct cfs_req *r = q->head; r; r = r->next) {
		r->rc = -ECANCELED;
		r->done = true;
	}
	q->head = q->tail = NULL;
	pthread_cond_broadcast(&q->posted);
	pthread_cond_broadcast(&q->answered);
	pthread_mutex_unlock(&q->mu);
}
