/*
 * source.c - the generic remote source: parses the URL, picks the back-end
 * and dispatches listing, URLs and GET preparation to it.
 *
 * Owns struct smp_source (its base URL, the s3 back-end's state and the
 * listing connection).  Does not parse listing formats (file_list.c,
 * http_list.c, s3.c), does not retry by itself (request.c) and does not run
 * parallel transfers (fetch.c).  Calls go one way: source.c includes the
 * back-ends' headers, they never include source*.h.  Secrets live in
 * struct smp_s3 and never reach a message or the log.
 * Threads: one thread at a time per source (see source.h).
 */
#include "sampler/source_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampler/file_list_i.h"
#include "sampler/http_list_i.h"
#include "sampler/listing_i.h"
#include "sampler/sigv4.h"

int smp_source_open(struct smp_source **out, const struct smp_source_opts *o, char *err,
		    size_t errlen)
{
	smp__curl_global_init();
	struct smp_source *s = calloc(1, sizeof(*s));
	int rc = -ENOMEM;
	const char *url = o->url;
	if (!s)
		goto nomem;
	s->conn.timeout_ms = o->timeout_ms ? o->timeout_ms : 30000;
	s->conn.retries = o->retries;
	s->conn.stats = o->stats;
	s->rank = o->rank;
	s->world_size = o->world_size;
	rc = -EINVAL;
	if (!url || !*url) {
		snprintf(err, errlen,
			 "no source URL: give file:///abs/dir/, http(s)://host/prefix/ or "
			 "s3://bucket/prefix/");
		goto fail;
	}
	if (!strncmp(url, "file://", 7)) {
		s->scheme = SMP_SCHEME_FILE;
		if (url[7] != '/') {
			snprintf(
			    err, errlen,
			    "%s: a file source needs an absolute path, e.g. file:///data/train/",
			    url);
			goto fail;
		}
		s->base = smp__with_slash(url + 7, strlen(url + 7));
		if (!s->base)
			goto nomem;
	} else if (!strncmp(url, "http://", 7) || !strncmp(url, "https://", 8)) {
		s->scheme = SMP_SCHEME_HTTP;
		if (strchr(url, '?') || strchr(url, '#')) {
			snprintf(err, errlen, "%s: a source URL has no query or fragment", url);
			goto fail;
		}
		/* a URL curl cannot parse ("http://[::1") is a usage error, said now */
		CURLU *u = curl_url();
		if (!u)
			goto nomem;
		CURLUcode uc = curl_url_set(u, CURLUPART_URL, url, 0);
		curl_url_cleanup(u);
		if (uc != CURLUE_OK) {
			snprintf(err, errlen,
				 "%s: malformed URL (%s): expected http(s)://host[:port]/prefix/",
				 url, curl_url_strerror(uc));
			goto fail;
		}
		s->base = smp__with_slash(url, strlen(url));
		if (!s->base)
			goto nomem;
	} else if (!strncmp(url, "s3://", 5)) {
		s->scheme = SMP_SCHEME_S3;
		struct smp_s3_opts so = {
		    .url = url,
		    .endpoint = o->endpoint,
		    .region = o->region,
		    .profile = o->profile,
		    .credentials_file = o->credentials_file,
		    .addressing = (enum smp_s3_addressing)o->s3_addressing,
		};
		rc = smp__s3_open(&s->s3, &so, err, errlen);
		if (rc)
			goto fail;
	} else {
		snprintf(err, errlen,
			 "%s: unsupported source: use file:///abs/dir/, http(s)://host/prefix/ or "
			 "s3://bucket/prefix/",
			 url);
		goto fail;
	}
	s->conn.easy = curl_easy_init();
	if (!s->conn.easy)
		goto nomem;
	*out = s;
	return 0;
nomem:
	rc = -ENOMEM;
	snprintf(err, errlen, "out of memory opening the source");
fail:
	smp_source_free(s);
	return rc;
}

void smp_source_free(struct smp_source *s)
{
	if (!s)
		return;
	if (s->conn.easy)
		curl_easy_cleanup(s->conn.easy);
	free(s->base);
	smp__s3_clear(&s->s3);
	free(s);
}

enum smp_scheme smp_source_scheme(const struct smp_source *s)
{
	return s->scheme;
}

int smp_source_local_path(const struct smp_source *s, const char *key, char *out, size_t outlen)
{
	if (s->scheme != SMP_SCHEME_FILE)
		return -EINVAL;
	int n = snprintf(out, outlen, "%s%s", s->base, key);
	return n < 0 || (size_t)n >= outlen ? -ENAMETOOLONG : 0;
}

struct smp_stats *smp_source_stats(const struct smp_source *s)
{
	return s->conn.stats;
}

void smp_source_easy_defaults(const struct smp_source *s, CURL *e)
{
	smp__easy_defaults(s->conn.timeout_ms, e);
}

int smp_source_list(struct smp_source *s, struct smp_listing *l, char *err, size_t errlen)
{
	return smp_source_list_changed(s, NULL, l, err, errlen);
}

int smp_source_list_changed(struct smp_source *s, const char *since, struct smp_listing *l,
			    char *err, size_t errlen)
{
	int rc;
	memset(l, 0, sizeof(*l));
	l->rank = s->rank;
	l->world_size = s->world_size;
	switch (s->scheme) {
	case SMP_SCHEME_FILE:
		rc = smp__file_list(s->base, l, err, errlen);
		break;
	case SMP_SCHEME_HTTP:
		rc = smp__http_list(&s->conn, s->base, since, l, err, errlen);
		break;
	default:
		rc = smp__s3_list(&s->s3, &s->conn, l, err, errlen);
		break;
	}
	if (rc) {
		smp_listing_free(l);
		return rc;
	}
	smp__listing_sort_unique(l);
	return 0;
}

int smp_source_url(struct smp_source *s, const char *key, char *out, size_t outlen)
{
	char enc[3 * SMP_KEY_MAX + 1];
	int n;
	if (s->scheme == SMP_SCHEME_S3)
		return smp__s3_url(&s->s3, key, out, outlen, NULL, 0);
	if (smp_uri_encode(key, 1, enc, sizeof(enc)) < 0)
		return -ENAMETOOLONG;
	if (s->scheme == SMP_SCHEME_FILE) {
		char path[3 * SMP_KEY_MAX + 4096];
		if (smp_uri_encode(s->base, 1, path, sizeof(path)) < 0)
			return -ENAMETOOLONG;
		n = snprintf(out, outlen, "file://%s%s", path, enc);
	} else {
		n = snprintf(out, outlen, "%s%s", s->base, enc);
	}
	return n < 0 || (size_t)n >= outlen ? -ENAMETOOLONG : 0;
}

int smp_source_prepare(struct smp_source *s, CURL *e, const char *key, uint64_t off, uint64_t len,
		       struct curl_slist **hdrs, char *err, size_t errlen)
{
	*hdrs = NULL;
	if (s->scheme == SMP_SCHEME_S3)
		return smp__s3_prepare(&s->s3, e, key, off, len, hdrs, err, errlen);
	char url[8192];
	if (smp_source_url(s, key, url, sizeof(url))) {
		snprintf(err, errlen, "key too long for a URL (%zu bytes)", strlen(key));
		return -ENAMETOOLONG;
	}
	curl_easy_setopt(e, CURLOPT_URL, url);
	if (off || len) {
		char range[64];
		if (len)
			snprintf(range, sizeof(range), "%llu-%llu", (unsigned long long)off,
				 (unsigned long long)(off + len - 1));
		else
			snprintf(range, sizeof(range), "%llu-", (unsigned long long)off);
		curl_easy_setopt(e, CURLOPT_RANGE, range);
	} else {
		curl_easy_setopt(e, CURLOPT_RANGE, NULL);
	}
	return 0;
}
