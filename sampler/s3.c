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
 * Listings ask for encoding-type=url (XML 1.0 cannot carry every key) and
 * are read page by page, each capped at SMP_LIST_BODY_CAP bytes, at most
 * SMP_LIST_MAX_PAGES pages, following the continuation token.  What a page
 * means (the XML, decoding the keys, the prefix check, which keys are
 * skipped and counted) is s3_xml.c's smp__s3_parse_page(), the one parser,
 * which the fuzz target and sampler-s3-xml reach without libcurl; this file
 * sums the skipped keys into one warning per listing and, for a refused
 * listing, names the S3 error code (parsed by s3_xml.c) with what to check.
 * Secrets never leave this file except inside the Authorization header.
 *
 * Owns struct smp_s3 (URL, endpoint, signing identity), the requests (URLs,
 * queries, SigV4 headers) and the listing loop.  Does not parse XML
 * (s3_xml.c does), does not know the generic source (source.c dispatches
 * here) and reads credentials through s3_credentials.c.  No locking: a
 * source is used by one thread at a time.
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

/* ---- ListObjectsV2 listing (each page parsed by s3_xml.c) ---------------- */

/* The advice that goes with an S3 error code of a refused request. */
static const char *advice(const char *code)
{
	static const struct {
		const char *code, *what;
	} t[] = {
	    {"SignatureDoesNotMatch",
	     "the signature does not match the one the server computed: check the secret key "
	     "(aws_secret_access_key or AWS_SECRET_ACCESS_KEY) and the region"},
	    {"InvalidAccessKeyId", "the server knows no such access key id: check "
				   "aws_access_key_id or AWS_ACCESS_KEY_ID"},
	    {"InvalidToken", "the session token is not valid: check aws_session_token or "
			     "AWS_SESSION_TOKEN"},
	    {"ExpiredToken", "the session token has expired: renew the credentials "
			     "(aws_session_token or AWS_SESSION_TOKEN)"},
	    {"RequestTimeTooSkewed", "this machine's clock is too far from the server's: fix "
				     "the clock (NTP)"},
	    {"AuthorizationHeaderMalformed", "the server wants another region: set `region`"},
	    {"AccessDenied", "check the credentials and the bucket policy"},
	    {"NoSuchBucket", "check the bucket name in the source URL"},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (!strcmp(code, t[i].code))
			return t[i].what;
	return NULL;
}

/*
 * Parses an S3 error body (<Error><Code>...) of a refused listing request
 * (s3_xml.c) into err, replacing the bare "HTTP 403" message.  Leaves err
 * as it is when the body is not well-formed XML or holds no code.
 */
static void explain_error(struct smp_s3 *s, const struct smp_buf *b, char *err, size_t errlen)
{
	struct smp_listing none = {0};
	struct smp_s3_page *pg;
	char perr[256];

	if (!b->p || b->len == 0 || !(pg = malloc(sizeof(*pg))))
		return;
	if (smp__s3_parse_page(b->p, b->len, s->prefix, &none, pg, perr, sizeof(perr)) == -EIO &&
	    pg->code[0]) {
		const char *what = advice(pg->code);
		/* the server's words are data: no control byte reaches a terminal */
		for (char *q = pg->code; *q; q++)
			if ((unsigned char)*q < 0x20 || *q == 0x7f)
				*q = '?';
		for (char *q = pg->message; *q; q++)
			if ((unsigned char)*q < 0x20 || *q == 0x7f)
				*q = '?';
		snprintf(err, errlen, "s3://%s/%s: listing refused: %s: %s", s->bucket, s->prefix,
			 pg->code,
			 what		  ? what
			 : pg->message[0] ? pg->message
					  : "the server gave no message");
	}
	smp_listing_free(&none);
	free(pg);
}

/* Keys not listed that the warning counts ("directory" markers are expected). */
static size_t warned(const struct smp_s3_skipped *sk)
{
	return sk->overlong + sk->bad_escape + sk->nul + sk->outside;
}

int smp__s3_list(struct smp_s3 *s, struct smp_conn *conn, struct smp_listing *l, char *err,
		 size_t errlen)
{
	struct smp_buf b = {.max = SMP_LIST_BODY_CAP};
	struct smp_s3_page *pg = calloc(1, sizeof(*pg));
	struct smp_s3_skipped sk = {0};
	char *query = malloc(3 * SMP_S3_TEXT_CAP + 3 * SMP_KEY_MAX + 256);
	char *url = malloc(3 * SMP_S3_TEXT_CAP + 3 * SMP_KEY_MAX + 8192);
	char canon[600], enc_tok[3 * SMP_S3_TEXT_CAP + 1], enc_pfx[3 * SMP_KEY_MAX + 1], perr[256];
	int rc = -ENOMEM;
	if (!pg || !query || !url)
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
		/*
		 * Sorted by name: continuation-token < encoding-type < list-type <
		 * prefix.  encoding-type=url: keys come back percent-encoded, so a
		 * key holding a character XML 1.0 cannot carry (U+0001) does not
		 * make the page unparsable.  The token is opaque and not encoded
		 * by the server (S3 docs): it goes back as it came.
		 */
		if (page > 0) {
			if (smp_uri_encode(pg->token, 0, enc_tok, sizeof(enc_tok)) < 0) {
				rc = -ENAMETOOLONG;
				snprintf(err, errlen, "s3://%s/: continuation token too long",
					 s->bucket);
				goto out;
			}
			sprintf(query,
				"continuation-token=%s&encoding-type=url&list-type=2&prefix=%s",
				enc_tok, enc_pfx);
		} else {
			sprintf(query, "encoding-type=url&list-type=2&prefix=%s", enc_pfx);
		}
		sprintf(url, "%s%s?%s", s->endpoint, canon, query);
		rc = smp__get_small(conn, url, canon, query, sign_list, s, &b, err, errlen);
		if (rc) {
			if (rc != -EFBIG && rc != -ENOMEM)
				explain_error(s, &b, err, errlen);
			goto out;
		}
		size_t before = l->n;
		rc = smp__s3_parse_page(b.p, b.len, s->prefix, l, pg, perr, sizeof(perr));
		sk.overlong += pg->skipped.overlong;
		sk.bad_escape += pg->skipped.bad_escape;
		sk.nul += pg->skipped.nul;
		sk.outside += pg->skipped.outside;
		sk.dirs += pg->skipped.dirs;
		if (rc) {
			snprintf(err, errlen, "s3://%s/%s: listing page %u: %s", s->bucket,
				 s->prefix, page, perr);
			goto out;
		}
		if (!pg->truncated)
			break;
		/* a page that moves nothing on would be asked for again and again */
		if (!pg->token[0] ||
		    (l->n == before && !warned(&pg->skipped) && !pg->skipped.dirs)) {
			rc = -EPROTO;
			snprintf(err, errlen,
				 "s3://%s/: listing page %u is truncated but gives no "
				 "continuation token or keys",
				 s->bucket, page);
			goto out;
		}
	}
	if (warned(&sk))
		cmn_log(CMN_LOG_WARN,
			"s3://%s/%s: %zu keys not listed: %zu longer than %d bytes, %zu with a bad "
			"%%-escape, %zu holding NUL, %zu outside the prefix",
			s->bucket, s->prefix, warned(&sk), sk.overlong, SMP_KEY_MAX, sk.bad_escape,
			sk.nul, sk.outside);
	rc = 0;
out:
	free(b.p);
	free(pg);
	free(query);
	free(url);
	return rc;
}
