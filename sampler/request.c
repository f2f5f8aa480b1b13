/*
 * request.c - what every remote request shares: curl defaults, the retry
 * policy (which failures are retried, backoff with jitter, Retry-After), and
 * the retrying small GET of listing bodies.
 *
 * Owns no state beyond the arguments it is given.  Does not know the kinds
 * of sources (source.c) or parse listings (http_list.c, s3.c), and does not
 * run parallel transfers (fetch.c, which uses the same policy).
 * Bounds: a small GET's body is capped by its buffer's max; attempts by
 * retries + 1; each wait by SMP_BACKOFF_MAX_MS / SMP_RETRY_AFTER_MAX_MS.
 * Threads: any; a struct smp_conn is used by one thread at a time.
 */
#include "sampler/request_i.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"

static void curl_init_once(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

void smp__curl_global_init(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, curl_init_once);
}

void smp__easy_defaults(uint64_t timeout_ms, CURL *e)
{
	long secs = (long)((timeout_ms + 999) / 1000);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)timeout_ms);
	/*
	 * A stalled server: under 1 KiB/s for `timeout` aborts the transfer (curl
	 * averages speed over a few seconds, so a trickle of bytes cannot keep a
	 * dead transfer alive much past that).
	 */
	curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1024L);
	curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, secs > 0 ? secs : 1L);
	curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	/* keys are data: "a/../b" names an object, not a path to normalize */
	curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "file,http,https");
	curl_easy_setopt(e, CURLOPT_USERAGENT, "rollcache/0.1");
	/*
	 * Large, so that few records straddle two chunks, but under the mmap
	 * threshold (cli/main.c): libcurl frees this buffer at the end of every
	 * transfer and allocates it again at the next, and a 1 MiB buffer got a
	 * fresh mapping each time, whose pages the kernel faults in and zeroes
	 * (bench/cold.py's fill: 31-40k page faults at 1 MiB, 14-18k at 512 KiB,
	 * docs/benchmarks.md "Cold fill").
	 */
	curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 512L * 1024L);
}

/* ---- retry policy ----------------------------------------------------- */

bool smp__status_retryable(long status)
{
	return status == 408 || status == 429 || status >= 500;
}

bool smp__curl_retryable(CURLcode c)
{
	switch (c) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_PARTIAL_FILE:
	case CURLE_GOT_NOTHING:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_BAD_CONTENT_ENCODING:
	case CURLE_COULDNT_RESOLVE_HOST:
		return true;
	default:
		return false;
	}
}

void smp__count_failure(struct smp_stats *st, CURLcode c, long status)
{
	if (c == CURLE_OPERATION_TIMEDOUT)
		SMP_STAT_ADD(st, timeouts, 1);
	else if (c != CURLE_OK)
		SMP_STAT_ADD(st, net_errors, 1);
	else if (status == 408 || status == 429)
		SMP_STAT_ADD(st, http_408_429, 1);
	else if (status >= 500)
		SMP_STAT_ADD(st, http_5xx, 1);
	else if (status >= 400)
		SMP_STAT_ADD(st, http_4xx, 1);
}

/* xorshift64*, seeded per sampler; jitter does not need more. */
static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s ? *s : 0x9e3779b97f4a7c15ull;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 2685821657736338717ull;
}

/*
 * Exponential backoff with full jitter: uniform in [cap/2, cap] where cap =
 * base * 2^attempt bounded by SMP_BACKOFF_MAX_MS; a server's Retry-After
 * (bounded by SMP_RETRY_AFTER_MAX_MS) is a floor.
 */
uint64_t smp__backoff_ms(uint32_t attempt, uint64_t retry_after_ms, uint64_t *rng)
{
	uint64_t cap = SMP_BACKOFF_BASE_MS;
	for (uint32_t i = 0; i < attempt && cap < SMP_BACKOFF_MAX_MS; i++)
		cap *= 2;
	if (cap > SMP_BACKOFF_MAX_MS)
		cap = SMP_BACKOFF_MAX_MS;
	uint64_t d = cap / 2 + rng_next(rng) % (cap / 2 + 1);
	if (retry_after_ms > SMP_RETRY_AFTER_MAX_MS)
		retry_after_ms = SMP_RETRY_AFTER_MAX_MS;
	return d > retry_after_ms ? d : retry_after_ms;
}

uint64_t smp__retry_after_header(const char *line, size_t len)
{
	static const char name[] = "retry-after:";
	if (len < sizeof(name) - 1 || strncasecmp(line, name, sizeof(name) - 1))
		return 0;
	char tmp[32];
	size_t vl = len - (sizeof(name) - 1);
	if (vl >= sizeof(tmp))
		return 0; /* HTTP dates are ignored: the backoff applies */
	memcpy(tmp, line + sizeof(name) - 1, vl);
	tmp[vl] = '\0';
	char *end;
	unsigned long v = strtoul(tmp, &end, 10);
	while (*end == ' ' || *end == '\r' || *end == '\n')
		end++;
	if (*end || v > 3600)
		return 0;
	return (uint64_t)v * 1000u;
}

/* ---- small GETs with retries ------------------------------------------ */

struct small_ctx {
	struct smp_buf *b;
	uint64_t retry_after_ms;
	char etag[SMP_ETAG_MAX]; /* this attempt's ETag header */
};

static size_t small_write(char *p, size_t sz, size_t n, void *ud)
{
	struct smp_buf *b = ((struct small_ctx *)ud)->b;
	size_t len = sz * n;
	if (b->len + len > b->max) {
		b->overflow = true;
		return 0;
	}
	if (b->len + len + 1 > b->cap) {
		size_t nc = b->cap ? b->cap : 65536;
		while (nc < b->len + len + 1)
			nc *= 2;
		char *np = realloc(b->p, nc);
		if (!np)
			return 0;
		b->p = np;
		b->cap = nc;
	}
	memcpy(b->p + b->len, p, len);
	b->len += len;
	b->p[b->len] = '\0';
	return len;
}

static size_t small_header(char *p, size_t sz, size_t n, void *ud)
{
	struct small_ctx *c = ud;
	size_t len = sz * n;
	uint64_t ra = smp__retry_after_header(p, len);
	if (ra)
		c->retry_after_ms = ra;
	if (len > 5 && !strncasecmp(p, "etag:", 5)) {
		const char *v = p + 5, *e = p + len;
		while (v < e && (*v == ' ' || *v == '\t'))
			v++;
		while (e > v && (e[-1] == '\r' || e[-1] == '\n' || e[-1] == ' ' || e[-1] == '\t'))
			e--;
		size_t vl = (size_t)(e - v);
		if (vl < sizeof(c->etag) && !memchr(v, '\0', vl)) { /* else not kept: never sent */
			memcpy(c->etag, v, vl);
			c->etag[vl] = '\0';
		}
	}
	return len;
}

int smp__get_small(struct smp_conn *conn, const char *url, const char *canon_uri, const char *query,
		   smp__sign_fn sign, void *sign_ctx, struct smp_buf *b, char *err, size_t errlen)
{
	uint64_t rng = cmn_mono_ms() ^ (uintptr_t)b;
	bool file = !strncmp(url, "file://", 7);
	for (uint32_t attempt = 0;; attempt++) {
		struct curl_slist *hdrs = NULL;
		struct small_ctx c = {.b = b};
		CURL *e = conn->easy;
		long status = 0;
		int rc;

		b->len = 0;
		b->overflow = false;
		if (b->p)
			b->p[0] = '\0';
		curl_easy_reset(e);
		smp__easy_defaults(conn->timeout_ms, e);
		curl_easy_setopt(e, CURLOPT_URL, url);
		if (sign) {
			rc = sign(sign_ctx, canon_uri, query, &hdrs, err, errlen);
			if (rc)
				return rc;
		}
		if (conn->if_none_match) {
			char h[sizeof(conn->etag) + 32];
			snprintf(h, sizeof(h), "If-None-Match: %s", conn->if_none_match);
			struct curl_slist *nh = curl_slist_append(hdrs, h);
			if (!nh) {
				curl_slist_free_all(hdrs);
				snprintf(err, errlen, "out of memory");
				return -ENOMEM;
			}
			hdrs = nh;
		}
		curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
		curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, small_write);
		curl_easy_setopt(e, CURLOPT_WRITEDATA, &c);
		curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, small_header);
		curl_easy_setopt(e, CURLOPT_HEADERDATA, &c);
		SMP_STAT_ADD(conn->stats, requests, 1);
		CURLcode cc = curl_easy_perform(e);
		curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
		curl_easy_setopt(e, CURLOPT_HTTPHEADER, NULL);
		curl_slist_free_all(hdrs);
		if (cc == CURLE_WRITE_ERROR && b->overflow) {
			snprintf(err, errlen, "%s: listing response larger than %zu bytes", url,
				 b->max);
			return -EFBIG;
		}
		if (file && cc == CURLE_OK)
			status = 200;
		if (cc == CURLE_FILE_COULDNT_READ_FILE) {
			status = 404; /* file:// MANIFEST absent */
			cc = CURLE_OK;
		}
		if (cc == CURLE_OK && status >= 200 && status < 300) {
			SMP_STAT_ADD(conn->stats, bytes_fetched, b->len);
			memcpy(conn->etag, c.etag, sizeof(conn->etag));
			return 0;
		}
		if (!file && conn->if_none_match && cc == CURLE_OK && status == 304) {
			snprintf(err, errlen, "%s: not modified", url);
			return -EALREADY;
		}
		if (conn->probe && cc == CURLE_OK && status == 404) {
			snprintf(err, errlen, "%s: absent", url);
			return -ENOENT; /* an optional file that is not there: no error */
		}
		smp__count_failure(conn->stats, cc, status);
		bool retry =
		    cc != CURLE_OK ? smp__curl_retryable(cc) : smp__status_retryable(status);
		if (!retry || attempt >= conn->retries) {
			if (cc != CURLE_OK) {
				snprintf(err, errlen, "%s: %s%s", url, curl_easy_strerror(cc),
					 retry ? " (retries exhausted; raise `retries` or check "
						 "the server)"
					       : "");
				return cc == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT : -EIO;
			}
			snprintf(err, errlen, "%s: HTTP %ld%s", url, status,
				 status == 403 || status == 401
				     ? " (check the credentials and the bucket policy)"
				 : status == 404 ? " (check the source URL)"
				 : retry	 ? " (retries exhausted)"
						 : "");
			return status == 404			  ? -ENOENT
			       : (status == 401 || status == 403) ? -EACCES
								  : -EIO;
		}
		uint64_t wait = smp__backoff_ms(attempt, c.retry_after_ms, &rng);
		SMP_STAT_ADD(conn->stats, retries, 1);
		SMP_STAT_ADD(conn->stats, retry_wait_ms, wait);
		cmn_log(CMN_LOG_INFO, "listing: %s: %s %ld, retrying in %llu ms", url,
			cc != CURLE_OK ? curl_easy_strerror(cc) : "HTTP", status,
			(unsigned long long)wait);
		struct timespec ts = {.tv_sec = (time_t)(wait / 1000),
				      .tv_nsec = (long)(wait % 1000) * 1000000L};
		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
	}
}
