/*
 * stats.h - sampler counters: every error is counted here.
 *
 * Fields are relaxed atomics so the status/metrics readers of cachefs may
 * read them from other threads while the fetch loop updates them.
 */
#ifndef RC_SAMPLER_STATS_H
#define RC_SAMPLER_STATS_H

#include <stdatomic.h>
#include <stdint.h>

struct smp_stats {
	_Atomic uint64_t requests;	/* HTTP/file requests started, retries included */
	_Atomic uint64_t retries;	/* attempts after the first */
	_Atomic uint64_t retry_wait_ms; /* total backoff slept */
	_Atomic uint64_t http_4xx;	/* 400/403/404/... : tried once, not retried */
	_Atomic uint64_t http_408_429;	/* 408 and 429 responses (retried) */
	_Atomic uint64_t http_5xx;	/* 5xx responses (retried) */
	_Atomic uint64_t timeouts;	/* connect timeouts and stalls past the low-speed limit */
	_Atomic uint64_t net_errors;	/* resets, refused connections, partial bodies */
	_Atomic uint64_t truncated;	/* bodies that ended inside a record or short of the size */
	/*
	 * Bad data in a TFRecord body (CRC mismatch, lost framing, a body
	 * ending inside a record; docs/counters.md):
	 * records_recovered: seen on an attempt that was retried, and the
	 *   record at that place was then read intact (nothing lost);
	 * records_lost: records no resume will deliver - a record skipped for
	 *   its CRC on the last attempt, the rest of a file:// object whose
	 *   framing was lost or of an object that ends inside a record
	 *   (counted 1: how many records it held is unknown), a record larger
	 *   than the whole limit, or, with an index sidecar, each record a
	 *   given-up run did not deliver (lost for this pass: the next pass
	 *   fetches them again).  Not the records of a whole object
	 *   given up on faults that may pass: objects_partial counts it, its
	 *   resume reads them.  Every lost record also counts its object in
	 *   failed_objects (once per pass and epoch).
	 */
	_Atomic uint64_t records_recovered;
	_Atomic uint64_t records_lost;
	_Atomic uint64_t resumed_bytes; /* bytes of partial objects not fetched again: a new
					   transfer resumed at their low (plan.c) */
	_Atomic uint64_t records_resident_skipped; /* records of a partial object fetched
						      again that were resident already:
						      not admitted twice (plan.c) */
	_Atomic uint64_t failed_objects;  /* objects given up (retries exhausted, a 4xx), or
					     read with a record lost; each object once */
	_Atomic uint64_t objects_partial; /* of them, whole objects given up on faults that
					     may pass (ingest: after its rounds): a later
					     transfer resumes them where they stopped */
	_Atomic uint64_t enospc;	  /* local writes that failed with ENOSPC (a full disk): a
					     mount's sampler waits until there is room again */
	_Atomic uint64_t objects_done;	  /* objects read to the end */
	_Atomic uint64_t bytes_fetched;	  /* body bytes received (retries included) */
	_Atomic uint64_t records_admitted;
	_Atomic uint64_t bytes_admitted; /* bytes written into sealed local files */
	_Atomic uint64_t budget_waits;	 /* times a sampler slept for room */
	_Atomic uint64_t partial_bytes;	 /* gauge: body bytes of records not yet whole (reader.c) */
	_Atomic uint64_t listed_objects; /* gauge: objects in the last listing (relist.c) */
};

#define SMP_STAT_ADD(st, field, v)                                                                 \
	do {                                                                                       \
		if (st)                                                                            \
			atomic_fetch_add_explicit(&(st)->field, (v), memory_order_relaxed);        \
	} while (0)
#define SMP_STAT_GET(st, field) atomic_load_explicit(&(st)->field, memory_order_relaxed)

#endif
