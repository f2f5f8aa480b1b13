/*
 * requests.h - the queue through which the FUSE view asks its owner for
 * what it cannot answer itself (a stats text, an epoch advance).
 *
 * The view never calls up into the daemon: a FUSE worker thread posts a
 * request on its own stack and sleeps until it is answered
 * (cfs_requests_call); the daemon's control thread takes requests
 * (cfs_requests_take) and answers each exactly once (cfs_requests_done),
 * possibly from another of its threads and later (a `next wait`).
 * cfs_requests_close() answers everything pending with -ECANCELED and makes
 * later calls fail at once, so no FUSE thread outlives the daemon's answer.
 *
 * Locking: q->mu protects the queue and every request's answer fields; a
 * leaf lock.
 */
#ifndef RC_CACHEFS_REQUESTS_H
#define RC_CACHEFS_REQUESTS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum cfs_req_kind {
	CFS_REQ_STATS_JSON = 0, /* render .rollcache/stats: answer buf (malloc'd) and len */
	CFS_REQ_METRICS = 1,	/* render .rollcache/metrics: answer buf and len */
	CFS_REQ_CONTROL = 2,	/* run `cmd` (an ioctl on .rollcache/control): answer rc */
};

struct cfs_req {
	enum cfs_req_kind kind;
	const char *cmd; /* CFS_REQ_CONTROL: the command, trimmed; owned by the poster */

	/* the answer; protected by the queue's mu */
	int rc;	   /* 0 or -errno */
	char *buf; /* texts: malloc'd, freed by the poster */
	size_t len;
	bool done;
	struct cfs_req *next; /* queue link */
};

struct cfs_requests {
	pthread_mutex_t mu;
	pthread_cond_t posted;	     /* a request was queued, or the queue closed */
	pthread_cond_t answered;     /* some request was answered */
	struct cfs_req *head, *tail; /* protected by mu: not yet taken */
	bool closed;		     /* protected by mu */
};

void cfs_requests_init(struct cfs_requests *q);
/* No request may be pending (call cfs_requests_close first). */
void cfs_requests_destroy(struct cfs_requests *q);

/*
 * Poster side (a FUSE worker): queues r and waits for its answer.  Returns
 * r->rc; -ECANCELED if the queue is or gets closed before r is answered.
 */
int cfs_requests_call(struct cfs_requests *q, struct cfs_req *r);

/*
 * Owner side: takes the oldest request, waiting up to timeout_ms.  Returns
 * 0 and *out, -EAGAIN on timeout, -ECANCELED once closed.  The owner must
 * answer every request it took with cfs_requests_done().
 */
int cfs_requests_take(struct cfs_requests *q, uint32_t timeout_ms, struct cfs_req **out);

/* Answers r (taken from q): rc, and for texts buf (ownership passes) and len. */
void cfs_requests_done(struct cfs_requests *q, struct cfs_req *r, int rc, char *buf, size_t len);

/* Answers every queued request with -ECANCELED; later calls fail at once. */
void cfs_requests_close(struct cfs_requests *q);

#endif
