/*
 * store_i.h - internals shared by store.c, http_list.c, s3.c and fetch.c.
 */
#ifndef RC_SAMPLER_STORE_I_H
#define RC_SAMPLER_STORE_I_H

#include "sampler/store.h"

#include <string.h>

/* Copies src into dst (capacity n > 0), truncating; always NUL-terminates. */
static inline void smp__copy_str(char *dst, size_t n, const char *src)
{
	size_t l = strlen(src);
	if (l >= n)
		l = n - 1;
	memcpy(dst, src, l);
	dst[l] = '\0';
}

struct smp_store {
	enum smp_scheme scheme;
	char *base;	   /* file: "/abs/dir/"; http: "http://h/p/"; s3: endpoint "http://h:p" */
	char *bucket;	   /* s3 */
	char *prefix;	   /* s3: "train/" or "" */
	char *host;	   /* s3: Host header value (signed) */
	bool virtual_host; /* s3: bucket in the host name (AWS, no endpoint) */
	char *region;
	char *access_key, *secret_key, *session_token; /* s3; NULL: anonymous */
	uint64_t timeout_ms;
	uint32_t retries;
	struct smp_stats *stats;
	CURL *list_easy; /* reused for every listing request (keeps the connection) */
};

/* A growable buffer with a hard cap (curl's dynbuf, smaller). */
struct smp_buf {
	char *p;
	size_t len, cap, max;
	bool overflow;
};

/*
 * GETs url (headers hdrs, may be NULL) into b with s->list_easy, retrying
 * like transfers.  Returns 0 with the status in *status (2xx), or: -ENOENT
 * (404), -EACCES (401/403), -EFBIG (body over b->max), -EIO/-ETIMEDOUT after
 * all retries; message in err.  `sign` re-signs per attempt (s3) or is NULL.
 */
typedef int (*smp__sign_fn)(struct smp_store *s, const char *canon_uri, const char *query,
			    struct curl_slist **hdrs, char *err, size_t errlen);
int smp__get_small(struct smp_store *s, const char *url, const char *canon_uri, const char *query,
		   smp__sign_fn sign, struct smp_buf *b, char *err, size_t errlen);

int smp__listing_add(struct smp_listing *l, const char *key, size_t keylen, uint64_t size,
		     const char *etag);

int smp__http_list(struct smp_store *s, struct smp_listing *l, char *err, size_t errlen);
int smp__s3_list(struct smp_store *s, struct smp_listing *l, char *err, size_t errlen);
int smp__s3_prepare(struct smp_store *s, CURL *easy, const char *key, uint64_t off, uint64_t len,
		    struct curl_slist **hdrs, char *err, size_t errlen);
int smp__s3_sign(struct smp_store *s, const char *canon_uri, const char *query, const char *range,
		 struct curl_slist **hdrs, char *err, size_t errlen);
int smp__s3_url(struct smp_store *s, const char *key, char *out, size_t outlen, char *canon,
		size_t canonlen);

/* Retry policy shared by listing and transfers. */
bool smp__status_retryable(long status);
bool smp__curl_retryable(CURLcode c);
uint64_t smp__backoff_ms(uint32_t attempt, uint64_t retry_after_ms, uint64_t *rng);
uint64_t smp__now_ms(void);
void smp__count_failure(struct smp_stats *st, CURLcode c, long status);
/* Retry-After: N (seconds) in a header line -> ms, 0 if not that header. */
uint64_t smp__retry_after_header(const char *line, size_t len);
/* curl_global_init() once per process. */
void smp__curl_global_init(void);

#define SMP_BACKOFF_BASE_MS    100
#define SMP_BACKOFF_MAX_MS     10000
#define SMP_RETRY_AFTER_MAX_MS 60000

#endif
