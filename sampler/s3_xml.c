/*
 * s3_xml.c - one ListObjectsV2 response page (XML) parsed with expat into
 * a listing (s3_xml_i.h).
 *
 * Owns nothing beyond one call.  Does not fetch pages or follow
 * continuation tokens (s3.c does) and never turns a key into a local path
 * (DESIGN 7).  Bounds: each element's text is capped at SMP_S3_TEXT_CAP
 * bytes (a longer key is skipped, a longer token ends the listing with an
 * error in s3.c); nesting is followed by depth only, so memory is the
 * parser's own plus one struct.  Split out of s3.c so that the fuzz target
 * (tests/sampler/fuzz_s3_xml.c) reaches it without libcurl.  No locking.
 */
#include "sampler/s3_xml_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <expat.h>

#include "sampler/listing_i.h"

#define TEXT_CAP SMP_S3_TEXT_CAP

enum field { F_NONE, F_KEY, F_SIZE, F_ETAG, F_TRUNC, F_TOKEN, F_CODE };

struct xml_ctx {
	struct smp_listing *l;
	struct smp_s3_page *pg;
	int depth;
	bool in_contents;
	enum field f;
	char text[TEXT_CAP + 1];
	size_t tlen;
	bool overflow;
	char key[TEXT_CAP + 1], etag[128];
	uint64_t size;
	int rc;
	const char *prefix;
	size_t prefix_len;
};

/* Copies src into dst (capacity n > 0), truncating; always NUL-terminates. */
static void copy_str(char *dst, size_t n, const char *src)
{
	size_t l = strlen(src);
	if (l >= n)
		l = n - 1;
	memcpy(dst, src, l);
	dst[l] = '\0';
}

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

static void on_end(void *ud, const XML_Char *name)
{
	struct xml_ctx *c = ud;
	c->text[c->tlen] = '\0';
	if (c->f != F_NONE && c->overflow) {
		if (c->f == F_KEY)
			c->key[0] = '\0'; /* skipped below */
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
			c->pg->truncated = !strcmp(c->text, "true");
			break;
		case F_TOKEN:
			memcpy(c->pg->token, c->text, c->tlen + 1);
			break;
		case F_CODE:
			copy_str(c->pg->code, sizeof(c->pg->code), c->text);
			break;
		default:
			break;
		}
	}
	c->f = F_NONE;
	if (c->depth == 2 && c->in_contents && !strcmp(name, "Contents")) {
		c->in_contents = false;
		size_t kl = strlen(c->key);
		if (kl <= c->prefix_len || kl - c->prefix_len > SMP_KEY_MAX ||
		    c->key[kl - 1] == '/' || memcmp(c->key, c->prefix, c->prefix_len)) {
			/* the prefix itself, a "directory" marker, an over-long key,
			 * or a key outside the prefix asked for */
		} else if (!c->rc) {
			c->rc = smp__listing_add(c->l, c->key + c->prefix_len, kl - c->prefix_len,
						 c->size, c->etag);
		}
	}
	c->depth--;
}

int smp__s3_parse_page(const char *body, size_t len, const char *prefix, struct smp_listing *l,
		       struct smp_s3_page *pg, char *err, size_t errlen)
{
	struct xml_ctx *c = calloc(1, sizeof(*c));
	XML_Parser p = NULL;
	int rc = -ENOMEM;

	pg->truncated = false;
	pg->token[0] = pg->code[0] = '\0';
	if (!c || len > SMP_LIST_BODY_CAP || !(p = XML_ParserCreate("UTF-8"))) {
		if (c && len > SMP_LIST_BODY_CAP) {
			rc = -EFBIG;
			snprintf(err, errlen, "listing page of %zu bytes (the cap is %zu)", len,
				 SMP_LIST_BODY_CAP);
		}
		goto out;
	}
	c->l = l;
	c->pg = pg;
	c->prefix = prefix;
	c->prefix_len = strlen(prefix);
	XML_SetUserData(p, c);
	XML_SetElementHandler(p, on_start, on_end);
	XML_SetCharacterDataHandler(p, on_text);
	if (XML_Parse(p, body ? body : "", (int)len, 1) == XML_STATUS_ERROR) {
		snprintf(err, errlen, "bad XML at line %lu: %s",
			 (unsigned long)XML_GetCurrentLineNumber(p),
			 XML_ErrorString(XML_GetErrorCode(p)));
		rc = -EPROTO;
		goto out;
	}
	rc = c->rc;
	if (rc)
		snprintf(err, errlen, "%s", strerror(-rc));
out:
	if (p)
		XML_ParserFree(p);
	free(c);
	return rc;
}
