/*
 * s3.c - the s3:// backend: ListObjectsV2 listing and signed range GETs.
 *
 * Requests are path-style (endpoint/bucket/key) or virtual-hosted
 * (bucket.host/key): `s3_addressing = auto` (the default) is virtual-hosted
 * for AWS when the bucket is a DNS label and path-style for an endpoint
 * (MinIO, Ceph RGW, s3rver), as the AWS CLI decides; path or virtual force
 * one.  The endpoint, region and credentials are resolved by
 * s3_credentials.c like the AWS CLI does.
 * Query parameters are emitted sorted by name and URI-encoded with uppercase
 * hex, so the URL sent and the canonical query signed are the same string;
 * the Host and Range headers are set here explicitly for the same reason.
 *
 * Listing pages are capped at SMP_LIST_BODY_CAP bytes per page and
 * SMP_LIST_MAX_PAGES pages; each is parsed by s3_xml.c (expat, element text
 * capped per field).
 * Secrets never leave this file except inside the Authorization header.
 *
 * Owns struct smp_s3 (URL, endpoint, signing identity).  Does not know the
 * generic source (source.c dispatches here) and reads credentials through
 * s3_credentials.c.  No locking: a source is used by one thread at a time.
 */
#include "sampler/s3_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "sampler/listing_i.h"
#include "sampler/s3_xml_i.h"
#include "sampler/sigv4.h"

#define TEXT_CAP SMP_S3_TEXT_CAP

/* Whether bucket can be a DNS label of a virtual-hosted URL. */
static bool dns_compatible(const char *b)
{
	size_t n = strlen(b);
	if (n < 3 || n > 63 || b[0] == '-' || b[n - 1] == '-')
		return false;
	for (const char *p = b; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-'))
			return false;
	return true;
}

static const char *addressing_name(bool virtual_host)
{
	return virtual_host ? "virtual-hosted" : "path";
}

/*
 * Sets endpoint and host from the resolved endpoint (or AWS's) and the
 * addressing style: path-style puts the bucket in the path, virtual-hosted
 * in front of the host name.
 */
static int set_endpoint(struct smp_s3 *s, const char *ep, enum smp_s3_addressing a, char *err,
			size_t errlen)
{
	char buf[1100];
	const char *scheme = "https://", *host;
	size_t n;

	if (ep) {
		if (strncmp(ep, "http://", 7) && strncmp(ep, "https://", 8)) {
			snprintf(err, errlen, "endpoint=%s: expected http(s)://host[:port]", ep);
			return -EINVAL;
		}
		scheme = ep[4] == 's' ? "https://" : "http://";
		host = ep + strlen(scheme);
		n = strlen(host);
		while (n > 0 && host[n - 1] == '/')
			n--;
		if (memchr(host, '/', n) || n == 0) {
			snprintf(err, errlen,
				 "endpoint=%s: expected http(s)://host[:port] without a path", ep);
			return -EINVAL;
		}
	} else {
		snprintf(buf, sizeof(buf), "s3.%s.amazonaws.com", s->region);
		host = buf;
		n = strlen(buf);
	}
	if (a == SMP_S3_AUTO)
		a = !ep && dns_compatible(s->bucket) ? SMP_S3_VIRTUAL : SMP_S3_PATH;
	if (a == SMP_S3_VIRTUAL && !dns_compatible(s->bucket)) {
		snprintf(err, errlen,
			 "s3://%s/: s3_addressing = virtual needs a bucket name that is a DNS "
			 "label (a-z, 0-9, '-'): use s3_addressing = path",
			 s->bucket);
		return -EINVAL;
	}
	s->virtual_host = a == SMP_S3_VIRTUAL;
	char hostbuf[1024];
	int k = s->virtual_host
		    ? snprintf(hostbuf, sizeof(hostbuf), "%s.%.*s", s->bucket, (int)n, host)
		    : snprintf(hostbuf, sizeof(hostbuf), "%.*s", (int)n, host);
	if (k < 0 || (size_t)k >= sizeof(hostbuf)) {
		snprintf(err, errlen, "endpoint host name too long");
		return -EINVAL;
	}
	s->host = strdup(hostbuf);
	snprintf(buf, sizeof(buf), "%s%s", scheme, hostbuf);
	s->endpoint = strdup(buf);
	return s->host && s->endpoint ? 0 : -ENOMEM;
}

int smp__s3_open(struct smp_s3 *s, const struct smp_s3_opts *o, char *err, size_t errlen)
{
	struct smp_s3_identity id;
	const char *url = o->url;
	int rc;
	const char *b = url + 5, *sl = strchr(b, '/');
	size_t bl = sl ? (size_t)(sl - b) : strlen(b);
	if (bl < 1 || bl > 255) {
		snprintf(err, errlen, "%s: expected s3://bucket/prefix/", url);
		return -EINVAL;
	}
	s->bucket = strndup(b, bl);
	const char *pfx = sl ? sl + 1 : "";
	s->prefix = *pfx ? smp__with_slash(pfx, strlen(pfx)) : strdup("");
	if (!s->bucket || !s->prefix)
		goto nomem;
	rc = smp__s3_resolve(&id, o, err, errlen);
	if (rc)
		return rc;
	/* the identity's strings move into s: smp__s3_clear() wipes them */
	s->region = id.region;
	s->access_key = id.access_key;
	s->secret_key = id.secret_key;
	s->session_token = id.session_token;
	id.region = id.access_key = id.secret_key = id.session_token = NULL;
	rc = set_endpoint(s, id.endpoint, id.addressing, err, errlen);
	if (rc == 0)
		cmn_log(CMN_LOG_INFO,
			"s3://%s/: profile %s (%s), region %s (%s), endpoint %s (%s), %s-style "
			"addressing, %s",
			s->bucket, id.profile, id.profile_from, s->region, id.region_from,
			s->endpoint, id.endpoint_from, addressing_name(s->virtual_host),
			s->access_key ? id.credentials_from : "no credentials: anonymous requests");
	smp__s3_identity_clear(&id);
	if (rc == -ENOMEM)
		goto nomem;
	return rc;
nomem:
	snprintf(err, errlen, "out of memory opening the source");
	return -ENOMEM;
}

static void free_secret(char *p)
{
	if (p) {
		explicit_bzero(p, strlen(p));
		free(p);
	}
}

void smp__s3_clear(struct smp_s3 *s)
{
	free(s->endpoint);
	free(s->bucket);
	free(s->prefix);
	free(s->host);
	free(s->region);
	free_secret(s->access_key);
	free_secret(s->secret_key);
	free_secret(s->session_token);
	memset(s, 0, sizeof(*s));
}

int smp__s3_url(const struct smp_s3 *s, const char *key, char *out, size_t outlen, char *canon,
		size_t canonlen)
{
	char full[2 * SMP_KEY_MAX + 2], enc[3 * (2 * SMP_KEY_MAX + 2) + 1], path[sizeof(enc) + 300];
	int n = snprintf(full, sizeof(full), "%s%s", s->prefix, key);
	if (n < 0 || (size_t)n >= sizeof(full) || smp_uri_encode(full, 1, enc, sizeof(enc)) < 0)
		return -ENAMETOOLONG;
	if (s->virtual_host)
		n = snprintf(path, sizeof(path), "/%s", enc);
	else
		n = snprintf(path, sizeof(path), "/%s/%s", s->bucket, enc);
	if (n < 0 || (size_t)n >= sizeof(path))
		return -ENAMETOOLONG;
	if (canon) {
		if ((size_t)n >= canonlen)
			return -ENAMETOOLONG;
		memcpy(canon, path, (size_t)n + 1);
	}
	n = snprintf(out, outlen, "%s%s", s->endpoint, path);
	return n < 0 || (size_t)n >= outlen ? -ENAMETOOLONG : 0;
}

static void amz_now(char out[17])
{
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}

static int add_hdr(struct curl_slist **h, const char *name, const char *value)
{
	char line[4096];
	int n = snprintf(line, sizeof(line), "%s: %s", name, value);
	if (n < 0 || (size_t)n >= sizeof(line))
		return -ENAMETOOLONG;
	struct curl_slist *nh = curl_slist_append(*h, line);
	explicit_bzero(line, sizeof(line));
	if (!nh)
		return -ENOMEM;
	*h = nh;
	return 0;
}

int smp__s3_sign(struct smp_s3 *s, const char *canon_uri, const char *query, const char *range,
		 struct curl_slist **hdrs, char *err, size_t errlen)
{
	char date[17], sig[65], signed_hdrs[128], auth[1024];
	int rc;
	amz_now(date);
	rc = add_hdr(hdrs, "Host", s->host);
	if (!rc && range)
		rc = add_hdr(hdrs, "Range", range);
	if (!rc && s->access_key) {
		rc = add_hdr(hdrs, "x-amz-date", date);
		if (!rc)
			rc = add_hdr(hdrs, "x-amz-content-sha256", SMP_SHA256_EMPTY);
		if (!rc && s->session_token)
			rc = add_hdr(hdrs, "x-amz-security-token", s->session_token);
		if (!rc) {
			struct smp_sigv4_req r = {
			    .method = "GET",
			    .canonical_uri = canon_uri,
			    .canonical_query = query ? query : "",
			    .host = s->host,
			    .range = range,
			    .amz_date = date,
			    .session_token = s->session_token,
			    .region = s->region,
			    .access_key = s->access_key,
			    .secret_key = s->secret_key,
			};
			rc = smp_sigv4_sign(&r, sig, signed_hdrs, sizeof(signed_hdrs));
		}
		if (!rc) {
			char d8[9];
			snprintf(d8, sizeof(d8), "%.8s", date);
			int n = snprintf(
			    auth, sizeof(auth),
			    "Authorization: AWS4-HMAC-SHA256 Credential=%s/%s/%s/s3/aws4_request, "
			    "SignedHeaders=%s, Signature=%s",
			    s->access_key, d8, s->region, signed_hdrs, sig);
			if (n < 0 || (size_t)n >= sizeof(auth)) {
				rc = -ENAMETOOLONG;
			} else {
				struct curl_slist *nh = curl_slist_append(*hdrs, auth);
				rc = nh ? 0 : -ENOMEM;
				if (nh)
					*hdrs = nh;
			}
			explicit_bzero(auth, sizeof(auth));
		}
	}
	if (rc) {
		curl_slist_free_all(*hdrs);
		*hdrs = NULL;
		snprintf(err, errlen, "s3://%s/: cannot sign the request (%s)", s->bucket,
			 strerror(-rc));
	}
	return rc;
}

static int sign_list(void *ctx, const char *canon_uri, const char *query, struct curl_slist **hdrs,
		     char *err, size_t errlen)
{
	return smp__s3_sign(ctx, canon_uri, query, NULL, hdrs, err, errlen);
}

int smp__s3_prepare(struct smp_s3 *s, CURL *e, const char *key, uint64_t off, uint64_t len,
		    struct curl_slist **hdrs, char *err, size_t errlen)
{
	char url[8192], canon[8192], range[64];
	if (smp__s3_url(s, key, url, sizeof(url), canon, sizeof(canon))) {
		snprintf(err, errlen, "key too long for a URL (%zu bytes)", strlen(key));
		return -ENAMETOOLONG;
	}
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_RANGE, NULL);
	if (len)
		snprintf(range, sizeof(range), "bytes=%llu-%llu", (unsigned long long)off,
			 (unsigned long long)(off + len - 1));
	else
		snprintf(range, sizeof(range), "bytes=%llu-", (unsigned long long)off);
	return smp__s3_sign(s, canon, "", (off || len) ? range : NULL, hdrs, err, errlen);
}

/* ---- ListObjectsV2 (each page parsed by s3_xml.c) ------------------------ */

int smp__s3_list(struct smp_s3 *s, struct smp_conn *conn, struct smp_listing *l, char *err,
		 size_t errlen)
{
	struct smp_buf b = {.max = SMP_LIST_BODY_CAP};
	struct smp_s3_page *c = calloc(1, sizeof(*c));
	char *query = malloc(3 * TEXT_CAP + 3 * SMP_KEY_MAX + 256);
	char *url = malloc(3 * TEXT_CAP + 3 * SMP_KEY_MAX + 8192);
	char canon[600], enc_tok[3 * TEXT_CAP + 1], enc_pfx[3 * SMP_KEY_MAX + 1], perr[256];
	int rc = -ENOMEM;
	if (!c || !query || !url)
		goto out;
	if (smp_uri_encode(s->prefix, 0, enc_pfx, sizeof(enc_pfx)) < 0) {
		rc = -ENAMETOOLONG;
		snprintf(err, errlen, "s3 prefix too long");
		goto out;
	}
	if (s->virtual_host)
		snprintf(canon, sizeof(canon), "/");
	else
		snprintf(canon, sizeof(canon), "/%s", s->bucket);
	for (uint32_t page = 0;; page++) {
		if (page >= SMP_LIST_MAX_PAGES) {
			rc = -E2BIG;
			snprintf(err, errlen, "s3://%s/%s: more than %u listing pages", s->bucket,
				 s->prefix, SMP_LIST_MAX_PAGES);
			goto out;
		}
		/* sorted by name: continuation-token < list-type < prefix */
		if (page > 0) {
			if (smp_uri_encode(c->token, 0, enc_tok, sizeof(enc_tok)) < 0) {
				rc = -ENAMETOOLONG;
				goto out;
			}
			sprintf(query, "continuation-token=%s&list-type=2&prefix=%s", enc_tok,
				enc_pfx);
		} else {
			sprintf(query, "list-type=2&prefix=%s", enc_pfx);
		}
		sprintf(url, "%s%s?%s", s->endpoint, canon, query);
		rc = smp__get_small(conn, url, canon, query, sign_list, s, &b, err, errlen);
		if (rc)
			goto out;
		size_t before = l->n;
		rc = smp__s3_parse_page(b.p, b.len, s->prefix, l, c, perr, sizeof(perr));
		if (rc) {
			snprintf(err, errlen, "s3://%s/: listing page %u: %s", s->bucket, page,
				 perr);
			goto out;
		}
		if (c->code[0]) {
			rc = -EIO;
			snprintf(err, errlen, "s3://%s/: listing: error %s", s->bucket, c->code);
			goto out;
		}
		if (!c->truncated)
			break;
		if (!c->token[0] || l->n == before) {
			rc = -EPROTO;
			snprintf(err, errlen,
				 "s3://%s/: listing page %u is truncated but gives no "
				 "continuation token or keys",
				 s->bucket, page);
			goto out;
		}
	}
	rc = 0;
out:
	free(b.p);
	free(c);
	free(query);
	free(url);
	return rc;
}
