/*
 * fuzz_manifest.c - libFuzzer target for the MANIFEST parser
 * (sampler/http_list.c, smp__parse_manifest): `name size` lines.
 *
 * The input is the MANIFEST body.  Beyond what ASan/UBSan catch, each call
 * must keep the contract of http_list_i.h: 0, or -EINVAL/-E2BIG/-ENOMEM
 * with a message naming the line; never more objects than lines; every key
 * non-empty, at most SMP_KEY_MAX bytes, without leading or trailing blanks
 * (they separate fields).
 */
#include "sampler/http_list_i.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sampler/listing_i.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct smp_listing l = {0};
	char err[512] = "";
	char *body = malloc(size ? size : 1);
	size_t lines = 1;
	int rc;

	if (!body)
		return 0;
	memcpy(body, data, size);
	for (size_t i = 0; i < size; i++)
		lines += body[i] == '\n';
	rc = smp__parse_manifest(body, size, &l, err, sizeof(err));
	if (rc != 0 && rc != -EINVAL && rc != -E2BIG && rc != -ENOMEM)
		abort();
	if (rc != 0 && strncmp(err, "MANIFEST line ", 14))
		abort();
	if (l.n > lines)
		abort();
	for (size_t i = 0; i < l.n; i++) {
		const char *k = l.v[i].key;
		size_t kl = strlen(k);
		if (kl == 0 || kl > SMP_KEY_MAX || k[0] == ' ' || k[0] == '\t' ||
		    k[kl - 1] == ' ' || k[kl - 1] == '\t')
			abort();
	}
	smp_listing_free(&l);
	free(body);
	return 0;
}
