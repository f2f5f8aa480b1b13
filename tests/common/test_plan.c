/*
 * test_plan.c - Check suite for common/plan.c, the sampling plan (DESIGN
 * "Sampling", invariant 8): the permutation is a bijection with its
 * inverse, a pass returns every unit that is not resident exactly once
 * (P1-P3 of plan.c), roll-over starts a new order, restore resumes without
 * skipping or repeating a unit, a relist puts new units in the rest of the
 * pass, and the memory per unit stays near two bits.
 */
#include "common/plan.h"

#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const uint64_t sizes[] = {0, 1, 2, 3, 5, 16, 17, 100, 1000, 4097, 65536, 100003};

START_TEST(test_perm_bijection)
{
	uint64_t n = sizes[_i];
	struct cmn_perm k;
	cmn_perm_init(&k, n, 42 + n);
	unsigned char *seen = calloc(n ? n : 1, 1);
	for (uint64_t i = 0; i < n; i++) {
		uint64_t x = cmn_perm_at(&k, i);
		ck_assert_msg(x < n, "n=%llu: perm(%llu) = %llu", (unsigned long long)n,
			      (unsigned long long)i, (unsigned long long)x);
		ck_assert_msg(!seen[x], "n=%llu: %llu hit twice", (unsigned long long)n,
			      (unsigned long long)x);
		seen[x] = 1;
		ck_assert_uint_eq(cmn_perm_index(&k, x), i);
	}
	free(seen);
}
END_TEST

/* The permutation depends on the seed and is not close to the identity. */
START_TEST(test_perm_seeded)
{
	struct cmn_perm a, b, c;
	uint64_t n = 10000, same_ab = 0, same_ac = 0, fixed = 0;
	cmn_perm_init(&a, n, 7);
	cmn_perm_init(&b, n, 7);
	cmn_perm_init(&c, n, 8);
	for (uint64_t i = 0; i < n; i++) {
		same_ab += cmn_perm_at(&a, i) == cmn_perm_at(&b, i);
		same_ac += cmn_perm_at(&a, i) == cmn_perm_at(&c, i);
		fixed += cmn_perm_at(&a, i) == i;
	}
	ck_assert_uint_eq(same_ab, n);
	ck_assert_msg(same_ac < 50, "seeds 7 and 8 agree on %llu of %llu positions",
		      (unsigned long long)same_ac, (unsigned long long)n);
	ck_assert_msg(fixed < 50, "%llu fixed points", (unsigned long long)fixed);
}
END_TEST

/* Takes every unit of the pass (done at once); returns how many. */
static uint64_t drain_pass(struct cmn_plan *p, unsigned char *count)
{
	uint64_t u, got = 0;
	enum cmn_plan_next_rc rc;
	while ((rc = cmn_plan_next(p, &u)) == CMN_PLAN_UNIT) {
		count[u]++;
		got++;
		cmn_plan_done(p, u);
	}
	ck_assert_int_eq(rc, CMN_PLAN_END);
	return got;
}

START_TEST(test_pass_once_each)
{
	uint64_t n = 5000;
	struct cmn_plan *p;
	ck_assert_int_eq(cmn_plan_new(&p, n, 3), 0);
	unsigned char *count = calloc(n, 1);
	ck_assert_uint_eq(drain_pass(p, count), n);
	for (uint64_t u = 0; u < n; u++)
		ck_assert_msg(count[u] == 1, "unit %llu returned %u times", (unsigned long long)u,
			      count[u]);
	free(count);
	cmn_plan_free(p);
}
END_TEST

START_TEST(test_resident_skipped)
{
	uint64_t n = 3000, u;
	struct cmn_plan *p;
	ck_assert_int_eq(cmn_plan_new(&p, n, 5), 0);
	for (u = 0; u < n; u += 3)
		cmn_plan_set_resident(p, u, true);
	unsigned char *count = calloc(n, 1);
	ck_assert_uint_eq(drain_pass(p, count), n - n / 3);
	for (u = 0; u < n; u++)
		ck_assert_msg(count[u] == (u % 3 ? 1 : 0), "unit %llu returned %u times",
			      (unsigned long long)u, count[u]);
	/* everything resident: a pass returns nothing (the caller sees idle) */
	for (u = 0; u < n; u++)
		cmn_plan_set_resident(p, u, true);
	ck_assert_int_eq(cmn_plan_roll(p), 0);
	ck_assert_int_eq(cmn_plan_next(p, &u), CMN_PLAN_END);
	ck_assert_uint_eq(cmn_plan_fetched_in_pass(p), 0);
	free(count);
	cmn_plan_free(p);
}
END_TEST

START_TEST(test_roll_over)
{
	uint64_t n = 2000, u, first0 = 0, first1 = 0, same = 0;
	struct cmn_plan *p;
	ck_assert_int_eq(cmn_plan_new(&p, n, 9), 0);
	uint64_t *order = calloc(n, sizeof(*order));
	unsigned char *count = calloc(n, 1);
	for (uint64_t i = 0; cmn_plan_next(p, &u) == CMN_PLAN_UNIT; i++) {
		order[i] = u;
		if (i == 0)
			first0 = u;
		/* in flight at the end of the walk: WAIT, and roll refuses */
		if (i + 1 < n)
			cmn_plan_done(p, u);
	}
	ck_assert_int_eq(cmn_plan_next(p, &u), CMN_PLAN_WAIT);
	ck_assert_int_eq(cmn_plan_roll(p), -EBUSY);
	cmn_plan_done(p, order[n - 1]);
	ck_assert_int_eq(cmn_plan_next(p, &u), CMN_PLAN_END);
	ck_assert_int_eq(cmn_plan_roll(p), 0);
	ck_assert_uint_eq(cmn_plan_pass(p), 1);
	for (uint64_t i = 0; cmn_plan_next(p, &u) == CMN_PLAN_UNIT; i++) {
		if (i == 0)
			first1 = u;
		same += order[i] == u;
		count[u]++;
		cmn_plan_done(p, u);
	}
	for (u = 0; u < n; u++)
		ck_assert_uint_eq(count[u], 1);
	ck_assert_msg(same < 20 && first0 != first1, "pass 1 repeats pass 0's order (%llu same)",
		      (unsigned long long)same);
	free(order);
	free(count);
	cmn_plan_free(p);
}
END_TEST

/*
 * A crash at any point: what was exported (state + settled taken bits) is
 * restored; units in flight at the crash come again, settled ones never.
 */
START_TEST(test_restore_resumes)
{
	uint64_t n = 4000, u;
	struct cmn_plan *p, *q;
	ck_assert_int_eq(cmn_plan_new(&p, n, 11), 0);
	unsigned char *count = calloc(n, 1);
	uint64_t inflight[8];
	/* 1500 units done, 8 in flight, 30 taken out of order and done */
	for (int i = 0; i < 1500; i++) {
		ck_assert_int_eq(cmn_plan_next(p, &u), CMN_PLAN_UNIT);
		count[u]++;
		cmn_plan_done(p, u);
	}
	for (int i = 0; i < 8; i++)
		ck_assert_int_eq(cmn_plan_next(p, &inflight[i]), CMN_PLAN_UNIT);
	for (u = 0; u < n && cmn_plan_fetched_in_pass(p) < 1538; u++)
		if (cmn_plan_take(p, u)) {
			count[u]++;
			cmn_plan_done(p, u);
		}
	struct cmn_plan_state st;
	cmn_plan_get_state(p, &st);
	uint8_t *bits = calloc((n + 7) / 8, 1);
	cmn_plan_export_taken(p, bits);
	for (int i = 0; i < 8; i++)
		ck_assert(!((bits[inflight[i] >> 3] >> (inflight[i] & 7)) & 1));
	cmn_plan_free(p);

	ck_assert_int_eq(cmn_plan_restore(&q, &st, bits, (n + 7) / 8, NULL, 0), 0);
	ck_assert_uint_eq(drain_pass(q, count), n - 1530);
	for (u = 0; u < n; u++)
		ck_assert_msg(count[u] == 1, "unit %llu returned %u times across the crash",
			      (unsigned long long)u, count[u]);
	free(bits);
	free(count);
	cmn_plan_free(q);
}
END_TEST

/* Marks (units the catalog recorded after the last export) count as taken. */
START_TEST(test_restore_marks)
{
	struct cmn_plan_state st = {.n = 10, .seed = 1};
	uint64_t marks[] = {2, 7}, u;
	struct cmn_plan *q;
	unsigned char count[10] = {0};
	ck_assert_int_eq(cmn_plan_restore(&q, &st, NULL, 0, marks, 2), 0);
	ck_assert_uint_eq(drain_pass(q, count), 8);
	ck_assert(count[2] == 0 && count[7] == 0);
	cmn_plan_free(q);
	uint64_t bad[] = {10};
	ck_assert_int_eq(cmn_plan_restore(&q, &st, NULL, 0, bad, 1), -EINVAL);
	(void)u;
}
END_TEST

/* Relist: new units come in the rest of the pass, at random places; dropped never. */
START_TEST(test_relist_insertion)
{
	uint64_t n = 2000, n2 = 3000, u;
	struct cmn_plan *p;
	ck_assert_int_eq(cmn_plan_new(&p, n, 13), 0);
	unsigned char *count = calloc(n2, 1);
	for (int i = 0; i < 1000; i++) {
		ck_assert_int_eq(cmn_plan_next(p, &u), CMN_PLAN_UNIT);
		count[u]++;
		cmn_plan_done(p, u);
	}
	ck_assert_int_eq(cmn_plan_next(p, &u), CMN_PLAN_UNIT); /* in flight across the relist */
	uint64_t held = u;
	count[u]++;
	ck_assert_int_eq(cmn_plan_grow(p, n2), 0);
	ck_assert_int_eq(cmn_plan_drop(p, 5), 0);
	bool dropped_taken_before = count[5] != 0;
	cmn_plan_done(p, held);
	/* the rest: 999 old units (one dropped unless taken) and 1000 new ones, mixed */
	uint64_t new_in_first_half = 0, rest = 0;
	while (cmn_plan_next(p, &u) == CMN_PLAN_UNIT) {
		count[u]++;
		if (u >= n && rest < 1000)
			new_in_first_half++;
		rest++;
		cmn_plan_done(p, u);
	}
	ck_assert_uint_eq(rest, 1999 - (dropped_taken_before ? 0 : 1));
	for (u = 0; u < n2; u++)
		ck_assert_msg(count[u] == (u == 5 && !dropped_taken_before ? 0 : 1),
			      "unit %llu returned %u times", (unsigned long long)u, count[u]);
	/* new units are spread: about half of them in the first half of the rest */
	ck_assert_msg(new_in_first_half > 400 && new_in_first_half < 600,
		      "%llu of 1000 new units in the first half",
		      (unsigned long long)new_in_first_half);
	/* the dropped unit stays out of later passes */
	ck_assert_int_eq(cmn_plan_roll(p), 0);
	memset(count, 0, n2);
	ck_assert_uint_eq(drain_pass(p, count), n2 - 1);
	ck_assert_uint_eq(count[5], 0);
	free(count);
	cmn_plan_free(p);
}
END_TEST

/* About two bits per unit (no unit dropped, nothing in flight). */
START_TEST(test_memory_per_unit)
{
	uint64_t n = 10000000;
	struct cmn_plan *p;
	ck_assert_int_eq(cmn_plan_new(&p, n, 1), 0);
	size_t m = cmn_plan_memory(p);
	ck_assert_msg(m <= n / 4 + 4096, "%zu bytes for %llu units", m, (unsigned long long)n);
	cmn_plan_free(p);
}
END_TEST

static Suite *plan_suite(void)
{
	Suite *s = suite_create("common");
	TCase *tc;

	tc = tcase_create("plan_perm_bijection");
	tcase_add_loop_test(tc, test_perm_bijection, 0, sizeof(sizes) / sizeof(sizes[0]));
	tcase_add_test(tc, test_perm_seeded);
	suite_add_tcase(s, tc);
	tc = tcase_create("plan_pass");
	tcase_add_test(tc, test_pass_once_each);
	tcase_add_test(tc, test_resident_skipped);
	suite_add_tcase(s, tc);
	tc = tcase_create("plan_roll_over");
	tcase_add_test(tc, test_roll_over);
	suite_add_tcase(s, tc);
	tc = tcase_create("plan_restore");
	tcase_add_test(tc, test_restore_resumes);
	tcase_add_test(tc, test_restore_marks);
	suite_add_tcase(s, tc);
	tc = tcase_create("plan_relist");
	tcase_add_test(tc, test_relist_insertion);
	suite_add_tcase(s, tc);
	tc = tcase_create("plan_memory");
	tcase_add_test(tc, test_memory_per_unit);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(plan_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
