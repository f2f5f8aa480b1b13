/*
 * schedule.h - the per-epoch eviction schedule ([epoch N], [epoch N-M],
 * [epoch N-] sections of the config; DESIGN "Configuration").
 *
 * Built from the sections common/config.c parsed (struct cmn_epoch_section)
 * and the [cache] limit.  Rules (docs/eviction.md, "The schedule"):
 *
 *   - Sections may appear in any order; together their ranges must cover
 *     every epoch from 0 on exactly once: a gap, an overlap, a range that
 *     ends before it starts, a first section that does not start at 0, or a
 *     last section that is not open-ended ("[epoch N-]") is an error naming
 *     the file line of the section(s) at fault.
 *   - A key a section leaves out takes the value of the entry before it (in
 *     epoch order).  The first entry's defaults: limit = [cache] limit,
 *     admit = limit / 2, policy = fifo, min_uses = 0, seed = 0.
 *   - limit <= [cache] limit (the hard bound on disk), 0 < limit, and
 *     admit <= limit, else an error naming the line.
 *   - No sections at all: one entry [epoch 0-] with the defaults above.
 *
 * admit = limit / 2 is the largest admit under which fifo never evicts a
 * shard before it was read: each boundary evicts the shards read in the
 * epoch before and keeps the fresh ones.
 */
#ifndef RC_EVICTION_SCHEDULE_H
#define RC_EVICTION_SCHEDULE_H

#include "common/config.h"

#include <stddef.h>
#include <stdint.h>

/* One resolved entry: every key has a value. */
struct evc_entry {
	uint32_t first, last; /* inclusive; last = CMN_EPOCH_OPEN for "N-" */
	int line;	      /* line of the section header; 0 for the default entry */
	uint64_t limit;	      /* bytes on disk during these epochs */
	uint64_t admit;	      /* fresh bytes admitted per epoch; <= limit */
	enum cmn_policy policy;
	uint32_t min_uses;
	uint64_t seed;
};

struct evc_schedule {
	struct evc_entry *entries; /* sorted by first; owned */
	size_t n;		   /* >= 1 once built */
};

/*
 * Builds *out from n sections (any order; NULL/0 for none).  `path` names
 * the file in messages (NULL: "config").  Returns 0, or -EINVAL with one line
 * in err such as "train.ini:12: [epoch 3-9] overlaps [epoch 0-4] at line 7",
 * or -ENOMEM; *out is untouched on failure.  Free with evc_schedule_free().
 */
int evc_schedule_build(const struct cmn_epoch_section *secs, size_t n, uint64_t cache_limit,
		       const char *path, struct evc_schedule *out, char *err, size_t errlen);

/* The entry in force for `epoch` (never NULL for a built schedule). */
const struct evc_entry *evc_schedule_at(const struct evc_schedule *s, uint32_t epoch);

/*
 * One line for stats/status: "[epoch 5-] limit 200.0 GiB, admit 20.0 GiB,
 * policy lru, min_uses 2, seed 0".  Always NUL-terminates.  Returns buf.
 */
char *evc_entry_describe(const struct evc_entry *e, char *buf, size_t len);

/* Frees what s owns; s may be built again after. */
void evc_schedule_free(struct evc_schedule *s);

#endif
