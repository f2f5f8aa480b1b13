/*
 * records.h - the `records` strategy's plan: random records located by
 * DALI-style index sidecars, nearby ranges coalesced (private to sampler/).
 *
 * A sidecar `<object>.idx` holds one line per record, `offset size`, where
 * size counts the whole framed record (header, payload, footer), as DALI's
 * tfrecord2idx writes it.  The plan shuffles every indexed record of this
 * rank (seeded), then takes them in batches (1/16th of the draw, at most
 * SMP_PLAN_BATCH records): within a batch, records of one
 * object whose gap is at most SMP_COALESCE_GAP become one range request
 * (at most SMP_RANGE_MAX bytes); the ranges of a batch are dispatched in a
 * random order.  Records inside a range that were not drawn are decoded
 * (their CRC checked: the framing must stay in sync) and not admitted.
 */
#ifndef RC_SAMPLER_RECORDS_H
#define RC_SAMPLER_RECORDS_H

#include <stddef.h>
#include <stdint.h>

#define SMP_COALESCE_GAP     ((uint64_t)64 << 10)
#define SMP_RANGE_MAX	     ((uint64_t)8 << 20)
#define SMP_PLAN_BATCH	     4096u
#define SMP_INDEX_CAP	     ((size_t)256 << 20) /* bytes of one sidecar */
#define SMP_PLAN_MAX_RECORDS 200000000u		 /* records in one plan */

struct smp_idx_entry {
	uint32_t obj;  /* index into the listing */
	uint32_t size; /* framed bytes */
	uint64_t off;
};

struct smp_range {
	uint32_t obj;
	uint64_t off, len;
	const uint64_t *wanted; /* sorted offsets of drawn records inside the range */
	uint32_t nwanted;
};

struct smp_plan {
	struct smp_range *r;
	size_t n;
	uint64_t *wanted; /* storage of every range's `wanted` */
};

/*
 * Parses one sidecar of object `obj` (size obj_size) and appends its entries
 * to *v (*n used, *cap allocated).  Lines must be `offset size` with
 * 16 <= size, offset + size <= obj_size, offsets increasing.  Returns 0, or
 * -EINVAL with a message naming the line, -E2BIG past SMP_PLAN_MAX_RECORDS,
 * -ENOMEM.
 */
int smp__parse_index(const char *body, size_t len, uint32_t obj, uint64_t obj_size,
		     struct smp_idx_entry **v, size_t *n, size_t *cap, char *err, size_t errlen);

/* Builds the plan from n entries (reordered in place).  0 or -ENOMEM. */
int smp__plan_ranges(struct smp_idx_entry *e, size_t n, uint64_t seed, struct smp_plan *out);

void smp__plan_free(struct smp_plan *p);

#endif
