/*
 * s3_i.h - the s3:// back-end (s3.c, s3_credentials.c), for source.c.
 */
#ifndef RC_SAMPLER_S3_I_H
#define RC_SAMPLER_S3_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>

#include "sampler/listing.h"
#include "sampler/request_i.h"

/* An s3:// source.  Every string is owned; secrets are wiped by smp__s3_clear(). */
struct smp_s3 {
	char *endpoint;	   /* "http(s)://host[:port]", no trailing slash */
	char *bucket;	   /* 1..255 bytes */
	char *prefix;	   /* "train/" or "" */
	char *host;	   /* Host header value (signed) */
	bool virtual_host; /* bucket in the host name (AWS, no endpoint) */
	char *region;
	char *access_key, *secret_key, *session_token; /* NULL: anonymous */
};

struct smp_s3_opts {
	const char *url;	      /* "s3://bucket/prefix/" */
	const char *endpoint;	      /* http(s)://host:port, or NULL/"" for AWS */
	const char *region;	      /* NULL/"": us-east-1 */
	const char *profile;	      /* NULL/"": $AWS_PROFILE or "default" */
	const char *credentials_file; /* NULL: $AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials */
};

/*
 * Parses the URL and endpoint and loads credentials into *s3 (zeroed by the
 * caller).  Returns 0, or -EINVAL (bad URL or endpoint), -EACCES (unsafe
 * credentials file), -ENOMEM, with a message that never holds a secret.  On
 * failure *s3 may hold parts: smp__s3_clear() it.
 */
int smp__s3_open(struct smp_s3 *s3, const struct smp_s3_opts *o, char *err, size_t errlen);
/* Frees what *s3 holds (secrets wiped first) and zeroes it. */
void smp__s3_clear(struct smp_s3 *s3);

/*
 * Credentials: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN),
 * else [profile] of the shared credentials file (refused with -EACCES when
 * group or others may read it).  None found is 0 (anonymous requests).
 * (s3_credentials.c)
 */
int smp__s3_credentials(struct smp_s3 *s3, const char *file, const char *profile, char *err,
			size_t errlen);

/* Lists every object under the prefix (ListObjectsV2 pages) into l. */
int smp__s3_list(struct smp_s3 *s3, struct smp_conn *c, struct smp_listing *l, char *err,
		 size_t errlen);
/* Sets the URL and the signed headers of a GET of key bytes [off, off+len) on e. */
int smp__s3_prepare(struct smp_s3 *s3, CURL *e, const char *key, uint64_t off, uint64_t len,
		    struct curl_slist **hdrs, char *err, size_t errlen);
/* Appends Host, Range (when given) and, with credentials, the SigV4 headers. */
int smp__s3_sign(struct smp_s3 *s3, const char *canon_uri, const char *query, const char *range,
		 struct curl_slist **hdrs, char *err, size_t errlen);
/* The object's URL (and its canonical URI path when canon != NULL). */
int smp__s3_url(const struct smp_s3 *s3, const char *key, char *out, size_t outlen, char *canon,
		size_t canonlen);

#endif
