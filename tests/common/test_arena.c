/*
 * test_arena.c - common/arena.h: what it hands out is aligned, holds what
 * was written to it while later allocations are made (nothing moves), a
 * request larger than a block gets a block of its own, and a freed arena
 * is empty and usable again.
 */
#include "common/arena.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

START_TEST(alignment_and_zeroing)
{
	struct cmn_arena a = {0};
	for (size_t align = 1; align <= 16; align *= 2)
		for (int i = 0; i < 100; i++) {
			unsigned char *p = cmn_arena_zalloc(&a, (size_t)i % 37 + 1, align);
			ck_assert_ptr_nonnull(p);
			ck_assert_uint_eq((uintptr_t)p % align, 0);
			for (int k = 0; k < i % 37 + 1; k++)
				ck_assert_uint_eq(p[k], 0);
			memset(p, 0xa5, (size_t)i % 37 + 1); /* the next zalloc must not see it */
		}
	cmn_arena_free(&a);
	ck_assert_ptr_null(a.blk);
}
END_TEST

START_TEST(strings_stay_where_they_are)
{
	struct cmn_arena a = {0};
	enum { N = 200000 }; /* ~2.6 MB of strings: many blocks, up to the largest */
	char **v = malloc(N * sizeof(*v)), want[32];
	ck_assert_ptr_nonnull(v);
	for (int i = 0; i < N; i++) {
		int n = snprintf(want, sizeof(want), "key-%d", i);
		v[i] = cmn_arena_strndup(&a, want, (size_t)n);
		ck_assert_ptr_nonnull(v[i]);
	}
	for (int i = 0; i < N; i++) {
		snprintf(want, sizeof(want), "key-%d", i);
		ck_assert_str_eq(v[i], want);
	}
	size_t bytes = cmn_arena_bytes(&a);
	ck_assert_uint_ge(bytes, (size_t)N * 8);
	ck_assert_uint_le(bytes, (size_t)N * 12 + 2 * CMN_ARENA_BLOCK); /* no header per string */
	char *big = cmn_arena_alloc(&a, 3 * CMN_ARENA_BLOCK, 1);	/* a block of its own */
	ck_assert_ptr_nonnull(big);
	memset(big, 'x', 3 * CMN_ARENA_BLOCK);
	ck_assert_str_eq(v[N - 1], "key-199999");
	ck_assert_uint_ge(cmn_arena_bytes(&a), bytes + 3 * CMN_ARENA_BLOCK);
	cmn_arena_free(&a);
	ck_assert_uint_eq(cmn_arena_bytes(&a), 0);
	ck_assert_str_eq(cmn_arena_strndup(&a, "again", 5), "again"); /* reusable */
	cmn_arena_free(&a);
	free(v);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("arena");
	TCase *tc = tcase_create("arena");
	tcase_add_test(tc, alignment_and_zeroing);
	tcase_add_test(tc, strings_stay_where_they_are);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
