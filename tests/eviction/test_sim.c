/*
 * test_sim.c - the simulator (eviction/sim.c) on cases whose figures are
 * known exactly (fifo's rolling window, none's freeze), LRU's waste, the
 * bound, determinism; and a property run over random schedules.  The
 * boundary that applies plans to a real store is tested in tests/daemon.
 */
#include "eviction/evictor.h"
#include "eviction/sim.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define M (1ull << 20)

static struct evc_schedule one_entry(uint64_t limit, uint64_t admit, enum cmn_policy p,
				     uint32_t min_uses)
{
	struct cmn_epoch_section s;
	struct evc_schedule sch;
	char err[320];
	memset(&s, 0, sizeof(s));
	s.last = CMN_EPOCH_OPEN;
	s.line = 1;
	s.has_limit = s.has_admit = s.has_policy = s.has_min_uses = true;
	s.limit = limit;
	s.admit = admit;
	s.policy = p;
	s.min_uses = min_uses;
	ck_assert_int_eq(evc_schedule_build(&s, 1, limit, "t", &sch, err, sizeof(err)), 0);
	return sch;
}

/* 400 records of 1M, shards of 4 records: 100 shards. */
static const struct evc_sim_opts small = {400 * M, 1 * M, 4 * M, 12, 5, false};

START_TEST(fifo_rolling_window)
{
	struct evc_schedule sch = one_entry(40 * M, 20 * M, CMN_POLICY_FIFO, 0);
	struct evc_sim_row r[12];
	char err[320];
	ck_assert_int_eq(evc_sim_run(&small, &sch, r, err, sizeof(err)), 0);
	for (uint32_t e = 0; e < 12; e++) {
		/* Each epoch reads the 20 records admitted during the one before. */
		ck_assert_uint_eq(r[e].resident_records, 20);
		ck_assert_uint_eq(r[e].fresh_records, 20);
		ck_assert_uint_eq(r[e].evicted_records, e ? 20 : 0);
		ck_assert_uint_eq(r[e].evicted_unread, 0);
		ck_assert_uint_eq(r[e].downloaded_records, 20 * (e + 2));
		/* Nothing wasted, the sampler never repeats in a pass: the bound. */
		ck_assert_uint_eq(r[e].distinct, 20 * (e + 1));
		ck_assert_uint_eq(r[e].bound, r[e].distinct);
		ck_assert_int_eq(r[e].reason, EVC_REASON_OK);
	}
	evc_schedule_free(&sch);
}
END_TEST

START_TEST(retire_read_view_is_the_cache)
{
	/* the same run as fifo_rolling_window, with retire = read */
	struct evc_sim_opts o = small;
	o.retire_read = true;
	struct evc_schedule sch = one_entry(40 * M, 20 * M, CMN_POLICY_FIFO, 0);
	struct evc_sim_row r[12];
	char err[320];
	ck_assert_int_eq(evc_sim_run(&o, &sch, r, err, sizeof(err)), 0);
	ck_assert_uint_eq(r[0].resident_records, 20);
	for (uint32_t e = 1; e < 12; e++) {
		/* victims stay in the view: the reader sees the whole cache */
		ck_assert_uint_eq(r[e].resident_records, 40);
		ck_assert_uint_eq(r[e].resident_bytes, 40 * M);
		/* they leave once read, and their room takes the fresh shards */
		ck_assert_uint_eq(r[e].evicted_records, 20);
		ck_assert_uint_eq(r[e].evicted_unread, 0);
		ck_assert_uint_eq(r[e].fresh_records, 20);
		ck_assert_uint_eq(r[e].downloaded_records, 20 * (e + 2));
		ck_assert_uint_eq(r[e].distinct, 20 * (e + 1));
	}
	evc_schedule_free(&sch);
}
END_TEST

START_TEST(none_freezes_when_full)
{
	struct evc_schedule sch = one_entry(40 * M, 20 * M, CMN_POLICY_NONE, 0);
	struct evc_sim_row r[12];
	char err[320];
	ck_assert_int_eq(evc_sim_run(&small, &sch, r, err, sizeof(err)), 0);
	ck_assert_uint_eq(r[0].resident_records, 20);
	ck_assert_uint_eq(r[0].fresh_records, 20);
	for (uint32_t e = 1; e < 12; e++) {
		ck_assert_uint_eq(r[e].resident_records, 40);
		ck_assert_uint_eq(r[e].fresh_records, 0);
		ck_assert_uint_eq(r[e].evicted_records, 0);
		ck_assert_uint_eq(r[e].downloaded_records, 40);
		ck_assert_uint_eq(r[e].distinct, 40);
		ck_assert_int_eq(r[e].reason, EVC_REASON_FROZEN);
	}
	evc_schedule_free(&sch);
}
END_TEST

START_TEST(nothing_evicted_unread_lru_fifo)
{
	/*
	 * LRU counts admission as a use, so shards admitted early in an epoch
	 * are older than shards read late; the plan keeps fresh shards (never
	 * in a view) out of the soft phase, so under LRU, with or without
	 * min_uses, and under FIFO nothing downloaded is evicted unread and
	 * coverage is the bound.
	 */
	struct evc_sim_opts o = small;
	o.epochs = 20;
	const struct {
		enum cmn_policy policy;
		uint32_t min_uses;
	} runs[] = {{CMN_POLICY_LRU, 0}, {CMN_POLICY_LRU, 1}, {CMN_POLICY_FIFO, 0}};
	for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
		struct evc_schedule sch =
		    one_entry(40 * M, 20 * M, runs[i].policy, runs[i].min_uses);
		struct evc_sim_row r[20];
		char err[320];
		ck_assert_int_eq(evc_sim_run(&o, &sch, r, err, sizeof(err)), 0);
		uint64_t evicted = 0;
		for (int e = 0; e < 20; e++)
			evicted += r[e].evicted_records;
		ck_assert_msg(evicted > 0, "run %zu evicted nothing: the check is empty", i);
		ck_assert_uint_eq(r[19].wasted_records, 0);
		ck_assert_uint_eq(r[19].distinct, r[19].bound);
		evc_schedule_free(&sch);
	}
}
END_TEST

START_TEST(deterministic)
{
	struct evc_schedule sch = one_entry(40 * M, 20 * M, CMN_POLICY_LRU, 0);
	struct evc_sim_row a[12], b[12], c[12];
	char err[320];
	struct evc_sim_opts o = small;
	ck_assert_int_eq(evc_sim_run(&o, &sch, a, err, sizeof(err)), 0);
	ck_assert_int_eq(evc_sim_run(&o, &sch, b, err, sizeof(err)), 0);
	for (int e = 0; e < 12; e++) {
		ck_assert_uint_eq(a[e].distinct, b[e].distinct);
		ck_assert_uint_eq(a[e].wasted_records, b[e].wasted_records);
		ck_assert_uint_eq(a[e].evicted_records, b[e].evicted_records);
	}
	/*
	 * The seed orders the walk and the reads; the figures do not depend on
	 * it when every downloaded record is read before it can go (the
	 * reader reads the whole view, fresh shards are kept one boundary).
	 */
	for (o.seed = 6; o.seed < 16; o.seed++) {
		ck_assert_int_eq(evc_sim_run(&o, &sch, c, err, sizeof(err)), 0);
		for (int e = 0; e < 12; e++)
			ck_assert_uint_eq(c[e].distinct, c[e].bound);
	}
	evc_schedule_free(&sch);
}
END_TEST

START_TEST(bad_sizes)
{
	struct evc_schedule sch = one_entry(40 * M, 20 * M, CMN_POLICY_FIFO, 0);
	struct evc_sim_row r[12];
	char err[320] = "";
	struct evc_sim_opts o = small;
	o.record_size = 0;
	ck_assert_int_eq(evc_sim_run(&o, &sch, r, err, sizeof(err)), -EINVAL);
	o = small;
	o.dataset = 1ull << 40;
	o.record_size = 1;
	ck_assert_int_eq(evc_sim_run(&o, &sch, r, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "use a larger --record-size") != NULL, "%s", err);
	evc_schedule_free(&sch);
}
END_TEST

/* Random schedules of 1-4 sections over a small dataset. */
START_TEST(property_random_schedules)
{
	const char *cs = getenv("RC_PROPERTY_CASES");
	uint64_t cases = cs ? strtoull(cs, NULL, 0) / 20 : 1000;
	uint64_t x = 77;
	for (uint64_t k = 0; k < cases; k++) {
		struct cmn_epoch_section secs[4];
		struct evc_schedule sch;
		struct evc_sim_row r[10];
		char err[320];
		uint64_t rs = 1 + (x = x * 6364136223846793005ULL + 1442695040888963407ULL) % 3;
		uint32_t nsec = 1 + (uint32_t)((x >> 20) % 4), first = 0;
		uint64_t cache = (8 + (x >> 40) % 60) * rs;
		memset(secs, 0, sizeof(secs));
		for (uint32_t i = 0; i < nsec; i++) {
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
			secs[i].first = first;
			secs[i].last =
			    i + 1 == nsec ? CMN_EPOCH_OPEN : first + (uint32_t)(x >> 60) % 3;
			first = secs[i].last + 1;
			secs[i].line = (int)i + 1;
			secs[i].has_limit = true;
			secs[i].limit = 1 + (x >> 8) % cache;
			secs[i].has_admit = true;
			secs[i].admit = (x >> 24) % (secs[i].limit + 1);
			secs[i].has_policy = true;
			secs[i].policy = (enum cmn_policy)((x >> 36) % 5);
			secs[i].has_min_uses = true;
			secs[i].min_uses = (uint32_t)((x >> 44) % 3);
			secs[i].has_seed = true;
			secs[i].seed = x >> 50;
		}
		ck_assert_int_eq(evc_schedule_build(secs, nsec, cache, "p", &sch, err, sizeof(err)),
				 0);
		struct evc_sim_opts o = {(20 + (x >> 52) % 200) * rs, rs, rs * (1 + (x >> 56) % 4),
					 10, k};
		ck_assert_int_eq(evc_sim_run(&o, &sch, r, err, sizeof(err)), 0);
		uint64_t full_at_none = 0;
		for (uint32_t e = 0; e < 10; e++) {
			const struct evc_sim_row *w = &r[e];
			ck_assert_msg(w->resident_bytes <= w->entry.limit,
				      "case %llu epoch %u: resident %llu above limit %llu",
				      (unsigned long long)k, e,
				      (unsigned long long)w->resident_bytes,
				      (unsigned long long)w->entry.limit);
			ck_assert_uint_le(w->resident_bytes + w->budget, w->entry.limit);
			ck_assert_uint_le(w->budget, w->entry.admit);
			ck_assert_uint_le(w->fresh_records * rs, w->budget);
			ck_assert_uint_le(w->distinct, w->bound);
			ck_assert_uint_le(w->evicted_unread, w->evicted_records);
			if (w->entry.policy == CMN_POLICY_NONE && e > 0 &&
			    r[e - 1].entry.policy == CMN_POLICY_NONE &&
			    r[e - 1].entry.limit == w->entry.limit && full_at_none) {
				/* none: once full, nothing more is admitted */
				ck_assert_uint_eq(w->fresh_records, 0);
				ck_assert_uint_eq(w->evicted_records, 0);
			}
			full_at_none =
			    w->entry.policy == CMN_POLICY_NONE &&
			    (w->resident_records + w->fresh_records) * rs >= w->entry.limit;
		}
		evc_schedule_free(&sch);
	}
}
END_TEST

static Suite *sim_suite(void)
{
	Suite *s = suite_create("eviction-sim");
	struct {
		const char *name;
		const TTest *t;
	} cases[] = {
	    {"fifo-rolling-window", fifo_rolling_window},
	    {"retire-read-view", retire_read_view_is_the_cache},
	    {"none-freezes", none_freezes_when_full},
	    {"nothing-evicted-unread", nothing_evicted_unread_lru_fifo},
	    {"deterministic", deterministic},
	    {"bad-sizes", bad_sizes},
	    {"property-schedules", property_random_schedules},
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
	SRunner *r = srunner_create(sim_suite());
	srunner_run_all(r, CK_NORMAL);
	int failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
