/*
 * test_budget.c - cachefs/budget.c: byte accounting of DESIGN invariant 4.
 */
#include "cfs_test.h"

#include "cachefs/budget.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

static struct cfs_budget *mk(uint64_t limit)
{
	struct cfs_budget *b = NULL;
	ck_assert_int_eq(cfs_budget_new(&b, limit), 0);
	return b;
}

static uint64_t held(struct cfs_budget *b)
{
	struct cfs_budget_stat st;
	cfs_budget_get(b, &st);
	return st.reserved + st.sealed + st.draining;
}

START_TEST(reserve_within_limit)
{
	struct cfs_budget *b = mk(1000);
	struct cfs_budget_stat st;

	ck_assert_int_eq(cfs_budget_try_reserve(b, 600), 0);
	ck_assert_int_eq(cfs_budget_try_reserve(b, 400), 0);
	/* invariant 4: the limit is full, one more byte must not be granted */
	ck_assert_int_eq(cfs_budget_try_reserve(b, 1), -EAGAIN);
	cfs_budget_release(b, 400);
	ck_assert_int_eq(cfs_budget_try_reserve(b, 1), 0);
	cfs_budget_get(b, &st);
	ck_assert_uint_eq(st.reserved, 601);
	ck_assert_uint_eq(st.peak, 1000);
	ck_assert_int_eq(cfs_budget_try_reserve(b, 0), 0);
	cfs_budget_release(b, 601);
	cfs_budget_free(b);
}
END_TEST

START_TEST(too_big_fails_at_once)
{
	struct cfs_budget *b = mk(1000);

	ck_assert_int_eq(cfs_budget_reserve(b, 1001, 10000), -EFBIG);
	/* over this epoch's admit is no error: it waits (here: times out) */
	cfs_budget_new_epoch(b, 100);
	ck_assert_int_eq(cfs_budget_reserve(b, 101, 20), -ETIMEDOUT);
	ck_assert_uint_eq(held(b), 0);
	cfs_budget_free(b);
}
END_TEST

START_TEST(timeout_without_room)
{
	struct cfs_budget *b = mk(100);

	ck_assert_int_eq(cfs_budget_try_reserve(b, 100), 0);
	ck_assert_int_eq(cfs_budget_reserve(b, 1, 30), -ETIMEDOUT);
	cfs_budget_cancel(b); /* a "forever" wait must not overflow the deadline */
	ck_assert_int_eq(cfs_budget_reserve(b, 1, UINT64_MAX), -ECANCELED);
	ck_assert_uint_eq(held(b), 100);
	cfs_budget_release(b, 100);
	cfs_budget_free(b);
}
END_TEST

START_TEST(commit_keeps_used_releases_rest)
{
	struct cfs_budget *b = mk(1000);
	struct cfs_budget_stat st;

	ck_assert_int_eq(cfs_budget_try_reserve(b, 800), 0);
	cfs_budget_commit(b, 800, 300);
	cfs_budget_get(b, &st);
	ck_assert_uint_eq(st.reserved, 0);
	ck_assert_uint_eq(st.sealed, 300);
	ck_assert_int_eq(cfs_budget_try_reserve(b, 700), 0);
	ck_assert_int_eq(cfs_budget_try_reserve(b, 1), -EAGAIN);
	cfs_budget_release(b, 700);
	cfs_budget_free(b);
}
END_TEST

START_TEST(draining_counts_until_release)
{
	struct cfs_budget *b = mk(1000);
	struct cfs_budget_stat st;

	cfs_budget_add_sealed(b, 1000);
	cfs_budget_sealed_to_draining(b, 400); /* evicted but open: still on disk */
	ck_assert_int_eq(cfs_budget_try_reserve(b, 1), -EAGAIN);
	cfs_budget_draining_removed(b, 400);
	ck_assert_int_eq(cfs_budget_try_reserve(b, 400), 0);
	cfs_budget_get(b, &st);
	ck_assert_uint_eq(st.draining, 0);
	ck_assert_uint_eq(st.sealed, 600);
	cfs_budget_sealed_to_draining(b, 600);
	cfs_budget_draining_removed(b, 600);
	ck_assert_int_eq(cfs_budget_try_reserve(b, 600), 0);
	cfs_budget_release(b, 1000);
	cfs_budget_free(b);
}
END_TEST

START_TEST(shrunk_limit_blocks_until_under)
{
	struct cfs_budget *b = mk(1000);

	cfs_budget_add_sealed(b, 500);
	cfs_budget_set_limit(b, 400); /* already above: nothing more admitted */
	ck_assert_int_eq(cfs_budget_try_reserve(b, 1), -EAGAIN);
	cfs_budget_sealed_to_draining(b, 200);
	cfs_budget_draining_removed(b, 200); /* eviction: 300 held */
	ck_assert_int_eq(cfs_budget_try_reserve(b, 101), -EAGAIN);
	ck_assert_int_eq(cfs_budget_try_reserve(b, 100), 0);
	cfs_budget_release(b, 100);
	cfs_budget_free(b);
}
END_TEST

START_TEST(admit_budget_per_epoch)
{
	struct cfs_budget *b = mk(10000);
	struct cfs_budget_stat st;

	cfs_budget_new_epoch(b, 300);
	ck_assert_int_eq(cfs_budget_try_reserve(b, 200), 0);
	cfs_budget_commit(b, 200, 200);
	ck_assert_int_eq(cfs_budget_try_reserve(b, 100), 0);
	ck_assert_int_eq(cfs_budget_try_reserve(b, 1), -EAGAIN); /* admit spent */
	cfs_budget_get(b, &st);
	ck_assert_uint_eq(st.admit_used, 300);
	/* the in-flight 100 count against the next epoch */
	cfs_budget_new_epoch(b, 300);
	cfs_budget_get(b, &st);
	ck_assert_uint_eq(st.admit_used, 100);
	ck_assert_int_eq(cfs_budget_try_reserve(b, 200), 0);
	ck_assert_int_eq(cfs_budget_try_reserve(b, 1), -EAGAIN);
	cfs_budget_release(b, 300);
	cfs_budget_get(b, &st);
	ck_assert_uint_eq(st.admit_used, 0);
	cfs_budget_free(b);
}
END_TEST

struct waiter {
	struct cfs_budget *b;
	uint64_t bytes;
	int rc;
};

static void *wait_thread(void *arg)
{
	struct waiter *w = arg;
	w->rc = cfs_budget_reserve(w->b, w->bytes, 60000);
	return NULL;
}

/* Waits (bounded) until n threads are blocked in the budget. */
static void wait_for_waiters(struct cfs_budget *b, uint32_t n)
{
	struct cfs_budget_stat st;
	for (int i = 0; i < 6000; i++) {
		cfs_budget_get(b, &st);
		if (st.waiting_limit + st.waiting_admit >= n)
			return;
		usleep(1000);
	}
	ck_abort_msg("threads never started waiting");
}

START_TEST(release_wakes_waiter)
{
	struct cfs_budget *b = mk(100);
	struct waiter w = {b, 60, 1};
	pthread_t t;

	ck_assert_int_eq(cfs_budget_try_reserve(b, 100), 0);
	pthread_create(&t, NULL, wait_thread, &w);
	wait_for_waiters(b, 1);
	cfs_budget_release(b, 60);
	pthread_join(t, NULL);
	ck_assert_int_eq(w.rc, 0);
	ck_assert_uint_eq(held(b), 100); /* 40 left + 60 granted */
	cfs_budget_release(b, 100);
	cfs_budget_free(b);
}
END_TEST

START_TEST(next_epoch_wakes_admit_waiter)
{
	struct cfs_budget *b = mk(1000);
	struct waiter w = {b, 50, 1};
	struct cfs_budget_stat st;
	pthread_t t;

	cfs_budget_new_epoch(b, 100);
	ck_assert_int_eq(cfs_budget_try_reserve(b, 100), 0);
	cfs_budget_commit(b, 100, 100);
	pthread_create(&t, NULL, wait_thread, &w);
	wait_for_waiters(b, 1);
	cfs_budget_get(b, &st);
	ck_assert_uint_eq(st.waiting_admit, 1);
	cfs_budget_new_epoch(b, 100);
	pthread_join(t, NULL);
	ck_assert_int_eq(w.rc, 0);
	cfs_budget_release(b, 50);
	cfs_budget_free(b);
}
END_TEST

/* admit = 0 (nothing fresh this epoch): writers wait for an epoch that admits. */
START_TEST(zero_admit_waits_for_next_epoch)
{
	struct cfs_budget *b = mk(1000);
	struct waiter w = {b, 500, 1};
	pthread_t t;

	cfs_budget_new_epoch(b, 0);
	ck_assert_int_eq(cfs_budget_try_reserve(b, 1), -EAGAIN);
	pthread_create(&t, NULL, wait_thread, &w);
	wait_for_waiters(b, 1);
	cfs_budget_new_epoch(b, 600);
	pthread_join(t, NULL);
	ck_assert_int_eq(w.rc, 0);
	ck_assert_uint_eq(held(b), 500);
	cfs_budget_release(b, 500);
	cfs_budget_free(b);
}
END_TEST

START_TEST(cancel_wakes_all)
{
	struct cfs_budget *b = mk(10);
	struct waiter w[4];
	pthread_t t[4];

	ck_assert_int_eq(cfs_budget_try_reserve(b, 10), 0);
	for (int i = 0; i < 4; i++) {
		w[i] = (struct waiter){b, 5, 1};
		pthread_create(&t[i], NULL, wait_thread, &w[i]);
	}
	wait_for_waiters(b, 4);
	cfs_budget_cancel(b);
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		ck_assert_int_eq(w[i].rc, -ECANCELED);
	}
	ck_assert_int_eq(cfs_budget_try_reserve(b, 0), 0);
	ck_assert_int_eq(cfs_budget_reserve(b, 1, 10), -ECANCELED);
	cfs_budget_release(b, 10);
	cfs_budget_free(b);
}
END_TEST

/*
 * Several writers reserve, "write", seal or abort at random while a watcher
 * samples the total; invariant 4: the total never exceeds the limit.
 */
#define STRESS_LIMIT 10000
struct stress {
	struct cfs_budget *b;
	atomic_int stop;
	atomic_uint_fast64_t max_seen;
	unsigned seed;
};

static void *stress_writer(void *arg)
{
	struct stress *s = arg;
	unsigned seed = __atomic_add_fetch(&s->seed, 7919, __ATOMIC_RELAXED);

	for (int i = 0; i < 3000; i++) {
		uint64_t want = 1 + rand_r(&seed) % 3000;
		if (cfs_budget_reserve(s->b, want, 2000) != 0)
			continue;
		uint64_t used = rand_r(&seed) % (want + 1);
		switch (rand_r(&seed) % 3) {
		case 0:
			cfs_budget_release(s->b, want);
			break;
		case 1:
			cfs_budget_commit(s->b, want, used);
			cfs_budget_sealed_to_draining(s->b, used);
			cfs_budget_draining_removed(s->b, used);
			break;
		default:
			cfs_budget_commit(s->b, want, used);
			cfs_budget_sealed_to_draining(s->b, used);
			cfs_budget_draining_removed(s->b, used);
			break;
		}
	}
	return NULL;
}

static void *stress_watcher(void *arg)
{
	struct stress *s = arg;
	while (!atomic_load(&s->stop)) {
		uint64_t h = held(s->b);
		uint64_t m = atomic_load(&s->max_seen);
		if (h > m)
			atomic_store(&s->max_seen, h);
	}
	return NULL;
}

START_TEST(threads_never_exceed_limit)
{
	struct stress s = {.b = mk(STRESS_LIMIT), .seed = 1};
	struct cfs_budget_stat st;
	pthread_t w[4], watch;

	atomic_init(&s.stop, 0);
	atomic_init(&s.max_seen, 0);
	pthread_create(&watch, NULL, stress_watcher, &s);
	for (int i = 0; i < 4; i++)
		pthread_create(&w[i], NULL, stress_writer, &s);
	for (int i = 0; i < 4; i++)
		pthread_join(w[i], NULL);
	atomic_store(&s.stop, 1);
	pthread_join(watch, NULL);
	cfs_budget_get(s.b, &st);
	ck_assert_uint_le(atomic_load(&s.max_seen), STRESS_LIMIT);
	ck_assert_uint_le(st.peak, STRESS_LIMIT);
	ck_assert_uint_gt(st.peak, 0); /* the writers did reserve */
	ck_assert_uint_eq(st.reserved + st.sealed + st.draining, 0);
	cfs_budget_free(s.b);
}
END_TEST

static Suite *budget_suite(void)
{
	Suite *s = suite_create("cachefs");
	struct {
		const char *name;
		const TTest *fn;
	} cases[] = {
	    {"reserve_within_limit", reserve_within_limit},
	    {"too_big_fails_at_once", too_big_fails_at_once},
	    {"timeout_without_room", timeout_without_room},
	    {"commit_keeps_used_releases_rest", commit_keeps_used_releases_rest},
	    {"draining_counts_until_release", draining_counts_until_release},
	    {"shrunk_limit_blocks_until_under", shrunk_limit_blocks_until_under},
	    {"admit_budget_per_epoch", admit_budget_per_epoch},
	    {"release_wakes_waiter", release_wakes_waiter},
	    {"next_epoch_wakes_admit_waiter", next_epoch_wakes_admit_waiter},
	    {"zero_admit_waits_for_next_epoch", zero_admit_waits_for_next_epoch},
	    {"cancel_wakes_all", cancel_wakes_all},
	    {"threads_never_exceed_limit", threads_never_exceed_limit},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		TCase *tc = tcase_create(cases[i].name);
		tcase_add_test(tc, cases[i].fn);
		suite_add_tcase(s, tc);
	}
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(budget_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
