/*
 * policy.c - the victim order of each policy (see policy.h for the keys).
 *
 * Owns nothing: every function is pure over its arguments and thread-safe.
 * Does not decide how much to evict at an epoch boundary (plan.c does) and
 * does not apply anything (evictor.c and cachefs do).
 *
 * Each policy is a sort key of three 64-bit words compared in order, then
 * the id; sorting keys (not comparing shards through a policy switch) keeps
 * qsort() free of context and every order total, hence deterministic.
 */
#include "eviction/policy_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sort_key {
	uint64_t k[3];
	int64_t id;
	size_t idx;
};

uint64_t evc__mix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static int key_cmp(const void *a, const void *b)
{
	const struct sort_key *x = a, *y = b;

	for (int i = 0; i < 3; i++)
		if (x->k[i] != y->k[i])
			return x->k[i] < y->k[i] ? -1 : 1;
	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	/* Equal ids (a caller's mistake) still sort totally. */
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static void make_key(enum cmn_policy p, uint64_t seed, const struct evc_shard *s, size_t idx,
		     struct sort_key *k)
{
	k->id = s->id;
	k->idx = idx;
	k->k[0] = k->k[1] = k->k[2] = 0;
	switch (p) {
	case CMN_POLICY_LRU:
		k->k[0] = s->last_use;
		k->k[1] = s->created;
		break;
	case CMN_POLICY_USES:
		k->k[0] = UINT64_MAX - s->full_reads; /* most used first */
		k->k[1] = s->created;
		break;
	case CMN_POLICY_RANDOM:
		k->k[0] = evc__mix64(seed ^ evc__mix64((uint64_t)s->id));
		break;
	case CMN_POLICY_FIFO:
	case CMN_POLICY_NONE:
	default:
		k->k[0] = s->created;
		break;
	}
}

int evc__sort(enum cmn_policy p, uint64_t seed, const struct evc_shard *shards, size_t *idx,
	      size_t k)
{
	if (k < 2)
		return 0;
	struct sort_key *keys = malloc(k * sizeof(*keys));
	if (!keys)
		return -ENOMEM;
	for (size_t i = 0; i < k; i++)
		make_key(p, seed, &shards[idx[i]], idx[i], &keys[i]);
	qsort(keys, k, sizeof(*keys), key_cmp);
	for (size_t i = 0; i < k; i++)
		idx[i] = keys[i].idx;
	free(keys);
	return 0;
}

static int policy_known(enum cmn_policy p)
{
	switch (p) {
	case CMN_POLICY_FIFO:
	case CMN_POLICY_LRU:
	case CMN_POLICY_USES:
	case CMN_POLICY_RANDOM:
	case CMN_POLICY_NONE:
		return 1;
	}
	return 0;
}

int evc_order(enum cmn_policy p, uint64_t seed, uint32_t min_uses, const struct evc_shard *shards,
	      size_t n, size_t *order, size_t *n_order)
{
	if (!policy_known(p))
		return -EINVAL;
	size_t k = 0;
	if (p != CMN_POLICY_NONE) {
		for (size_t i = 0; i < n; i++)
			if (shards[i].pins == 0 && shards[i].full_reads >= min_uses)
				order[k++] = i;
	}
	int rc = evc__sort(p, seed, shards, order, k);
	if (rc < 0)
		return rc;
	*n_order = k;
	return 0;
}

int evc_select(enum cmn_policy p, uint64_t seed, uint32_t min_uses, const struct evc_shard *shards,
	       size_t n, uint64_t used, uint64_t target, size_t *victims, size_t *n_victims,
	       uint64_t *used_after)
{
	size_t k;
	int rc = evc_order(p, seed, min_uses, shards, n, victims, &k);
	if (rc < 0)
		return rc;
	size_t taken = 0;
	while (taken < k && used > target) {
		uint64_t b = shards[victims[taken]].bytes;
		used = b > used ? 0 : used - b;
		taken++;
	}
	*n_victims = taken;
	*used_after = used;
	return 0;
}
