/*
 * fuzz_s3_xml.c - libFuzzer target for one ListObjectsV2 page
 * (sampler/s3_xml.c, smp__s3_parse_page: the parser s3.c's listing loop
 * and explain_error() call, encoding-type=url decoding included).
 *
 * The first input byte picks the source prefix the page is parsed for
 * ("", "train/", "a", "ds/train/"); the rest is the response body, as any
 * server could send it.  Beyond what ASan/UBSan catch, every call must
 * keep the contract of s3_xml_i.h: a return of 0, -EPROTO, -EIO, -E2BIG or
 * -ENOMEM with a message for each failure, and -EIO exactly when the page
 * holds an error code; every key listed non-empty, at most SMP_KEY_MAX
 * bytes, not ending in '/', with an etag, and none listed by a
 * failure other than smp__listing_add()'s; the continuation token, error
 * code and message NUL-terminated within their arrays.
 */
#include "sampler/s3_xml_i.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sampler/listing_i.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const prefixes[] = {"", "train/", "a", "ds/train/"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct smp_listing l = {0};
	struct smp_s3_page pg;
	char err[256] = "";
	const char *prefix;
	char *body;
	int rc;

	if (size == 0)
		return 0;
	prefix = prefixes[data[0] % 4];
	/* exactly the body's bytes: a read past them trips ASan */
	body = malloc(size - 1 ? size - 1 : 1);
	if (!body)
		return 0;
	memcpy(body, data + 1, size - 1);
	rc = smp__s3_parse_page(body, size - 1, prefix, &l, &pg, err, sizeof(err));
	if (rc != 0 && rc != -EPROTO && rc != -EIO && rc != -E2BIG && rc != -ENOMEM)
		abort();
	if (rc != 0 && !err[0])
		abort(); /* every failure says why */
	if (!memchr(pg.token, '\0', sizeof(pg.token)) || !memchr(pg.code, '\0', sizeof(pg.code)) ||
	    !memchr(pg.message, '\0', sizeof(pg.message)))
		abort();
	if ((rc == -EIO) != (pg.code[0] != '\0') && rc != -EPROTO && rc != -ENOMEM)
		abort(); /* an error code is an error, and -EIO means one */
	if ((rc == -EPROTO || rc == -EIO) && l.n)
		abort(); /* a refused page lists nothing */
	for (size_t i = 0; i < l.n; i++) {
		size_t kl = strlen(l.v[i].key);
		if (kl == 0 || kl > SMP_KEY_MAX || l.v[i].key[kl - 1] == '/' ||
		    !smp_object_etag(&l.v[i]))
			abort();
	}
	smp_listing_free(&l);
	free(body);
	return 0;
}
