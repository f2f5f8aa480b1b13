/*
 * records.c - sidecar parsing for strategy=records (see records.h).  A
 * pure function over memory: no I/O, no locking.
 */
#include "sampler/records.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/tfrecord.h"

int smp__parse_index(const char *body, size_t len, uint32_t obj, uint64_t obj_size,
		     struct smp_idx_entry **v, size_t *n, size_t *cap, char *err, size_t errlen)
{
	const char *p = body, *end = body + len;
	size_t line = 0;
	uint64_t prev_end = 0;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		char buf[64];
		size_t l = (size_t)(le - p);
		line++;
		const char *s = p;
		p = nl ? nl + 1 : end;
		if (l == 0 || (l == 1 && *s == '\r'))
			continue;
		if (l >= sizeof(buf)) {
			snprintf(err, errlen, "line %zu: expected `offset size`", line);
			return -EINVAL;
		}
		memcpy(buf, s, l);
		buf[l] = '\0';
		unsigned long long off, size;
		char extra;
		if (sscanf(buf, "%llu %llu %c", &off, &size, &extra) != 2 ||
		    size < CMN_TFR_OVERHEAD || size > UINT32_MAX || off < prev_end ||
		    off + size > obj_size) {
			snprintf(err, errlen,
				 "line %zu: `%s` is not `offset size` of a record inside the "
				 "object (%llu bytes) after the previous one",
				 line, buf, (unsigned long long)obj_size);
			return -EINVAL;
		}
		prev_end = off + size;
		if (*n >= SMP_PLAN_MAX_RECORDS) {
			snprintf(err, errlen, "more than %u indexed records", SMP_PLAN_MAX_RECORDS);
			return -E2BIG;
		}
		if (*n == *cap) {
			size_t nc = *cap ? *cap * 2 : 4096;
			struct smp_idx_entry *nv = realloc(*v, nc * sizeof(*nv));
			if (!nv)
				return -ENOMEM;
			*v = nv;
			*cap = nc;
		}
		(*v)[(*n)++] = (struct smp_idx_entry){obj, (uint32_t)size, off};
	}
	return 0;
}
