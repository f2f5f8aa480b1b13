/*
 * test_units.c - Check suite for common/units.c (sizes, durations, formatting).
 */
#include "common/units.h"

#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const struct {
	const char *in;
	uint64_t want;
} sizes_ok[] = {
    {"0", 0},
    {"4096", 4096},
    {"4096B", 4096},
    {"1K", 1024},
    {"1k", 1024},
    {"64M", 64ull << 20},
    {"64MB", 64ull << 20},
    {"64MiB", 64ull << 20},
    {"64mib", 64ull << 20},
    {"20G", 20ull << 30},
    {"20 G", 20ull << 30},
    {" 20G ", 20ull << 30},
    {"1.5T", 3ull << 39},
    {"0.5K", 512},
    {"2P", 2ull << 50},
    {"15E", 15ull << 60},
    {"18446744073709551615", UINT64_MAX},
    {"1.25G", (5ull << 30) / 4},
};

START_TEST(test_size_ok)
{
	char err[256];
	uint64_t v = 0;
	const char *in = sizes_ok[_i].in;

	err[0] = '\0';
	ck_assert_msg(cmn_parse_size(in, &v, err, sizeof(err)) == 0, "%s: %s", in, err);
	ck_assert_uint_eq(v, sizes_ok[_i].want);
}
END_TEST

static const struct {
	const char *in;
	int rc;
	const char *msg; /* substring of the message */
} sizes_bad[] = {
    {"", -EINVAL, "empty"},
    {"   ", -EINVAL, "empty"},
    {"-5M", -EINVAL, "negative"},
    {"+5M", -EINVAL, "sign"},
    {"abc", -EINVAL, "expected a size"},
    {"20X", -EINVAL, "20X: unknown unit"},
    {"20GG", -EINVAL, "unknown unit"},
    {"20Gi", -EINVAL, "unknown unit"},
    {"20G x", -EINVAL, "unknown unit"},
    {"1.5", -EINVAL, "not a whole number of bytes"},
    {"0.3K", -EINVAL, "not a whole number of bytes"},
    {".", -EINVAL, "expected a size"},
    {"1..5G", -EINVAL, "expected a size"},
    {"20000P", -ERANGE, "out of range"},
    {"16E", -ERANGE, "out of range"},
    {"18446744073709551616", -ERANGE, "out of range"},
    {"99999999999999999999999", -ERANGE, "out of range"},
    {"0x10", -EINVAL, "unknown unit"},
};

START_TEST(test_size_bad)
{
	char err[256] = "";
	uint64_t v = 777;
	const char *in = sizes_bad[_i].in;
	int rc = cmn_parse_size(in, &v, err, sizeof(err));

	ck_assert_msg(rc == sizes_bad[_i].rc, "'%s': rc %d, want %d (%s)", in, rc, sizes_bad[_i].rc,
		      err);
	ck_assert_uint_eq(v, 777); /* unchanged on failure */
	ck_assert_msg(strstr(err, sizes_bad[_i].msg) != NULL, "'%s': message '%s' lacks '%s'", in,
		      err, sizes_bad[_i].msg);
}
END_TEST

START_TEST(test_duration)
{
	static const struct {
		const char *in;
		uint64_t ms;
	} ok[] = {
	    {"30s", 30000},    {"30", 30000},	 {"5m", 300000}, {"250ms", 250},
	    {"2h", 7200000},   {"1d", 86400000}, {"1.5s", 1500}, {"0.5m", 30000},
	    {"10 sec", 10000}, {"3min", 180000}, {"0", 0},
	};
	static const struct {
		const char *in;
		int rc;
		const char *msg;
	} bad[] = {
	    {"", -EINVAL, "empty"},
	    {"-1s", -EINVAL, "negative"},
	    {"5x", -EINVAL, "unknown unit"},
	    {"s", -EINVAL, "expected a duration"},
	    {"1.0005s", -EINVAL, "whole number of milliseconds"},
	    {"99999999999999999999d", -ERANGE, "out of range"},
	    {"999999999999999999d", -ERANGE, "out of range"},
	};
	char err[256];
	uint64_t v;

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		err[0] = '\0';
		ck_assert_msg(cmn_parse_duration(ok[i].in, &v, err, sizeof(err)) == 0, "%s: %s",
			      ok[i].in, err);
		ck_assert_uint_eq(v, ok[i].ms);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc;
		v = 42;
		err[0] = '\0';
		rc = cmn_parse_duration(bad[i].in, &v, err, sizeof(err));
		ck_assert_msg(rc == bad[i].rc, "'%s': rc %d want %d (%s)", bad[i].in, rc, bad[i].rc,
			      err);
		ck_assert_uint_eq(v, 42);
		ck_assert_msg(strstr(err, bad[i].msg) != NULL, "'%s': message '%s' lacks '%s'",
			      bad[i].in, err, bad[i].msg);
	}
}
END_TEST

START_TEST(test_format)
{
	char buf[32];

	ck_assert_str_eq(cmn_format_size(0, buf, sizeof(buf)), "0 B");
	ck_assert_str_eq(cmn_format_size(512, buf, sizeof(buf)), "512 B");
	ck_assert_str_eq(cmn_format_size(1023, buf, sizeof(buf)), "1023 B");
	ck_assert_str_eq(cmn_format_size(1024, buf, sizeof(buf)), "1.0 KiB");
	ck_assert_str_eq(cmn_format_size(1536, buf, sizeof(buf)), "1.5 KiB");
	ck_assert_str_eq(cmn_format_size(20ull << 30, buf, sizeof(buf)), "20.0 GiB");
	ck_assert_str_eq(cmn_format_size((1ull << 20) - 1, buf, sizeof(buf)), "1.0 MiB");
	ck_assert_str_eq(cmn_format_size(UINT64_MAX, buf, sizeof(buf)), "16.0 EiB");
	/* round trip through the parser for a whole number of units */
	{
		char err[128];
		uint64_t v;
		ck_assert_int_eq(cmn_parse_size("20.0 GiB", &v, err, sizeof(err)), 0);
		ck_assert_uint_eq(v, 20ull << 30);
	}
	/* always NUL-terminated, even when cut */
	memset(buf, 'x', sizeof(buf));
	cmn_format_size(20ull << 30, buf, 4);
	ck_assert_uint_eq(strlen(buf), 3);
}
END_TEST

static Suite *units_suite(void)
{
	Suite *s = suite_create("common");
	TCase *tc;

	tc = tcase_create("units_size_valid");
	tcase_add_loop_test(tc, test_size_ok, 0, sizeof(sizes_ok) / sizeof(sizes_ok[0]));
	suite_add_tcase(s, tc);
	tc = tcase_create("units_size_errors");
	tcase_add_loop_test(tc, test_size_bad, 0, sizeof(sizes_bad) / sizeof(sizes_bad[0]));
	suite_add_tcase(s, tc);
	tc = tcase_create("units_duration");
	tcase_add_test(tc, test_duration);
	suite_add_tcase(s, tc);
	tc = tcase_create("units_format");
	tcase_add_test(tc, test_format);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(units_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
