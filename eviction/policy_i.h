/*
 * policy_i.h - internals shared by the files of eviction/ (not for callers).
 */
#ifndef RC_EVICTION_POLICY_I_H
#define RC_EVICTION_POLICY_I_H

#include "eviction/policy.h"

/*
 * Sorts idx[0..k) (indices into shards) into the victim order of p,
 * ignoring pins and min_uses (`none` sorts as fifo).  Returns 0 or -ENOMEM
 * (idx unchanged).
 */
int evc__sort(enum cmn_policy p, uint64_t seed, const struct evc_shard *shards, size_t *idx,
	      size_t k);

/* splitmix64's finaliser: the `random` policy's key and the simulator's PRNG. */
uint64_t evc__mix64(uint64_t x);

#endif
