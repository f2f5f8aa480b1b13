/*
 * records.c - sidecar parsing and range planning for strategy=records (see
 * records.h).  Pure functions over memory: no I/O, no locking.
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

static uint64_t mix(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int cmp_entry(const void *a, const void *b)
{
	const struct smp_idx_entry *x = a, *y = b;
	if (x->obj != y->obj)
		return x->obj < y->obj ? -1 : 1;
	return x->off < y->off ? -1 : x->off > y->off;
}

int smp__plan_ranges(struct smp_idx_entry *e, size_t n, uint64_t seed, struct smp_plan *out)
{
	memset(out, 0, sizeof(*out));
	if (n == 0)
		return 0;
	uint64_t rng = seed ^ 0x6a09e667f3bcc909ull;
	for (size_t i = n; i > 1; i--) { /* draw the order of every record */
		size_t j = (size_t)(mix(&rng) % i);
		struct smp_idx_entry t = e[i - 1];
		e[i - 1] = e[j];
		e[j] = t;
	}
	out->r = malloc(n * sizeof(*out->r));
	out->wanted = malloc(n * sizeof(*out->wanted));
	if (!out->r || !out->wanted) {
		smp__plan_free(out);
		return -ENOMEM;
	}
	/*
	 * Batches are a small slice of the draw (1/16th, within [16,
	 * SMP_PLAN_BATCH]) so that what is admitted first - all of it when the
	 * budget is small - is spread over the whole dataset, while records that
	 * happen to be near each other still share a request.
	 */
	size_t batch = n / 16;
	if (batch < 16)
		batch = 16;
	if (batch > SMP_PLAN_BATCH)
		batch = SMP_PLAN_BATCH;
	for (size_t b = 0; b < n; b += batch) {
		size_t m = n - b < batch ? n - b : batch;
		struct smp_idx_entry *x = e + b;
		qsort(x, m, sizeof(*x), cmp_entry);
		size_t first_range = out->n;
		for (size_t i = 0; i < m;) {
			struct smp_range *r = &out->r[out->n++];
			r->obj = x[i].obj;
			r->off = x[i].off;
			r->wanted = out->wanted + b + i;
			out->wanted[b + i] = x[i].off;
			uint64_t end = x[i].off + x[i].size;
			r->nwanted = 1;
			size_t k = i + 1;
			while (k < m && x[k].obj == r->obj && x[k].off <= end + SMP_COALESCE_GAP &&
			       x[k].off + x[k].size - r->off <= SMP_RANGE_MAX) {
				out->wanted[b + k] = x[k].off;
				end = x[k].off + x[k].size;
				r->nwanted++;
				k++;
			}
			r->len = end - r->off;
			i = k;
		}
		/* the ranges of one batch in a random order */
		for (size_t i = out->n - first_range; i > 1; i--) {
			size_t j = first_range + (size_t)(mix(&rng) % i);
			struct smp_range t = out->r[first_range + i - 1];
			out->r[first_range + i - 1] = out->r[j];
			out->r[j] = t;
		}
	}
	return 0;
}

void smp__plan_free(struct smp_plan *p)
{
	free(p->r);
	free(p->wanted);
	memset(p, 0, sizeof(*p));
}
