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
#include "sampler/s3_xml_i.h" /* smp__s3_url_decode(), one page parsed */

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

enum smp_s3_addressing { SMP_S3_AUTO = 0, SMP_S3_PATH = 1, SMP_S3_VIRTUAL = 2 };

struct smp_s3_opts {
	const char *url;	      /* "s3://bucket/prefix/" */
	const char *endpoint;	      /* http(s)://host:port, or NULL/"": resolved (below) */
	const char *region;	      /* NULL/"": resolved (below) */
	const char *profile;	      /* NULL/"": $AWS_PROFILE or "default" */
	const char *credentials_file; /* NULL: $AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials */
	const char *config_file;      /* NULL: $AWS_CONFIG_FILE or ~/.aws/config */
	enum smp_s3_addressing addressing; /* auto: virtual for AWS, path for an endpoint */
};

/*
 * Who we are to the store, resolved like the AWS CLI does (s3_credentials.c
 * says the order).  Every string owned; *_from name the place each value
 * came from (static strings, for the log line: never a value itself).
 */
struct smp_s3_identity {
	char profile[128];
	char *access_key, *secret_key, *session_token; /* NULL: anonymous */
	char *region;				       /* never NULL on success */
	char *endpoint;				       /* NULL: AWS */
	enum smp_s3_addressing addressing;	       /* as configured; auto decided by s3.c */
	const char *profile_from, *credentials_from, *region_from, *endpoint_from;
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
 * Resolves profile, credentials, region, endpoint and addressing into *id
 * (s3_credentials.c).  Returns 0; -EACCES (a file holding a secret that
 * group or others may read), -EINVAL (syntax error, half a key pair),
 * -ENOMEM, with a message that never holds a secret; *id is then empty.
 * No credentials found is 0 with access_key NULL (anonymous requests).
 */
int smp__s3_resolve(struct smp_s3_identity *id, const struct smp_s3_opts *o, char *err,
		    size_t errlen);
/* Wipes and frees what *id holds, and zeroes it. */
void smp__s3_identity_clear(struct smp_s3_identity *id);

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
