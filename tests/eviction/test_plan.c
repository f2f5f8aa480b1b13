/*
 * test_plan.c - the epoch boundary plan (eviction/plan.c): crafted cases
 * for each outcome (full budget, a limit that shrank, min_uses and pins
 * leaving no room without deadlock, none's freeze, over the limit), and a
 * property test over thousands of random statistics and entries, seeded
 * and reproducible (RC_PROPERTY_SEED, RC_PROPERTY_CASES).
 *
 * Properties (DESIGN invariants 3 and 4):
 *   P1 victims are distinct, valid, never pinned;
 *   P2 a victim below min_uses only when the limit forced it: every other
 *      candidate was evicted first, and without it used would exceed limit;
 *   P3 used_after <= limit, or every unpinned shard is gone;
 *      used_after + admit <= limit; admit <= entry admit;
 *   P4 no more than needed: without the last victim, used would be above
 *      the phase's target;
 *   P5 fifo evicts strictly in admission order: no candidate left behind
 *      is older (created, id) than a victim;
 *   P6 none evicts only above the limit, and admits nothing once full;
 *   P7 the reason is ok exactly when the budget is whole, and says why
 *      otherwise.
 */
#include "eviction/evictor.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define G (1ull << 30)
#define M (1ull << 20)

/* id, bytes, created, full_reads, last_use, pins */
#define SH(id, b, c, fr, lu, p)                                                                    \
	{                                                                                          \
		(id), (b), (c), (fr), (fr), (lu), (p)                                              \
	}

static struct evc_entry entry(uint64_t limit, uint64_t admit, enum cmn_policy p, uint32_t mu)
{
	struct evc_entry e = {0, CMN_EPOCH_OPEN, 1, limit, admit, p, mu, 0};
	return e;
}

START_TEST(full_budget_fifo)
{
	/* 4 x 5G used, limit 20G, admit 5G: evict the oldest one. */
	const struct evc_shard s[] = {SH(1, 5 * G, 3, 1, 0, 0), SH(2, 5 * G, 1, 1, 0, 0),
				      SH(3, 5 * G, 2, 1, 0, 0), SH(4, 5 * G, 4, 0, 0, 0)};
	struct evc_entry e = entry(20 * G, 5 * G, CMN_POLICY_FIFO, 0);
	struct evc_plan p;
	size_t v[4];
	ck_assert_int_eq(evc_plan_boundary(&e, 7, s, 4, 0, v, &p), 0);
	ck_assert_uint_eq(p.n_victims, 1);
	ck_assert_uint_eq(v[0], 1);
	ck_assert_uint_eq(p.used_before, 20 * G);
	ck_assert_uint_eq(p.used_after, 15 * G);
	ck_assert_uint_eq(p.admit, 5 * G);
	ck_assert_int_eq(p.reason, EVC_REASON_OK);
	ck_assert_str_eq(p.why, "");
}
END_TEST

START_TEST(shrunk_limit_honoured)
{
	/* 30G resident, the limit shrinks to 10G with admit 2G: evict down to 8G. */
	struct evc_shard s[6];
	for (int i = 0; i < 6; i++)
		s[i] = (struct evc_shard)SH(i + 1, 5 * G, (uint32_t)i, 2, 0, 0);
	struct evc_entry e = entry(10 * G, 2 * G, CMN_POLICY_FIFO, 0);
	struct evc_plan p;
	size_t v[6];
	ck_assert_int_eq(evc_plan_boundary(&e, 3, s, 6, 0, v, &p), 0);
	ck_assert_uint_eq(p.n_victims, 5); /* 5G left: <= 8G */
	for (size_t i = 0; i < 5; i++)
		ck_assert_uint_eq(v[i], i);
	ck_assert_uint_eq(p.used_after, 5 * G);
	ck_assert_uint_eq(p.admit, 2 * G);
	ck_assert_int_eq(p.reason, EVC_REASON_OK);
}
END_TEST

START_TEST(shrunk_limit_overrides_min_uses)
{
	/* All three shards are below min_uses=2; the limit shrank to 10G: the
	 * oldest unread ones go (limit_forced), the pinned one stays. */
	const struct evc_shard s[] = {SH(1, 6 * G, 0, 0, 0, 0), SH(2, 6 * G, 1, 1, 0, 0),
				      SH(3, 6 * G, 2, 0, 0, 1)};
	struct evc_entry e = entry(10 * G, 2 * G, CMN_POLICY_LRU, 2);
	struct evc_plan p;
	size_t v[3];
	ck_assert_int_eq(evc_plan_boundary(&e, 3, s, 3, 0, v, &p), 0);
	ck_assert_uint_eq(p.n_victims, 2);
	ck_assert_uint_eq(p.n_forced, 2);
	ck_assert_uint_eq(p.used_after, 6 * G);
	ck_assert_uint_eq(p.admit, 2 * G);
	ck_assert_int_eq(p.reason, EVC_REASON_LIMIT_FORCED);
	ck_assert_str_eq(p.why, "limit 10.0 GiB: evicted 2 shards read fewer than min_uses=2 "
				"times to stay within it");
}
END_TEST

START_TEST(min_uses_no_deadlock)
{
	/* 20G limit, admit 5G; 18G held by shards read once (min_uses 2), 2G read
	 * twice.  The boundary goes ahead with 2G of room, and says why. */
	const struct evc_shard s[] = {SH(1, 9 * G, 0, 1, 0, 0), SH(2, 9 * G, 1, 1, 0, 0),
				      SH(3, 2 * G, 0, 2, 0, 0)};
	struct evc_entry e = entry(20 * G, 5 * G, CMN_POLICY_FIFO, 2);
	struct evc_plan p;
	size_t v[3];
	ck_assert_int_eq(evc_plan_boundary(&e, 9, s, 3, 0, v, &p), 0);
	ck_assert_uint_eq(p.n_victims, 1);
	ck_assert_uint_eq(v[0], 2);
	ck_assert_uint_eq(p.admit, 2 * G);
	ck_assert_int_eq(p.reason, EVC_REASON_MIN_USES);
	ck_assert_str_eq(p.why, "admit 5.0 GiB cut to 2.0 GiB: 18.0 GiB of 20.0 GiB held by "
				"shards read fewer than min_uses=2 times");
	/* Nothing evictable at all: no fresh data, still no error. */
	const struct evc_shard t[] = {SH(1, 10 * G, 0, 1, 0, 0), SH(2, 10 * G, 1, 0, 0, 0)};
	ck_assert_int_eq(evc_plan_boundary(&e, 9, t, 2, 0, v, &p), 0);
	ck_assert_uint_eq(p.n_victims, 0);
	ck_assert_uint_eq(p.admit, 0);
	ck_assert_str_eq(p.why, "no fresh data: 20.0 GiB of 20.0 GiB held by shards read "
				"fewer than min_uses=2 times");
	ck_assert_str_eq(evc_reason_name(p.reason), "min_uses");
}
END_TEST

START_TEST(pins_and_draining)
{
	/* 12G pinned, 4G draining (other), 4G evictable: limit 20G, admit 8G. */
	const struct evc_shard s[] = {SH(1, 12 * G, 0, 3, 0, 2), SH(2, 4 * G, 1, 3, 0, 0)};
	struct evc_entry e = entry(20 * G, 8 * G, CMN_POLICY_USES, 0);
	struct evc_plan p;
	size_t v[2];
	ck_assert_int_eq(evc_plan_boundary(&e, 2, s, 2, 4 * G, v, &p), 0);
	ck_assert_uint_eq(p.n_victims, 1);
	ck_assert_uint_eq(v[0], 1);
	ck_assert_uint_eq(p.used_after, 16 * G);
	ck_assert_uint_eq(p.admit, 4 * G);
	ck_assert_int_eq(p.reason, EVC_REASON_PINNED);
	ck_assert_str_eq(p.why, "admit 8.0 GiB cut to 4.0 GiB: 16.0 GiB of 20.0 GiB held by "
				"open files");
	/* Pinned + draining above a limit that shrank: over_limit, admit 0. */
	struct evc_entry f = entry(10 * G, 1 * G, CMN_POLICY_USES, 0);
	ck_assert_int_eq(evc_plan_boundary(&f, 2, s, 2, 4 * G, v, &p), 0);
	ck_assert_uint_eq(p.n_victims, 1);
	ck_assert_uint_eq(p.used_after, 16 * G);
	ck_assert_uint_eq(p.admit, 0);
	ck_assert_int_eq(p.reason, EVC_REASON_OVER_LIMIT);
}
END_TEST

START_TEST(none_freezes)
{
	const struct evc_shard s[] = {SH(1, 6 * G, 0, 0, 0, 0), SH(2, 6 * G, 1, 4, 0, 0)};
	struct evc_plan p;
	size_t v[2];
	/* Not yet full: admit what fits, evict nothing. */
	struct evc_entry e = entry(18 * G, 8 * G, CMN_POLICY_NONE, 0);
	ck_assert_int_eq(evc_plan_boundary(&e, 1, s, 2, 0, v, &p), 0);
	ck_assert_uint_eq(p.n_victims, 0);
	ck_assert_uint_eq(p.admit, 6 * G);
	ck_assert_int_eq(p.reason, EVC_REASON_FROZEN);
	/* Room for less than one more file of the largest size: full. */
	struct evc_entry h = entry(16 * G, 8 * G, CMN_POLICY_NONE, 0);
	ck_assert_int_eq(evc_plan_boundary(&h, 1, s, 2, 0, v, &p), 0);
	ck_assert_uint_eq(p.n_victims, 0);
	ck_assert_uint_eq(p.admit, 0);
	ck_assert_int_eq(p.reason, EVC_REASON_FROZEN);
	/* Full: admit nothing. */
	struct evc_entry f = entry(12 * G, 8 * G, CMN_POLICY_NONE, 0);
	ck_assert_int_eq(evc_plan_boundary(&f, 1, s, 2, 0, v, &p), 0);
	ck_assert_uint_eq(p.n_victims, 0);
	ck_assert_uint_eq(p.admit, 0);
	ck_assert_str_eq(p.why, "no fresh data: policy none keeps 12.0 GiB of 12.0 GiB (frozen)");
	/* A limit that shrank under none: fifo order down to the limit, not below. */
	struct evc_entry g = entry(7 * G, 1 * G, CMN_POLICY_NONE, 0);
	ck_assert_int_eq(evc_plan_boundary(&g, 1, s, 2, 0, v, &p), 0);
	ck_assert_uint_eq(p.n_victims, 1);
	ck_assert_uint_eq(v[0], 0);
	ck_assert_uint_eq(p.used_after, 6 * G);
	ck_assert_uint_eq(p.admit, 0);
}
END_TEST

/* ---- property test -------------------------------------------------------- */

static uint64_t prng;

static uint64_t rnd(void)
{
	uint64_t x = (prng += 0x9e3779b97f4a7c15ULL);
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static uint64_t below(uint64_t n)
{
	return n ? rnd() % n : 0;
}

static int older(const struct evc_shard *a, const struct evc_shard *b)
{
	return a->created != b->created ? a->created < b->created : a->id < b->id;
}

/* Checks P1-P7 for one random case; the message names the case seed. */
static void one_case(uint64_t seed)
{
	struct evc_shard s[48];
	size_t v[48];
	char vic[48];
	prng = seed;
	size_t n = below(48);
	uint64_t total = 0;
	for (size_t i = 0; i < n; i++) {
		s[i].id = (int64_t)(i * 7 + below(7)) ^ 0x55; /* unique, not sorted */
		s[i].bytes = 1 + below(1000);
		s[i].created = (uint32_t)below(8);
		s[i].full_reads = below(4);
		s[i].reads = s[i].full_reads + below(3);
		s[i].last_use = below(100);
		s[i].pins = below(5) == 0 ? (uint32_t)(1 + below(2)) : 0;
		s[i].fresh = below(6) == 0; /* never in a view: not a soft victim */
		total += s[i].bytes;
	}
	struct evc_entry e;
	e.first = 0;
	e.last = CMN_EPOCH_OPEN;
	e.line = 1;
	e.limit = 1 + below(total + total / 2 + 10);
	e.admit = below(e.limit + 1);
	e.policy = (enum cmn_policy)below(5);
	e.min_uses = (uint32_t)below(4);
	e.seed = rnd();
	uint64_t other = below(3) == 0 ? below(e.limit / 3 + 1) : 0;

	struct evc_plan p;
	ck_assert_int_eq(evc_plan_boundary(&e, 1, s, n, other, v, &p), 0);
	ck_assert_uint_eq(p.used_before, total + other);

	/* P1 */
	memset(vic, 0, sizeof(vic));
	uint64_t vb = 0;
	size_t forced = 0, hard_fresh = 0;
	for (size_t i = 0; i < p.n_victims; i++) {
		ck_assert_msg(v[i] < n, "case %llu: victim index %zu of %zu",
			      (unsigned long long)seed, v[i], n);
		ck_assert_msg(!vic[v[i]], "case %llu: victim %zu twice", (unsigned long long)seed,
			      v[i]);
		vic[v[i]] = 1;
		ck_assert_msg(s[v[i]].pins == 0, "case %llu: pinned shard %lld evicted",
			      (unsigned long long)seed, (long long)s[v[i]].id);
		vb += s[v[i]].bytes;
		forced += s[v[i]].full_reads < e.min_uses;
		hard_fresh += s[v[i]].fresh; /* only the hard phase takes fresh shards */
	}
	ck_assert_uint_eq(p.used_after, total + other - vb);
	ck_assert_uint_eq(p.evict_bytes, vb);

	/* P2 */
	ck_assert_msg(forced == p.n_forced, "case %llu: %zu below min_uses, n_forced %zu",
		      (unsigned long long)seed, forced, p.n_forced);
	if ((forced || hard_fresh) && e.policy != CMN_POLICY_NONE) {
		for (size_t i = 0; i < n; i++)
			if (s[i].pins == 0 && !s[i].fresh && s[i].full_reads >= e.min_uses)
				ck_assert_msg(vic[i],
					      "case %llu: forced a floor shard before "
					      "candidate %zu",
					      (unsigned long long)seed, i);
	}
	if (forced) {
		const struct evc_shard *last = &s[v[p.n_victims - 1]];
		ck_assert_msg(p.used_after + last->bytes > e.limit,
			      "case %llu: forced eviction not needed for the limit",
			      (unsigned long long)seed);
	}

	/* P3 */
	uint64_t pinned = other;
	int all_unpinned_gone = 1;
	for (size_t i = 0; i < n; i++) {
		if (s[i].pins)
			pinned += s[i].bytes;
		else if (!vic[i])
			all_unpinned_gone = 0;
	}
	ck_assert_msg(p.used_after <= e.limit || (all_unpinned_gone && p.used_after == pinned),
		      "case %llu: used %llu above limit %llu with unpinned shards left",
		      (unsigned long long)seed, (unsigned long long)p.used_after,
		      (unsigned long long)e.limit);
	ck_assert_uint_le(p.admit, e.admit);
	ck_assert_msg(p.used_after + p.admit <= e.limit || p.admit == 0,
		      "case %llu: used %llu + admit %llu above limit %llu",
		      (unsigned long long)seed, (unsigned long long)p.used_after,
		      (unsigned long long)p.admit, (unsigned long long)e.limit);

	/* P4: the last victim was needed for its phase's target. */
	if (p.n_victims) {
		const struct evc_shard *last = &s[v[p.n_victims - 1]];
		uint64_t goal =
		    forced || hard_fresh || e.policy == CMN_POLICY_NONE ? e.limit : p.target;
		ck_assert_msg(p.used_after + last->bytes > goal,
			      "case %llu: evicted more than needed (used %llu, target %llu)",
			      (unsigned long long)seed, (unsigned long long)p.used_after,
			      (unsigned long long)goal);
	}

	/* P5 */
	if (e.policy == CMN_POLICY_FIFO) {
		for (size_t i = 1; i < p.n_victims; i++)
			if ((s[v[i - 1]].full_reads >= e.min_uses && !s[v[i - 1]].fresh) ==
			    (s[v[i]].full_reads >= e.min_uses && !s[v[i]].fresh))
				ck_assert_msg(older(&s[v[i - 1]], &s[v[i]]),
					      "case %llu: fifo victim %zu before an older one",
					      (unsigned long long)seed, i);
		for (size_t i = 0; i < p.n_victims; i++)
			for (size_t j = 0; j < n; j++)
				if (!vic[j] && !s[j].pins && !s[j].fresh &&
				    s[j].full_reads >= e.min_uses)
					ck_assert_msg(!older(&s[j], &s[v[i]]),
						      "case %llu: fifo kept %lld, older than "
						      "victim %lld",
						      (unsigned long long)seed, (long long)s[j].id,
						      (long long)s[v[i]].id);
	}

	/* P6: none evicts nothing below the limit and admits nothing once full
	 * (no room for one more file of the largest resident size). */
	if (e.policy == CMN_POLICY_NONE) {
		uint64_t largest = 0;
		for (size_t i = 0; i < n; i++)
			if (s[i].bytes > largest)
				largest = s[i].bytes;
		if (total + other <= e.limit)
			ck_assert_uint_eq(p.n_victims, 0);
		if (total + other >= e.limit || e.limit - total - other < largest)
			ck_assert_uint_eq(p.admit, 0);
		else
			ck_assert_uint_eq(p.admit, e.admit < e.limit - total - other
						       ? e.admit
						       : e.limit - total - other);
	}

	/* P7 */
	if (p.admit == e.admit)
		ck_assert_msg(p.reason == EVC_REASON_OK || p.reason == EVC_REASON_LIMIT_FORCED,
			      "case %llu: whole budget with reason %s", (unsigned long long)seed,
			      evc_reason_name(p.reason));
	else
		ck_assert_msg(p.reason != EVC_REASON_OK && p.why[0],
			      "case %llu: budget %llu < %llu without a reason",
			      (unsigned long long)seed, (unsigned long long)p.admit,
			      (unsigned long long)e.admit);
}

START_TEST(property_random_statistics)
{
	const char *s = getenv("RC_PROPERTY_SEED"), *c = getenv("RC_PROPERTY_CASES");
	uint64_t base = s ? strtoull(s, NULL, 0) : 20261122;
	uint64_t cases = c ? strtoull(c, NULL, 0) : 5000;
	for (uint64_t i = 0; i < cases; i++)
		one_case(base * 1000003 + i);
}
END_TEST

static Suite *plan_suite(void)
{
	Suite *s = suite_create("eviction-plan");
	struct {
		const char *name;
		const TTest *t;
	} cases[] = {
	    {"full-budget", full_budget_fifo},
	    {"shrunk-limit", shrunk_limit_honoured},
	    {"shrunk-limit-min-uses", shrunk_limit_overrides_min_uses},
	    {"min-uses-no-deadlock", min_uses_no_deadlock},
	    {"pins-draining", pins_and_draining},
	    {"none-freezes", none_freezes},
	    {"property", property_random_statistics},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		TCase *tc = tcase_create(cases[i].name);
		tcase_add_test(tc, cases[i].t);
		suite_add_tcase(s, tc);
	}
	return s;
}

int main(void)
{
	SRunner *r = srunner_create(plan_suite());
	srunner_run_all(r, CK_NORMAL);
	int failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
