/*
 * test_schedule.c - [epoch ...] sections -> schedule (eviction/schedule.c):
 * defaults and inheritance, the entry in force, and errors that name the
 * line (overlap, gap, bad range, open start or end, limits); plus the same
 * through a real INI file read by common/config_ini.c.
 */
#include "eviction/schedule.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define G    (1ull << 30)
#define OPEN CMN_EPOCH_OPEN

static struct cmn_epoch_section sec(uint32_t first, uint32_t last, int line)
{
	struct cmn_epoch_section s;
	memset(&s, 0, sizeof(s));
	s.first = first;
	s.last = last;
	s.line = line;
	return s;
}

static void expect_error(const struct cmn_epoch_section *v, size_t n, uint64_t cache_limit,
			 const char *want)
{
	struct evc_schedule sch = {NULL, 0};
	char err[320] = "";
	int rc = evc_schedule_build(v, n, cache_limit, "train.ini", &sch, err, sizeof(err));
	ck_assert_int_eq(rc, -EINVAL);
	ck_assert_ptr_null(sch.entries);
	ck_assert_msg(strstr(err, want) != NULL, "error \"%s\" lacks \"%s\"", err, want);
}

START_TEST(no_sections_one_default_entry)
{
	struct evc_schedule sch;
	char err[320];
	ck_assert_int_eq(evc_schedule_build(NULL, 0, 20 * G, NULL, &sch, err, sizeof(err)), 0);
	ck_assert_uint_eq(sch.n, 1);
	const struct evc_entry *e = evc_schedule_at(&sch, 123456);
	ck_assert_uint_eq(e->first, 0);
	ck_assert_uint_eq(e->last, OPEN);
	ck_assert_uint_eq(e->limit, 20 * G);
	ck_assert_uint_eq(e->admit, 10 * G);
	ck_assert_int_eq(e->policy, CMN_POLICY_FIFO);
	ck_assert_uint_eq(e->min_uses, 0);
	ck_assert_uint_eq(e->seed, 0);
	evc_schedule_free(&sch);
}
END_TEST

START_TEST(inheritance_and_lookup)
{
	/* In file order 5-, 0-1, 2-4: sorted by epoch, keys inherited in epoch order. */
	struct cmn_epoch_section v[3];
	v[0] = sec(5, OPEN, 20);
	v[0].has_policy = true;
	v[0].policy = CMN_POLICY_NONE;
	v[1] = sec(0, 1, 3);
	v[1].has_limit = true;
	v[1].limit = 4 * G; /* admit defaults to 2G */
	v[1].has_min_uses = true;
	v[1].min_uses = 1;
	v[2] = sec(2, 4, 10);
	v[2].has_limit = true;
	v[2].limit = 16 * G;
	v[2].has_policy = true;
	v[2].policy = CMN_POLICY_LRU;
	v[2].has_seed = true;
	v[2].seed = 9;
	struct evc_schedule sch;
	char err[320];
	ck_assert_int_eq(evc_schedule_build(v, 3, 20 * G, "t.ini", &sch, err, sizeof(err)), 0);
	ck_assert_uint_eq(sch.n, 3);

	const struct evc_entry *a = evc_schedule_at(&sch, 0), *b = evc_schedule_at(&sch, 1);
	ck_assert_ptr_eq(a, b);
	ck_assert_uint_eq(a->limit, 4 * G);
	ck_assert_uint_eq(a->admit, 2 * G);
	ck_assert_int_eq(a->policy, CMN_POLICY_FIFO);
	ck_assert_uint_eq(a->min_uses, 1);
	ck_assert_int_eq(a->line, 3);

	const struct evc_entry *c = evc_schedule_at(&sch, 2);
	ck_assert_ptr_eq(c, evc_schedule_at(&sch, 4));
	ck_assert_uint_eq(c->limit, 16 * G);
	ck_assert_uint_eq(c->admit, 2 * G); /* inherited, not limit/2 */
	ck_assert_int_eq(c->policy, CMN_POLICY_LRU);
	ck_assert_uint_eq(c->min_uses, 1);
	ck_assert_uint_eq(c->seed, 9);

	const struct evc_entry *d = evc_schedule_at(&sch, 5);
	ck_assert_ptr_eq(d, evc_schedule_at(&sch, 4000000000u));
	ck_assert_uint_eq(d->limit, 16 * G);
	ck_assert_int_eq(d->policy, CMN_POLICY_NONE);
	ck_assert_uint_eq(d->seed, 9);
	ck_assert_int_eq(d->line, 20);

	char buf[200];
	ck_assert_str_eq(
	    evc_entry_describe(c, buf, sizeof(buf)),
	    "[epoch 2-4] limit 16.0 GiB, admit 2.0 GiB, policy lru, min_uses 1, seed 9");
	evc_schedule_free(&sch);
	ck_assert_ptr_null(sch.entries);
}
END_TEST

START_TEST(overlap_names_both_lines)
{
	struct cmn_epoch_section v[] = {sec(0, 4, 7), sec(3, OPEN, 12)};
	expect_error(v, 2, 20 * G, "train.ini:12: [epoch 3-] overlaps [epoch 0-4] at line 7");
	struct cmn_epoch_section w[] = {sec(0, OPEN, 7), sec(9, OPEN, 12)};
	expect_error(w, 2, 20 * G, "train.ini:12: [epoch 9-] overlaps [epoch 0-] at line 7");
	struct cmn_epoch_section x[] = {sec(0, 0, 2), sec(0, OPEN, 5)};
	expect_error(x, 2, 20 * G, "train.ini:5: [epoch 0-] overlaps [epoch 0] at line 2");
}
END_TEST

START_TEST(gap_names_the_line)
{
	/* DESIGN's example [epoch 0] + [epoch 5-] leaves 1-4 without an entry. */
	struct cmn_epoch_section v[] = {sec(5, OPEN, 11), sec(0, 0, 4)};
	expect_error(v, 2, 20 * G,
		     "train.ini:11: [epoch 5-] leaves a gap after [epoch 0] at line 4: epochs "
		     "1-4 have no entry");
	struct cmn_epoch_section w[] = {sec(0, 1, 4), sec(3, OPEN, 9)};
	expect_error(w, 2, 20 * G,
		     "train.ini:9: [epoch 3-] leaves a gap after [epoch 0-1] at "
		     "line 4: epoch 2 has no entry");
}
END_TEST

START_TEST(bad_ranges_name_the_line)
{
	struct cmn_epoch_section v[] = {sec(0, 2, 1), sec(3, 2, 6), sec(4, OPEN, 9)};
	expect_error(v, 3, 20 * G, "train.ini:6: [epoch 3-2]: the range ends before it starts");
	struct cmn_epoch_section w[] = {sec(2, OPEN, 8)};
	expect_error(w, 1, 20 * G,
		     "train.ini:8: [epoch 2-] is the first epoch section, so "
		     "epochs 0-1 have no entry");
	struct cmn_epoch_section x[] = {sec(0, 9, 3)};
	expect_error(x, 1, 20 * G,
		     "train.ini:3: [epoch 0-9] is the last epoch section, so "
		     "epochs after 9 have no entry; make it open-ended: [epoch 0-]");
}
END_TEST

START_TEST(limits_checked_with_line)
{
	struct cmn_epoch_section v[] = {sec(0, OPEN, 5)};
	v[0].has_limit = true;
	v[0].limit = 30 * G;
	expect_error(v, 1, 20 * G,
		     "train.ini:5: [epoch 0-] limit 30.0 GiB is above the [cache] "
		     "limit 20.0 GiB");
	/* admit inherited from the entry before, above a smaller limit. */
	struct cmn_epoch_section w[] = {sec(0, 1, 2), sec(2, OPEN, 6)};
	w[0].has_admit = true;
	w[0].admit = 8 * G;
	w[1].has_limit = true;
	w[1].limit = 4 * G;
	expect_error(w, 2, 20 * G,
		     "train.ini:6: [epoch 2-] admit 8.0 GiB (inherited) is above "
		     "its limit 4.0 GiB");
	struct cmn_epoch_section x[] = {sec(0, OPEN, 5)};
	x[0].has_limit = true;
	x[0].limit = 0;
	expect_error(x, 1, 20 * G, "train.ini:5: [epoch 0-] limit = 0");
}
END_TEST

#if EVC_TEST_HAVE_INI
/* The same rules through a real file read by common/config_ini.c. */
START_TEST(from_ini_file)
{
	char path[] = "/tmp/rc-schedule-XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	FILE *f = fdopen(fd, "w");
	fputs("[cache]\n"	 /* 1 */
	      "limit = 20G\n"	 /* 2 */
	      "\n"		 /* 3 */
	      "[epoch 0-1]\n"	 /* 4 */
	      "limit = 4G\n"	 /* 5 */
	      "admit = 1G\n"	 /* 6 */
	      "[epoch 2-4]\n"	 /* 7 */
	      "limit = 16G\n"	 /* 8 */
	      "policy = lru\n"	 /* 9 */
	      "min_uses = 2\n"	 /* 10 */
	      "[epoch 4-]\n"	 /* 11 */
	      "policy = none\n", /* 12 */
	      f);
	fclose(f);
	struct cmn_config c;
	struct evc_schedule sch = {NULL, 0};
	char err[320] = "";
	cmn_config_init(&c);
	ck_assert_int_eq(cmn_config_load_file(&c, path, err, sizeof(err)), 0);
	ck_assert_int_eq(cmn_config_finish(&c, err, sizeof(err)), 0);
	ck_assert_uint_eq(c.n_epochs, 3);
	int rc = evc_schedule_build(c.epochs, c.n_epochs, c.limit, c.path, &sch, err, sizeof(err));
	ck_assert_int_eq(rc, -EINVAL);
	char want[400];
	snprintf(want, sizeof(want), "%s:11: [epoch 4-] overlaps [epoch 2-4] at line 7", path);
	ck_assert_str_eq(err, strstr(err, want) ? err : want);
	cmn_config_free(&c);
	unlink(path);
}
END_TEST
#endif

static Suite *schedule_suite(void)
{
	Suite *s = suite_create("eviction-schedule");
	struct {
		const char *name;
		const TTest *t;
	} cases[] = {
		{"default", no_sections_one_default_entry},
		{"inheritance", inheritance_and_lookup},
		{"overlap", overlap_names_both_lines},
		{"gap", gap_names_the_line},
		{"bad-range", bad_ranges_name_the_line},
		{"limits", limits_checked_with_line},
#if EVC_TEST_HAVE_INI
		{"ini-file", from_ini_file},
#endif
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
	SRunner *r = srunner_create(schedule_suite());
	srunner_run_all(r, CK_NORMAL);
	int failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
