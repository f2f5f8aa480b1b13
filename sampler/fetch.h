/*
 * fetch.h - parallel range GETs with retries over one curl multi handle.
 *
 * The caller queues requests (object key, byte range) and drives the engine
 * with smp_fetch_step() from one thread; up to `connections` transfers run
 * at once, connections are reused across requests.  Each request reports its
 * body through callbacks on that same thread.
 *
 * Faults (DESIGN "Faults"): timeouts, resets, partial bodies, 408,
 * 429 and 5xx are retried with exponential backoff and jitter, honouring
 * Retry-After; 4xx others are tried once.  A consumer that finds bad data
 * (CRC, truncated framing) answers -EAGAIN and the request is retried from
 * the offset its restart() callback returns, so already-delivered bytes are
 * not delivered twice.  Every failure is counted in the source's stats.
 *
 * Credit: a request whose consumer has a grant() callback asks
 * the server only for the bytes the consumer has room for - one range GET
 * per grant - so nothing is sent that must be held in socket buffers or
 * thrown away; a request with no grant waits in the queue, costing no
 * connection, and is asked again at every step.
 */
#ifndef RC_SAMPLER_FETCH_H
#define RC_SAMPLER_FETCH_H

#include <stdbool.h>
#include <stdint.h>

#include "sampler/source.h"

/* How a request ended, as its done() callback is told. */
enum smp_xfer_end {
	SMP_XFER_ENDED,	    /* read to its end (rc 0), cancelled, or a callback ended it */
	SMP_XFER_EXHAUSTED, /* given up: every attempt failed on a fault that may pass (5xx,
			       408, 429, reset, timeout, short body, bad data) - a later
			       transfer may succeed, resuming where this one stopped */
	SMP_XFER_REFUSED,   /* given up: an answer or an error that is not retried (a 4xx
			       such as 403 or 404, an unsupported protocol) */
};

struct smp_xfer_ops {
	/* Body bytes (in order).  0; -EAGAIN: the data is bad, retry; other -errno: give up. */
	int (*data)(void *ctx, const void *p, size_t n);
	/* The body ended with every byte asked for.  0; -EAGAIN: retry; other: give up. */
	int (*end)(void *ctx);
	/*
	 * Before a retry: forget partial state and return the object offset to
	 * resume from (>= the request's offset).  `final` is true for the last
	 * attempt the retry budget allows.
	 */
	uint64_t (*restart)(void *ctx, bool final);
	/*
	 * Called once when the request is over: rc 0, or -errno and a message;
	 * how: whether the transport gave it up, and why (enum smp_xfer_end).
	 */
	void (*done)(void *ctx, int rc, enum smp_xfer_end how, const char *msg);
	/*
	 * Optional: the object offset up to which bytes may be asked for now,
	 * the request standing at cur and wanting up to want_end (> cur);
	 * cur (or less) when nothing may be asked for yet.  NULL: everything
	 * at once.  Only asked when the object's end is known.
	 */
	uint64_t (*grant)(void *ctx, uint64_t cur, uint64_t want_end);
};

struct smp_fetch_req {
	const char *key; /* copied */
	uint64_t off;	 /* first byte */
	uint64_t len;	 /* bytes; 0: to the end of the object */
	uint64_t size;	 /* object size from the listing (0: unknown), to detect short bodies */
	const struct smp_xfer_ops *ops;
	void *ctx;
};

struct smp_fetch;

int smp_fetch_new(struct smp_fetch **out, struct smp_source *source, unsigned connections,
		  uint32_t retries, uint64_t seed, char *err, size_t errlen);
/* Cancels what is left (done(-ECANCELED) for each) and frees. */
void smp_fetch_free(struct smp_fetch *f);

/* Queues a request.  Returns 0 or -ENOMEM. */
int smp_fetch_add(struct smp_fetch *f, const struct smp_fetch_req *r);

/* Requests queued, waiting for a retry, or running. */
unsigned smp_fetch_pending(const struct smp_fetch *f);
/* Requests the last smp_fetch_step() found waiting for their grant. */
unsigned smp_fetch_ungranted(const struct smp_fetch *f);
/* Requests running now. */
unsigned smp_fetch_running(const struct smp_fetch *f);

/*
 * Starts what may start, waits up to max_wait_ms for activity and processes
 * it (callbacks run inside).  Returns 0 or -errno (curl multi failure).
 */
int smp_fetch_step(struct smp_fetch *f, int max_wait_ms);

/* Wakes a smp_fetch_step() blocked in another thread.  Thread-safe. */
void smp_fetch_wakeup(struct smp_fetch *f);

/*
 * hold=true: every running transfer pauses at its next body chunk (curl
 * keeps the chunk and delivers it again on release), so a consumer that has
 * no room can wait outside the callbacks; hold=false releases them.  Call
 * from the engine's thread (a callback included).  A transfer held past the
 * server's idle timeout fails and is retried from its resume point.
 */
void smp_fetch_hold(struct smp_fetch *f, bool hold);

/* Ends every request now with done(-ECANCELED). */
void smp_fetch_cancel_all(struct smp_fetch *f);

#endif
