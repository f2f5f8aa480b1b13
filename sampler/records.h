/*
 * records.h - the `records` strategy's index sidecars (private to sampler/).
 *
 * A sidecar `<object>.idx` holds one line per record, `offset size`, where
 * size counts the whole framed record (header, payload, footer), as DALI's
 * tfrecord2idx writes it.  Each indexed record is a unit of the sampling
 * plan; the plan walks them and fetches runs of neighbouring free records
 * in one ranged request (sampler/plan.c; docs/sampler.md, "strategy = records").
 */
#ifndef RC_SAMPLER_RECORDS_H
#define RC_SAMPLER_RECORDS_H

#include <stddef.h>
#include <stdint.h>

#define SMP_INDEX_CAP	     ((size_t)256 << 20) /* bytes of one sidecar */
#define SMP_PLAN_MAX_RECORDS 200000000u		 /* records in one plan */

struct smp_idx_entry {
	uint32_t obj;  /* index into the listing */
	uint32_t size; /* framed bytes */
	uint64_t off;
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

#endif
