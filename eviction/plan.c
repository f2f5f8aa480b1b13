/*
 * plan.c - the boundary plan: victims, admit budget and the reason for a
 * short budget (the arithmetic is in evictor.h's comment).
 *
 * Pure: no I/O, no globals, no locks.  Does not apply the plan
 * (daemon/boundary.c does) and does not choose the order of victims
 * (policy.c does).  Cites DESIGN invariants 3 (pinned files are never
 * victims) and 4 (used_after + admit <= limit).  Debug builds assert the
 * boundary's E1 (no pinned victim), E3 (a shard read fewer than min_uses
 * times is a victim only in the hard phase) and E5 (the admit is what
 * fits, never a wait; a shortfall has its reason) here, where the plan
 * makes them true (daemon/boundary.c numbers them).
 */
#include "eviction/evictor.h"
#include "eviction/policy_i.h"
#include "common/units.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const reason_names[] = {"ok",	 "frozen",	 "min_uses", "pinned",
					   "over_limit", "limit_forced", "fresh"};

const char *evc_reason_name(enum evc_reason r)
{
	if ((unsigned)r < sizeof(reason_names) / sizeof(reason_names[0]))
		return reason_names[r];
	return "?";
}

static uint64_t sub0(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

/* Writes out->why for a reason other than OK. */
static void explain(const struct evc_entry *s, struct evc_plan *out)
{
	char lim[32], used[32], want[32], got[32], held[32], pin[32], head[96];

	cmn_format_size(s->limit, lim, sizeof(lim));
	cmn_format_size(out->used_after, used, sizeof(used));
	cmn_format_size(s->admit, want, sizeof(want));
	cmn_format_size(out->admit, got, sizeof(got));
	cmn_format_size(out->held_pinned, pin, sizeof(pin));
	if (out->admit == 0)
		snprintf(head, sizeof(head), "no fresh data");
	else
		snprintf(head, sizeof(head), "admit %s cut to %s", want, got);

	switch (out->reason) {
	case EVC_REASON_FROZEN:
		snprintf(out->why, sizeof(out->why), "%s: policy none keeps %s of %s (frozen)",
			 head, used, lim);
		break;
	case EVC_REASON_MIN_USES:
		cmn_format_size(out->held_min_uses, held, sizeof(held));
		if (out->held_pinned)
			snprintf(out->why, sizeof(out->why),
				 "%s: %s of %s held by shards read fewer than min_uses=%u times, "
				 "%s by open files",
				 head, held, lim, s->min_uses, pin);
		else
			snprintf(out->why, sizeof(out->why),
				 "%s: %s of %s held by shards read fewer than min_uses=%u times",
				 head, held, lim, s->min_uses);
		break;
	case EVC_REASON_PINNED:
		snprintf(out->why, sizeof(out->why), "%s: %s of %s held by open files", head, pin,
			 lim);
		break;
	case EVC_REASON_OVER_LIMIT:
		snprintf(out->why, sizeof(out->why),
			 "no fresh data: %s held by open files is over the limit %s; it drains as "
			 "they close",
			 pin, lim);
		break;
	case EVC_REASON_LIMIT_FORCED:
		snprintf(out->why, sizeof(out->why),
			 "limit %s: evicted %zu shards read fewer than min_uses=%u times to stay "
			 "within it",
			 lim, out->n_forced, s->min_uses);
		break;
	case EVC_REASON_FRESH: {
		char fr[32];
		cmn_format_size(out->held_fresh, fr, sizeof(fr));
		snprintf(out->why, sizeof(out->why),
			 "%s: %s of %s held by fresh files, not yet in any view", head, fr, lim);
		break;
	}
	case EVC_REASON_OK:
	default:
		out->why[0] = '\0';
		break;
	}
}

int evc_plan_boundary(const struct evc_entry *s, uint32_t epoch, const struct evc_shard *shards,
		      size_t n, uint64_t other, size_t *victims, struct evc_plan *out)
{
	/* random re-draws at every boundary: a shard that survived one draw
	 * must not be safe forever (a fixed key per shard would keep the
	 * oldest survivors and evict mostly fresh, unread shards). */
	uint64_t seed = evc__mix64(s->seed ^ ((uint64_t)epoch << 32));
	memset(out, 0, sizeof(*out));
	uint64_t used = other;
	for (size_t i = 0; i < n; i++)
		used += shards[i].bytes;
	out->used_before = used;
	out->target = sub0(s->limit, s->admit);

	/*
	 * 1. soft phase: the policy down to limit - admit, over the shards that
	 * have been in a view (fresh ones are held like pinned ones here).
	 */
	size_t k = 0;
	if (s->policy != CMN_POLICY_NONE) {
		struct evc_shard *soft = malloc((n ? n : 1) * sizeof(*soft));
		if (!soft)
			return -ENOMEM;
		for (size_t i = 0; i < n; i++) {
			soft[i] = shards[i];
			if (shards[i].fresh)
				soft[i].pins = 1;
		}
		int rc = evc_select(s->policy, seed, s->min_uses, soft, n, used, out->target,
				    victims, &k, &used);
		free(soft);
		if (rc < 0)
			return rc;
	}

	/* 2. hard phase: a limit that shrank below what the floor holds. */
	if (used > s->limit) {
		char *gone = calloc(n ? n : 1, 1);
		size_t *rest = malloc((n ? n : 1) * sizeof(*rest));
		if (!gone || !rest) {
			free(gone);
			free(rest);
			return -ENOMEM;
		}
		for (size_t i = 0; i < k; i++)
			gone[victims[i]] = 1;
		size_t m = 0;
		for (size_t i = 0; i < n; i++)
			if (!gone[i] && shards[i].pins == 0)
				rest[m++] = i;
		int rc = evc__sort(s->policy, seed, shards, rest, m);
		for (size_t i = 0; rc == 0 && i < m && used > s->limit; i++) {
			const struct evc_shard *x = &shards[rest[i]];
			victims[k++] = rest[i];
			used = sub0(used, x->bytes);
			if (x->full_reads < s->min_uses)
				out->n_forced++;
		}
		free(gone);
		free(rest);
		if (rc < 0)
			return rc;
	}
	out->n_victims = k;
	out->used_after = used;
	out->evict_bytes = out->used_before - used;

	/* What stays, and why it could not go. */
	char *victim = calloc(n ? n : 1, 1);
	if (!victim)
		return -ENOMEM;
	size_t below_min_uses = 0;
	for (size_t i = 0; i < k; i++) {
		victim[victims[i]] = 1;
		/* E1 (DESIGN 3): a pinned shard is never a victim */
		assert(shards[victims[i]].pins == 0);
		below_min_uses += shards[victims[i]].full_reads < s->min_uses;
	}
	/* E3: a shard read fewer than min_uses times goes only in the hard phase */
	assert(below_min_uses == out->n_forced);
	(void)below_min_uses;
	out->held_pinned = other;
	for (size_t i = 0; i < n; i++) {
		if (victim[i])
			continue;
		if (shards[i].pins)
			out->held_pinned += shards[i].bytes;
		else if (shards[i].fresh)
			out->held_fresh += shards[i].bytes;
		else if (shards[i].full_reads < s->min_uses)
			out->held_min_uses += shards[i].bytes;
	}
	free(victim);

	/* 3. the admit budget. */
	uint64_t room = sub0(s->limit, used);
	/*
	 * none freezes once full, even after a shrunk limit evicted.  "Full"
	 * means no room for one more file of the largest size resident: a
	 * smaller grant would only trickle in a partial shard each epoch.
	 */
	uint64_t largest = 0;
	for (size_t i = 0; i < n; i++)
		if (shards[i].bytes > largest)
			largest = shards[i].bytes;
	if (s->policy == CMN_POLICY_NONE &&
	    (out->used_before >= s->limit || sub0(s->limit, out->used_before) < largest))
		room = 0;
	out->admit = room < s->admit ? room : s->admit;
	if (out->admit == s->admit)
		out->reason = out->n_forced ? EVC_REASON_LIMIT_FORCED : EVC_REASON_OK;
	else if (used > s->limit)
		out->reason = EVC_REASON_OVER_LIMIT;
	else if (s->policy == CMN_POLICY_NONE)
		out->reason = EVC_REASON_FROZEN;
	else if (out->held_fresh > out->held_pinned && out->held_fresh > out->held_min_uses)
		out->reason = EVC_REASON_FRESH;
	else if (out->held_min_uses >= out->held_pinned)
		out->reason = EVC_REASON_MIN_USES;
	else
		out->reason = EVC_REASON_PINNED;
	/* E5: never waits for room: grants what fits, and names why when it is less */
	assert(out->admit <= s->admit && (out->admit == s->admit || out->reason != EVC_REASON_OK));
	explain(s, out);
	return 0;
}
