/*
 * test_records.c - strategy=records planning (sampler/records.c): sidecar
 * parsing and the coalescing of drawn records into range requests.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sampler/records.h"

START_TEST(parse_sidecar)
{
	const char *idx = "0 116\n116 216\r\n\n332 16\n";
	struct smp_idx_entry *v = NULL;
	size_t n = 0, cap = 0;
	char err[256] = "";
	ck_assert_int_eq(smp__parse_index(idx, strlen(idx), 7, 348, &v, &n, &cap, err, sizeof(err)),
			 0);
	ck_assert_uint_eq(n, 3);
	ck_assert_uint_eq(v[1].off, 116);
	ck_assert_uint_eq(v[1].size, 216);
	ck_assert_uint_eq(v[2].obj, 7);
	/* past the object's end, overlapping, too small, garbage: refused with the line */
	const char *bad[] = {"0 116\n116 300\n", "0 116\n100 20\n", "0 8\n", "x y\n"};
	for (size_t i = 0; i < 4; i++) {
		size_t m = 0;
		ck_assert_int_eq(smp__parse_index(bad[i], strlen(bad[i]), 0, 348, &v, &m, &cap, err,
						  sizeof(err)),
				 -EINVAL);
		ck_assert_msg(strstr(err, "line") != NULL, "message: %s", err);
	}
	free(v);
}
END_TEST

START_TEST(plan_coalesces_and_covers)
{
	/* 3 objects x 100 records of 1000 bytes, contiguous */
	enum { N = 300 };
	struct smp_idx_entry e[N];
	for (int i = 0; i < N; i++)
		e[i] =
		    (struct smp_idx_entry){(uint32_t)(i / 100), 1000, (uint64_t)(i % 100) * 1000};
	struct smp_plan p;
	ck_assert_int_eq(smp__plan_ranges(e, N, 42, &p), 0);
	/*
	 * every record drawn once, inside its range; records of one object within
	 * a batch (N/16 = 18 draws, ~6 per object) mostly lie within 64 KiB of
	 * each other and coalesce: far fewer requests than records
	 */
	ck_assert_uint_lt(p.n, N / 4);
	int seen[N] = {0};
	size_t total = 0;
	for (size_t i = 0; i < p.n; i++) {
		const struct smp_range *r = &p.r[i];
		for (uint32_t k = 0; k < r->nwanted; k++) {
			ck_assert_uint_ge(r->wanted[k], r->off);
			ck_assert_uint_le(r->wanted[k] + 1000, r->off + r->len);
			if (k)
				ck_assert_uint_gt(r->wanted[k], r->wanted[k - 1]);
			seen[r->obj * 100 + r->wanted[k] / 1000]++;
		}
		total += r->nwanted;
	}
	ck_assert_uint_eq(total, N);
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(seen[i], 1);
	smp__plan_free(&p);
}
END_TEST

START_TEST(plan_splits_far_records)
{
	/* two records 1 MiB apart are two requests; SMP_RANGE_MAX bounds a range */
	struct smp_idx_entry e[2] = {{0, 100, 0}, {0, 100, 1 << 20}};
	struct smp_plan p;
	ck_assert_int_eq(smp__plan_ranges(e, 2, 1, &p), 0);
	ck_assert_uint_eq(p.n, 2);
	ck_assert_uint_eq(p.r[0].len, 100);
	smp__plan_free(&p);
	enum { M = 200 };
	struct smp_idx_entry big[M];
	for (int i = 0; i < M; i++)
		big[i] = (struct smp_idx_entry){0, 100000, (uint64_t)i * 100000};
	ck_assert_int_eq(smp__plan_ranges(big, M, 1, &p), 0);
	for (size_t i = 0; i < p.n; i++)
		ck_assert_uint_le(p.r[i].len, SMP_RANGE_MAX);
	ck_assert_uint_ge(p.n, (size_t)M * 100000 / SMP_RANGE_MAX);
	smp__plan_free(&p);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("sampler-records");
	TCase *t = tcase_create("parse-sidecar");
	tcase_add_test(t, parse_sidecar);
	suite_add_tcase(s, t);
	t = tcase_create("plan-coalesces");
	tcase_add_test(t, plan_coalesces_and_covers);
	suite_add_tcase(s, t);
	t = tcase_create("plan-splits");
	tcase_add_test(t, plan_splits_far_records);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
