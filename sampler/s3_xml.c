/*
 * s3_xml.c - the one parser of S3 ListObjectsV2 answers: one response page
 * (XML, expat) into a listing (s3_xml_i.h), and smp__s3_url_decode().
 *
 * Owns what a page means: the expat callbacks, the decoding of keys and
 * <Prefix> when the answer says EncodingType url (listings ask for
 * encoding-type=url: XML 1.0 cannot carry every key), the check that the
 * answer lists the prefix asked for, which keys are skipped and counted
 * (over-long, bad %-escape, NUL, outside the prefix, "directory" markers:
 * never fatal to the listing), and the capture of an <Error>'s Code and
 * Message.  Owns nothing beyond one call.  Does not fetch pages, follow
 * continuation tokens, log, or word a refused request's advice (s3.c does
 * all of that) and never turns a key into a local path (DESIGN 7).
 *
 * Bounds: each element's text is capped at SMP_S3_TEXT_CAP bytes (a longer
 * key is skipped and counted, a longer token is cut and ends the listing
 * with an error in s3.c); nesting is followed by depth only, so memory is
 * the parser's own, one struct and the page's keys as written.  Needs expat
 * and listing.c, not libcurl, so that the fuzz target
 * (tests/sampler/fuzz_s3_xml.c) and sampler-s3-xml test the code s3.c runs.
 * No locking.
 */
#include "sampler/s3_xml_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <expat.h>

#include "sampler/listing_i.h"

#define TEXT_CAP SMP_S3_TEXT_CAP

/* Copies src into dst (capacity n > 0), truncating; always NUL-terminates. */
static void copy_str(char *dst, size_t n, const char *src)
{
	size_t l = strlen(src);
	if (l >= n)
		l = n - 1;
	memcpy(dst, src, l);
	dst[l] = '\0';
}

/* The value of hex digit ch, or -1. */
static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	return -1;
}

int smp__s3_url_decode(const char *in, char *out, size_t outlen)
{
	size_t o = 0;
	for (const char *p = in; *p; p++) {
		unsigned char c = (unsigned char)*p;
		if (c == '%') {
			int hi = hexval(p[1]), lo = hi < 0 ? -1 : hexval(p[2]);
			if (hi < 0 || lo < 0)
				return -EPROTO;
			c = (unsigned char)(hi << 4 | lo);
			p += 2;
		} else if (c == '+') {
			c = ' ';
		}
		if (o + 1 >= outlen)
			return -ENAMETOOLONG;
		out[o++] = (char)c;
	}
	if (outlen == 0)
		return -ENAMETOOLONG;
	out[o] = '\0';
	return (int)o;
}

enum field { F_NONE, F_KEY, F_SIZE, F_ETAG, F_TRUNC, F_TOKEN, F_CODE, F_MESSAGE, F_PREFIX, F_ENC };

/* A key of one page as the server wrote it (decoded once the page is read). */
struct page_obj {
	char *key;
	uint64_t size;
	char etag[128];
};

struct xml_ctx {
	struct smp_s3_page *pg;
	int depth;
	bool in_contents;
	enum field f;
	char text[TEXT_CAP + 1];
	size_t tlen;
	bool overflow;
	char key[TEXT_CAP + 1], etag[128];
	uint64_t size;
	bool key_overflow;
	char prefix[TEXT_CAP + 1]; /* <Prefix> of the answer, as written */
	bool have_prefix;
	char encoding[16]; /* <EncodingType>: "url" when the keys are encoded */
	struct page_obj *objs;
	size_t nobjs, capobjs;
	int rc;
};

static void on_start(void *ud, const XML_Char *name, const XML_Char **atts)
{
	struct xml_ctx *c = ud;
	(void)atts;
	c->depth++;
	c->tlen = 0;
	c->overflow = false;
	c->f = F_NONE;
	if (c->depth == 2 && !strcmp(name, "Contents")) {
		c->in_contents = true;
		c->key[0] = c->etag[0] = '\0';
		c->key_overflow = false;
		c->size = 0;
	} else if (c->in_contents && c->depth == 3) {
		c->f = !strcmp(name, "Key")    ? F_KEY
		       : !strcmp(name, "Size") ? F_SIZE
		       : !strcmp(name, "ETag") ? F_ETAG
					       : F_NONE;
	} else if (c->depth == 2) {
		c->f = !strcmp(name, "IsTruncated")		? F_TRUNC
		       : !strcmp(name, "NextContinuationToken") ? F_TOKEN
		       : !strcmp(name, "Code")			? F_CODE
		       : !strcmp(name, "Message")		? F_MESSAGE
		       : !strcmp(name, "Prefix")		? F_PREFIX
		       : !strcmp(name, "EncodingType")		? F_ENC
								: F_NONE;
	}
}

static void on_text(void *ud, const XML_Char *s, int len)
{
	struct xml_ctx *c = ud;
	if (c->f == F_NONE)
		return;
	if (c->tlen + (size_t)len > TEXT_CAP) {
		c->overflow = true;
		return;
	}
	memcpy(c->text + c->tlen, s, (size_t)len);
	c->tlen += (size_t)len;
}

static int page_add(struct xml_ctx *c)
{
	if (c->nobjs == c->capobjs) {
		size_t nc = c->capobjs ? 2 * c->capobjs : 1024;
		struct page_obj *v = realloc(c->objs, nc * sizeof(*v));
		if (!v)
			return -ENOMEM;
		c->objs = v;
		c->capobjs = nc;
	}
	struct page_obj *o = &c->objs[c->nobjs];
	o->key = strdup(c->key);
	if (!o->key)
		return -ENOMEM;
	o->size = c->size;
	copy_str(o->etag, sizeof(o->etag), c->etag);
	c->nobjs++;
	return 0;
}

static void on_end(void *ud, const XML_Char *name)
{
	struct xml_ctx *c = ud;
	struct smp_s3_page *pg = c->pg;
	c->text[c->tlen] = '\0';
	if (c->f != F_NONE && c->overflow) {
		if (c->f == F_KEY)
			c->key_overflow = true; /* counted and skipped below */
	} else {
		switch (c->f) {
		case F_KEY:
			memcpy(c->key, c->text, c->tlen + 1);
			break;
		case F_SIZE:
			c->size = strtoull(c->text, NULL, 10);
			break;
		case F_ETAG:
			copy_str(c->etag, sizeof(c->etag), c->text);
			break;
		case F_TRUNC:
			pg->truncated = !strcmp(c->text, "true");
			break;
		case F_TOKEN:
			memcpy(pg->token, c->text, c->tlen + 1);
			break;
		case F_CODE:
			copy_str(pg->code, sizeof(pg->code), c->text);
			break;
		case F_MESSAGE:
			copy_str(pg->message, sizeof(pg->message), c->text);
			break;
		case F_PREFIX:
			memcpy(c->prefix, c->text, c->tlen + 1);
			c->have_prefix = true;
			break;
		case F_ENC:
			copy_str(c->encoding, sizeof(c->encoding), c->text);
			break;
		default:
			break;
		}
	}
	c->f = F_NONE;
	if (c->depth == 2 && c->in_contents && !strcmp(name, "Contents")) {
		c->in_contents = false;
		if (c->key_overflow)
			pg->skipped.overlong++;
		else if (!c->rc && c->key[0])
			c->rc = page_add(c);
	}
	c->depth--;
}

/*
 * Moves the page's keys into l: each decoded when the answer says
 * EncodingType url, then stripped of the prefix.  A key that cannot be an
 * object of ours is skipped and counted in pg->skipped (the rest still
 * list).  dec has room for TEXT_CAP + 1 bytes.
 */
static int page_commit(struct xml_ctx *c, const char *prefix, struct smp_listing *l, char *dec)
{
	struct smp_s3_skipped *sk = &c->pg->skipped;
	bool url = !strcmp(c->encoding, "url");
	size_t plen = strlen(prefix);
	int rc = 0;

	for (size_t i = 0; i < c->nobjs && !rc; i++) {
		struct page_obj *o = &c->objs[i];
		int n;
		if (url) {
			n = smp__s3_url_decode(o->key, dec, TEXT_CAP + 1);
			if (n < 0) {
				sk->bad_escape++;
				continue;
			}
		} else {
			n = (int)strlen(o->key);
			memcpy(dec, o->key, (size_t)n + 1);
		}
		if (memchr(dec, '\0', (size_t)n)) {
			sk->nul++; /* "%00": no file system or URL path holds it */
		} else if ((size_t)n <= plen || strncmp(dec, prefix, plen)) {
			if ((size_t)n != plen || strncmp(dec, prefix, plen))
				sk->outside++; /* not under the prefix we asked for */
		} else if ((size_t)n - plen > SMP_KEY_MAX) {
			sk->overlong++;
		} else if (dec[n - 1] == '/') {
			sk->dirs++; /* a "directory" marker */
		} else {
			rc = smp__listing_add(l, dec + plen, (size_t)n - plen, o->size, o->etag);
		}
	}
	return rc;
}

int smp__s3_parse_page(const char *body, size_t len, const char *prefix, struct smp_listing *l,
		       struct smp_s3_page *pg, char *err, size_t errlen)
{
	struct xml_ctx *c = NULL;
	XML_Parser p = NULL;
	char *dec = NULL;
	int rc = -ENOMEM;

	memset(pg, 0, sizeof(*pg));
	if (len > SMP_LIST_BODY_CAP) {
		snprintf(err, errlen, "listing page of %zu bytes (the cap is %zu)", len,
			 (size_t)SMP_LIST_BODY_CAP);
		return -EFBIG;
	}
	c = calloc(1, sizeof(*c));
	dec = malloc(TEXT_CAP + 1);
	if (!c || !dec || !(p = XML_ParserCreate("UTF-8"))) {
		snprintf(err, errlen, "%s", strerror(ENOMEM));
		goto out;
	}
	c->pg = pg;
	XML_SetUserData(p, c);
	XML_SetElementHandler(p, on_start, on_end);
	XML_SetCharacterDataHandler(p, on_text);
	if (XML_Parse(p, body ? body : "", (int)len, 1) == XML_STATUS_ERROR) {
		snprintf(err, errlen,
			 "bad XML at line %lu: %s (the server may ignore encoding-type=url and "
			 "send a key XML cannot hold)",
			 (unsigned long)XML_GetCurrentLineNumber(p),
			 XML_ErrorString(XML_GetErrorCode(p)));
		rc = -EPROTO;
		goto out;
	}
	rc = c->rc;
	if (rc) {
		snprintf(err, errlen, "%s", strerror(-rc));
		goto out;
	}
	if (pg->code[0]) {
		rc = -EIO;
		snprintf(err, errlen, "error %s", pg->code);
		goto out;
	}
	/* the answer names the prefix it lists: it must be ours */
	if (c->have_prefix) {
		int n = !strcmp(c->encoding, "url")
			    ? smp__s3_url_decode(c->prefix, dec, TEXT_CAP + 1)
			    : (int)strlen(strcpy(dec, c->prefix));
		if (n < 0 || strcmp(dec, prefix)) {
			rc = -EPROTO;
			snprintf(err, errlen,
				 "answers for another prefix: the server ignored `prefix`");
			goto out;
		}
	}
	rc = page_commit(c, prefix, l, dec);
	if (rc)
		snprintf(err, errlen, "%s", strerror(-rc));
out:
	if (p)
		XML_ParserFree(p);
	if (c) {
		for (size_t i = 0; i < c->nobjs; i++)
			free(c->objs[i].key);
		free(c->objs);
	}
	free(c);
	free(dec);
	return rc;
}
