/*
 * source.h - one interface to remote sources: list, get a byte range.
 *
 * Three back-ends:
 *   file:///abs/dir/          listing by walking the directory (file_list.c),
 *                             objects read with open/pread by the transfer
 *                             engine (fetch.c, smp_source_local_path)
 *   http(s)://host/prefix/    (libcurl) listing from MANIFEST (`name size` lines) when the
 *                             server has one, else nginx's JSON autoindex,
 *                             walking subdirectories (http_list.c); GET with Range
 *   s3://bucket/prefix/       (libcurl) ListObjectsV2 (paginated, XML via expat), GET with
 *                             Range, SigV4-signed unless anonymous (s3.c)
 *
 * Keys are relative to the source URL's prefix and are data (DESIGN 7): they
 * are percent-encoded into URLs, or, for a file:// source, appended to its
 * directory to name the file to read (the file its URL names); never
 * turned into a path of the cache.
 *
 * Thread model: a source is used by one thread at a time (the sampler's fetch
 * loop); smp_source_prepare() may be called for many easy handles of one multi.
 */
#ifndef RC_SAMPLER_SOURCE_H
#define RC_SAMPLER_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>

#include "sampler/listing.h"
#include "sampler/stats.h"

enum smp_scheme { SMP_SCHEME_FILE = 0, SMP_SCHEME_HTTP = 1, SMP_SCHEME_S3 = 2 };

struct smp_source_opts {
	const char *url;      /* SOURCE */
	const char *endpoint; /* s3: http(s)://host:port of an S3-compatible store, or NULL */
	const char *region;   /* s3: default "us-east-1" */
	const char *profile;  /* s3: ~/.aws/credentials profile, default "default" */
	int s3_addressing;    /* s3: enum cmn_s3_addressing (auto, path, virtual) */
	const char
	    *credentials_file;	 /* s3: NULL: $AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials */
	uint64_t timeout_ms;	 /* connect timeout and stall limit (under 1 KiB/s this long) */
	uint32_t retries;	 /* extra attempts of a failed listing request */
	struct smp_stats *stats; /* borrowed; counters updated; may be NULL */
	uint32_t rank;		 /* listings keep this node's share (struct smp_listing) */
	uint32_t world_size;	 /* 0 or 1: every key */
};

struct smp_source;

/*
 * Parses the URL, reads credentials (s3) and prepares a handle for listing.
 * Returns 0 and *out, or -EINVAL (bad URL, unsupported scheme), -EACCES
 * (credentials file readable by group/others), -ENOMEM, with a message.
 * Secrets are never copied into err.
 */
int smp_source_open(struct smp_source **out, const struct smp_source_opts *o, char *err,
		    size_t errlen);
/* Frees the source (secrets wiped).  NULL is ignored. */
void smp_source_free(struct smp_source *s);

enum smp_scheme smp_source_scheme(const struct smp_source *s);

/*
 * file:// only: the path of `key` under the source's directory, the file
 * its file:// URL names (smp_source_url), for reading it without curl.
 * Returns 0, -EINVAL (not a file:// source) or -ENAMETOOLONG.
 */
int smp_source_local_path(const struct smp_source *s, const char *key, char *out, size_t outlen);

/* The counters given in smp_source_opts.stats (may be NULL). */
struct smp_stats *smp_source_stats(const struct smp_source *s);

/*
 * Lists every object under the prefix into *l (overwritten: it must hold
 * nothing to free), sorted by key, each key once.  Directory-like entries and
 * the MANIFEST file itself are not objects.  Listing requests are retried
 * like transfers.  Returns 0, or -errno with a message; *l is empty on
 * failure.
 */
int smp_source_list(struct smp_source *s, struct smp_listing *l, char *err, size_t errlen);

/*
 * smp_source_list, unless the source tells at once that its listing is
 * the one whose l->validator was `since` (NULL or "": list anyway): then
 * -EALREADY, *l empty.  Only an http(s) source with a MANIFEST tells
 * (its ETag, If-None-Match); file:// and s3:// sources always list.
 */
int smp_source_list_changed(struct smp_source *s, const char *since, struct smp_listing *l,
			    char *err, size_t errlen);

/*
 * Sets on `easy` the URL and headers of a GET of `key` bytes [off, off+len)
 * (len 0: to the end).  *hdrs receives a header list the caller frees with
 * curl_slist_free_all() after the transfer.  Returns 0 or -errno + message.
 */
int smp_source_prepare(struct smp_source *s, CURL *easy, const char *key, uint64_t off,
		       uint64_t len, struct curl_slist **hdrs, char *err, size_t errlen);

/*
 * The object's full URL for people and for baseline tools (curl --parallel):
 * never contains credentials.  Returns 0 or -ENAMETOOLONG.
 */
int smp_source_url(struct smp_source *s, const char *key, char *out, size_t outlen);

/* Common curl options (timeouts, low-speed limit, keepalive) on an easy handle. */
void smp_source_easy_defaults(const struct smp_source *s, CURL *easy);

#endif
