/*
 * test_policy.c - the victim order of each policy on crafted statistics
 * (eviction/policy.c): exact expected orders, pins (DESIGN invariant 3)
 * and the min_uses floor.
 */
#include "eviction/policy.h"

#include <check.h>
#include <errno.h>
#include <stdlib.h>

/* id, bytes, created, reads, full_reads, last_use, pins */
#define SH(id, b, c, fr, lu, p)                                                                    \
	{                                                                                          \
		(id), (b), (c), (fr), (fr), (lu), (p)                                              \
	}

static const struct evc_shard stats[] = {
    SH(10, 100, 2, 1, 50, 0), /* 0 */
    SH(11, 100, 0, 3, 40, 0), /* 1 */
    SH(12, 100, 1, 0, 30, 0), /* 2: never read: last_use is its admission */
    SH(13, 100, 0, 2, 60, 0), /* 3 */
    SH(14, 100, 1, 3, 20, 0), /* 4 */
};
#define N (sizeof(stats) / sizeof(stats[0]))

static void expect_order(enum cmn_policy p, uint32_t min_uses, const struct evc_shard *s, size_t n,
			 const size_t *want, size_t n_want)
{
	size_t order[16], k = 99;
	ck_assert_int_eq(evc_order(p, 7, min_uses, s, n, order, &k), 0);
	ck_assert_uint_eq(k, n_want);
	for (size_t i = 0; i < k; i++)
		ck_assert_msg(order[i] == want[i],
			      "policy %d position %zu: got index %zu, want %zu", (int)p, i,
			      order[i], want[i]);
}

START_TEST(fifo_oldest_admitted_first)
{
	/* created 0: ids 11, 13; created 1: 12, 14; created 2: 10. */
	const size_t want[] = {1, 3, 2, 4, 0};
	expect_order(CMN_POLICY_FIFO, 0, stats, N, want, 5);
}
END_TEST

START_TEST(lru_least_recent_first)
{
	/* last_use: 14:20, 12:30 (admission), 11:40, 10:50, 13:60 */
	const size_t want[] = {4, 2, 1, 0, 3};
	expect_order(CMN_POLICY_LRU, 0, stats, N, want, 5);
}
END_TEST

START_TEST(lru_ties_by_created_then_id)
{
	const struct evc_shard s[] = {SH(5, 1, 3, 1, 9, 0), SH(4, 1, 3, 1, 9, 0),
				      SH(9, 1, 1, 1, 9, 0)};
	const size_t want[] = {2, 1, 0};
	expect_order(CMN_POLICY_LRU, 0, s, 3, want, 3);
}
END_TEST

START_TEST(uses_most_read_first)
{
	/* full_reads 3: 11 (created 0), 14 (created 1); 2: 13; 1: 10; 0: 12 */
	const size_t want[] = {1, 4, 3, 0, 2};
	expect_order(CMN_POLICY_USES, 0, stats, N, want, 5);
}
END_TEST

START_TEST(random_is_seeded_and_input_order_free)
{
	size_t a[N], b[N], c[N], ka, kb, kc;
	struct evc_shard rev[N];
	for (size_t i = 0; i < N; i++)
		rev[i] = stats[N - 1 - i];
	ck_assert_int_eq(evc_order(CMN_POLICY_RANDOM, 42, 0, stats, N, a, &ka), 0);
	ck_assert_int_eq(evc_order(CMN_POLICY_RANDOM, 42, 0, rev, N, b, &kb), 0);
	ck_assert_uint_eq(ka, N);
	ck_assert_uint_eq(kb, N);
	/* Same seed: same ids in the same order, whatever the input order. */
	for (size_t i = 0; i < N; i++)
		ck_assert_int_eq(stats[a[i]].id, rev[b[i]].id);
	/* Some seed gives another order (a fixed order would not be random). */
	int differs = 0;
	for (uint64_t seed = 1; seed < 20 && !differs; seed++) {
		ck_assert_int_eq(evc_order(CMN_POLICY_RANDOM, seed, 0, stats, N, c, &kc), 0);
		for (size_t i = 0; i < N; i++)
			differs |= c[i] != a[i];
	}
	ck_assert_msg(differs, "20 seeds gave the same order");
}
END_TEST

START_TEST(none_evicts_nothing)
{
	size_t order[N], k = 99;
	ck_assert_int_eq(evc_order(CMN_POLICY_NONE, 0, 0, stats, N, order, &k), 0);
	ck_assert_uint_eq(k, 0);
}
END_TEST

START_TEST(pinned_never_a_victim)
{
	/* DESIGN invariant 3: pins > 0 is never in the order, under any policy. */
	struct evc_shard s[N];
	for (size_t i = 0; i < N; i++)
		s[i] = stats[i];
	s[1].pins = 1; /* the oldest and most used */
	s[4].pins = 3; /* the least recent */
	for (int p = CMN_POLICY_FIFO; p <= CMN_POLICY_RANDOM; p++) {
		size_t order[N], k;
		ck_assert_int_eq(evc_order((enum cmn_policy)p, 1, 0, s, N, order, &k), 0);
		ck_assert_uint_eq(k, 3);
		for (size_t i = 0; i < k; i++)
			ck_assert_msg(order[i] != 1 && order[i] != 4, "policy %d evicts pinned %zu",
				      p, order[i]);
	}
	const size_t want[] = {3, 2, 0};
	expect_order(CMN_POLICY_FIFO, 0, s, N, want, 3);
}
END_TEST

START_TEST(min_uses_floor)
{
	/* min_uses 2 leaves out 10 (1 use) and 12 (0 uses), under every policy. */
	const size_t fifo[] = {1, 3, 4}, lru[] = {4, 1, 3}, uses[] = {1, 4, 3};
	expect_order(CMN_POLICY_FIFO, 2, stats, N, fifo, 3);
	expect_order(CMN_POLICY_LRU, 2, stats, N, lru, 3);
	expect_order(CMN_POLICY_USES, 2, stats, N, uses, 3);
	size_t order[N], k;
	ck_assert_int_eq(evc_order(CMN_POLICY_RANDOM, 3, 2, stats, N, order, &k), 0);
	ck_assert_uint_eq(k, 3);
	for (size_t i = 0; i < k; i++)
		ck_assert_uint_ge(stats[order[i]].full_reads, 2);
	/* A floor above every count: nothing is evictable. */
	expect_order(CMN_POLICY_FIFO, 4, stats, N, NULL, 0);
}
END_TEST

START_TEST(select_shortest_prefix)
{
	size_t v[N], k;
	uint64_t after;
	/* 500 used, target 300: two fifo victims (ids 11, 13). */
	ck_assert_int_eq(evc_select(CMN_POLICY_FIFO, 0, 0, stats, N, 500, 300, v, &k, &after), 0);
	ck_assert_uint_eq(k, 2);
	ck_assert_uint_eq(v[0], 1);
	ck_assert_uint_eq(v[1], 3);
	ck_assert_uint_eq(after, 300);
	/* target 250: a third victim, since 300 > 250. */
	ck_assert_int_eq(evc_select(CMN_POLICY_FIFO, 0, 0, stats, N, 500, 250, v, &k, &after), 0);
	ck_assert_uint_eq(k, 3);
	ck_assert_uint_eq(after, 200);
	/* already under target: nothing. */
	ck_assert_int_eq(evc_select(CMN_POLICY_LRU, 0, 0, stats, N, 500, 500, v, &k, &after), 0);
	ck_assert_uint_eq(k, 0);
	ck_assert_uint_eq(after, 500);
	/* the order runs out: all of it, and after stays above target. */
	ck_assert_int_eq(evc_select(CMN_POLICY_USES, 0, 3, stats, N, 500, 0, v, &k, &after), 0);
	ck_assert_uint_eq(k, 2);
	ck_assert_uint_eq(after, 300);
}
END_TEST

START_TEST(unknown_policy_rejected)
{
	size_t v[N], k;
	ck_assert_int_eq(evc_order((enum cmn_policy)99, 0, 0, stats, N, v, &k), -EINVAL);
}
END_TEST

static Suite *policy_suite(void)
{
	Suite *s = suite_create("eviction-policy");
	struct {
		const char *name;
		const TTest *t;
	} cases[] = {
	    {"fifo", fifo_oldest_admitted_first},
	    {"lru", lru_least_recent_first},
	    {"lru-ties", lru_ties_by_created_then_id},
	    {"uses", uses_most_read_first},
	    {"random", random_is_seeded_and_input_order_free},
	    {"none", none_evicts_nothing},
	    {"pins", pinned_never_a_victim},
	    {"min_uses", min_uses_floor},
	    {"select", select_shortest_prefix},
	    {"unknown", unknown_policy_rejected},
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
	SRunner *r = srunner_create(policy_suite());
	srunner_run_all(r, CK_NORMAL);
	int failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
