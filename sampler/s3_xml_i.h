/*
 * s3_xml_i.h - one ListObjectsV2 response page parsed (s3_xml.c): the one
 * parser of S3 listings, called by s3.c's listing loop once per page and
 * by explain_error() for a refused request's <Error> body, and reached
 * without libcurl by tests/sampler/test_s3_xml.c and the fuzz target
 * tests/sampler/fuzz_s3_xml.c.
 */
#ifndef RC_SAMPLER_S3_XML_I_H
#define RC_SAMPLER_S3_XML_I_H

#include <stdbool.h>
#include <stddef.h>

#include "sampler/listing.h"

/* Bytes of one element's text kept (keys, continuation tokens, <Prefix>). */
#define SMP_S3_TEXT_CAP 4096

/* Keys of a page not listed, by why (s3.c sums them for one warning). */
struct smp_s3_skipped {
	size_t overlong;   /* over SMP_S3_TEXT_CAP as written or SMP_KEY_MAX past the prefix */
	size_t bad_escape; /* EncodingType url and a '%' not followed by two hex digits */
	size_t nul;	   /* decoded to hold a NUL byte ("%00") */
	size_t outside;	   /* not under the prefix asked for */
	size_t dirs;	   /* "directory" markers: keys ending in '/' */
};

/* What a page says besides its objects. */
struct smp_s3_page {
	bool truncated;			 /* <IsTruncated>true</IsTruncated> */
	char token[SMP_S3_TEXT_CAP + 1]; /* <NextContinuationToken>, "" if none */
	char code[128];			 /* <Error><Code>, "" if none */
	char message[256];		 /* <Error><Message>, "" if none */
	struct smp_s3_skipped skipped;	 /* this page's keys not listed */
};

/*
 * Parses one ListObjectsV2 page body[0..len) (any bytes; len at most
 * SMP_LIST_BODY_CAP) for the source prefix (as asked for, "" or ending in
 * '/').  Each <Contents><Key> is decoded when the answer says
 * <EncodingType>url</EncodingType> (smp__s3_url_decode) and, when it is
 * under the prefix, added to l without the prefix with its <Size> and
 * <ETag>.  A key that cannot be an object of ours is skipped and counted in
 * pg->skipped, never fatal: over-long, a bad %-escape, holding NUL, outside
 * the prefix, a "directory" marker (the prefix itself is skipped uncounted).
 * Fills *pg (zeroed first).
 *
 * Returns 0; -EPROTO for XML that is not well-formed (the message names the
 * line) or for an answer whose <Prefix> (decoded the same way) is not the
 * prefix (the server ignored `prefix`); -EIO for an <Error> document
 * (pg->code and pg->message hold what it said, control bytes left as sent);
 * -EFBIG for len over the cap; or an error of smp__listing_add() (-E2BIG,
 * -ENOMEM).  Every failure writes a one-line message to err (without the
 * source's name: the caller adds it).  Only a failure of
 * smp__listing_add() leaves keys of the page in l; l keeps what was added
 * before a failure (the caller frees it).
 */
int smp__s3_parse_page(const char *body, size_t len, const char *prefix, struct smp_listing *l,
		       struct smp_s3_page *pg, char *err, size_t errlen);

/*
 * Decodes a key, prefix or start-after of a ListObjectsV2 answer sent with
 * encoding-type=url ('+' is a space, %XX a byte, as botocore's
 * unquote_plus reads them) into out (capacity outlen).  Returns the decoded
 * length (the text may hold NUL bytes from "%00"), -EPROTO for a '%' not
 * followed by two hex digits, -ENAMETOOLONG when out is too small.
 */
int smp__s3_url_decode(const char *in, char *out, size_t outlen);

#endif
