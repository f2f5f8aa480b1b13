/*
 * fuzz_http_json.c - libFuzzer target for one nginx JSON autoindex page
 * (sampler/http_list.c, smp__parse_autoindex).
 *
 * The first input byte picks the directory the page is parsed for ("",
 * "d/", "a b/c/"); the rest is the page body.  Beyond what ASan/UBSan
 * catch, each call must keep the contract of http_list_i.h: a return of 0,
 * -EPROTO, -EFBIG, -E2BIG or -ENOMEM, a message for every failure; every
 * file key starts with the directory, is at most SMP_KEY_MAX bytes and has
 * no NUL; every directory queued ends in '/' and starts with the directory;
 * the queue stays within its cap.  And the page means the same with the
 * fast path and without it (jansson alone): the same return, message,
 * keys, sizes, etags and directories.
 */
#include "sampler/http_list_i.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sampler/listing_i.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const rels[] = {"", "d/", "a b/c/"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct smp_listing l = {0};
	struct smp_buf dirs = {.max = 1 << 20};
	char err[512] = "";
	const char *rel;
	char *body;
	int rc;

	if (size == 0)
		return 0;
	rel = rels[data[0] % 3];
	body = malloc(size - 1 ? size - 1 : 1);
	if (!body)
		return 0;
	memcpy(body, data + 1, size - 1);
	rc = smp__parse_autoindex(body, size - 1, rel, &l, &dirs, err, sizeof(err));
	if (rc != 0 && rc != -EPROTO && rc != -EFBIG && rc != -E2BIG && rc != -ENOMEM)
		abort();
	if (rc != 0 && !err[0])
		abort();
	size_t rl = strlen(rel);
	for (size_t i = 0; i < l.n; i++) {
		size_t kl = strlen(l.v[i].key);
		if (kl <= rl || kl > SMP_KEY_MAX || memcmp(l.v[i].key, rel, rl))
			abort();
	}
	if (dirs.len > dirs.max)
		abort();
	for (size_t off = 0; off < dirs.len;) {
		const char *d = dirs.p + off;
		size_t dl = strnlen(d, dirs.len - off);
		if (dl == dirs.len - off || dl <= rl || d[dl - 1] != '/' || memcmp(d, rel, rl))
			abort(); /* unterminated, empty, not a directory, or outside rel */
		off += dl + 1;
	}
	/* the same page through jansson alone */
	struct smp_listing lj = {0};
	struct smp_buf dj = {.max = 1 << 20};
	char errj[512] = "";
	smp__autoindex_fast = false;
	int rcj = smp__parse_autoindex(body, size - 1, rel, &lj, &dj, errj, sizeof(errj));
	smp__autoindex_fast = true;
	if (rcj != rc || strcmp(err, errj) || lj.n != l.n || dj.len != dirs.len ||
	    (dj.len && memcmp(dj.p, dirs.p, dj.len)))
		abort();
	for (size_t i = 0; i < l.n; i++)
		if (strcmp(l.v[i].key, lj.v[i].key) || l.v[i].size != lj.v[i].size ||
		    strcmp(smp_object_etag(&l.v[i]), smp_object_etag(&lj.v[i])))
			abort();
	smp_listing_free(&lj);
	free(dj.p);
	smp_listing_free(&l);
	free(dirs.p);
	free(body);
	return 0;
}
