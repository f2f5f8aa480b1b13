/*
 * test_records.c - strategy=records sidecars (sampler/records.c): parsing,
 * and what is refused with the line that is wrong.
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

static Suite *suite(void)
{
	Suite *s = suite_create("sampler-records");
	TCase *t = tcase_create("parse-sidecar");
	tcase_add_test(t, parse_sidecar);
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
