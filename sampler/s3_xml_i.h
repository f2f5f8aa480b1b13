/*
 * s3_xml_i.h - one ListObjectsV2 response page parsed (s3_xml.c), for
 * s3.c's listing loop and the fuzz target tests/sampler/fuzz_s3_xml.c.
 */
#ifndef RC_SAMPLER_S3_XML_I_H
#define RC_SAMPLER_S3_XML_I_H

#include <stdbool.h>
#include <stddef.h>

#include "sampler/listing.h"

/* Bytes of one element's text kept (keys, continuation tokens). */
#define SMP_S3_TEXT_CAP 4096

/* What a page says besides its objects. */
struct smp_s3_page {
	bool truncated;			 /* <IsTruncated>true</IsTruncated> */
	char token[SMP_S3_TEXT_CAP + 1]; /* <NextContinuationToken>, "" if none */
	char code[128];			 /* <Error><Code>, "" if none */
};

/*
 * Parses one ListObjectsV2 page body[0..len) (any bytes: the caller capped
 * len at SMP_LIST_BODY_CAP).  Every <Contents> whose <Key> starts with the
 * source prefix (prefix_len bytes, which the server was asked for) adds the
 * key without the prefix, its <Size> and <ETag> to l; the prefix itself,
 * "directory" markers (keys ending in '/'), keys over SMP_KEY_MAX bytes
 * after the prefix and keys outside the prefix are skipped.  Fills *pg.
 * Returns 0; -EPROTO for XML that is not well-formed, with a one-line
 * message naming the line; or an error of smp__listing_add() (-E2BIG,
 * -ENOMEM) with a message.  l keeps what was added before a failure (the
 * caller frees it).
 */
int smp__s3_parse_page(const char *body, size_t len, const char *prefix, struct smp_listing *l,
		       struct smp_s3_page *pg, char *err, size_t errlen);

#endif
