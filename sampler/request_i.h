/*
 * request_i.h - what every remote request shares (request.c): curl defaults,
 * the retry policy of listings and transfers, and the capped, retrying small
 * GET that every listing uses.
 *
 * The bottom of sampler/'s remote layer: included by the back-ends
 * (http_list.c, s3.c), by source.c and by fetch.c; includes none of them.
 */
#ifndef RC_SAMPLER_REQUEST_I_H
#define RC_SAMPLER_REQUEST_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>

#include "sampler/listing.h"
#include "sampler/stats.h"

#define SMP_BACKOFF_BASE_MS    100
#define SMP_BACKOFF_MAX_MS     10000
#define SMP_RETRY_AFTER_MAX_MS 60000

/*
 * The connection a source lists through (owned by the source, borrowed by
 * the back-ends for the duration of one listing).
 */
struct smp_conn {
	CURL *easy;		   /* reused for every listing request (keeps the connection) */
	uint64_t timeout_ms;	   /* connect timeout and stall limit */
	uint32_t retries;	   /* extra attempts of a failed request */
	struct smp_stats *stats;   /* borrowed; may be NULL */
	bool probe;		   /* the next GETs ask for an optional file (MANIFEST): a 404 is an
				      answer, not counted in http_4xx (docs/counters.md) */
	const char *if_none_match; /* the next GETs send it as If-None-Match; NULL: not sent */
	char etag[SMP_ETAG_MAX];   /* the ETag header of the last 2xx answer, "" when none */
};

/* A growable buffer with a hard cap (curl's dynbuf, smaller). */
struct smp_buf {
	char *p; /* owned; NUL-terminated after a GET */
	size_t len, cap, max;
	bool overflow;
};

/*
 * Signs one attempt of a small GET (s3): appends the headers to *hdrs.
 * Returns 0 or -errno with a message; *hdrs is freed and NULL on failure.
 */
typedef int (*smp__sign_fn)(void *ctx, const char *canon_uri, const char *query,
			    struct curl_slist **hdrs, char *err, size_t errlen);

/*
 * GETs url into b with c->easy, retrying like transfers (sleeping between
 * attempts).  `sign` (with sign_ctx) re-signs each attempt, or is NULL.
 * Returns 0 (2xx; b holds the body, c->etag its ETag), or: -EALREADY (304:
 * c->if_none_match still matches), -ENOENT (404), -EACCES (401/403),
 * -EFBIG (body over b->max), -EIO/-ETIMEDOUT after all retries, or the
 * signer's error; message in err.  b stays owned by the caller.
 */
int smp__get_small(struct smp_conn *c, const char *url, const char *canon_uri, const char *query,
		   smp__sign_fn sign, void *sign_ctx, struct smp_buf *b, char *err, size_t errlen);

/* Common curl options (timeouts, low-speed limit, keepalive) on an easy handle. */
void smp__easy_defaults(uint64_t timeout_ms, CURL *easy);

/* Retry policy shared by listing and transfers. */
bool smp__status_retryable(long status);
bool smp__curl_retryable(CURLcode c);
uint64_t smp__backoff_ms(uint32_t attempt, uint64_t retry_after_ms, uint64_t *rng);
void smp__count_failure(struct smp_stats *st, CURLcode c, long status);
/* Retry-After: N (seconds) in a header line -> ms, 0 if not that header. */
uint64_t smp__retry_after_header(const char *line, size_t len);
/* curl_global_init() once per process; thread-safe. */
void smp__curl_global_init(void);

#endif
