/*
 * test_requests.c - Check suite of cachefs/requests.c, the queue through
 * which the FUSE view asks the daemon: a poster sleeps until its answer,
 * answers reach the right poster in any order, close() answers what is
 * queued with -ECANCELED and refuses later calls, take() times out.
 */
#include "cachefs/requests.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static struct cfs_requests q;

struct poster {
	pthread_t t;
	struct cfs_req r;
	int rc;
};

static void *post_main(void *arg)
{
	struct poster *p = arg;
	p->rc = cfs_requests_call(&q, &p->r);
	return NULL;
}

static void start(struct poster *p, enum cfs_req_kind kind, const char *cmd)
{
	memset(p, 0, sizeof(*p));
	p->r.kind = kind;
	p->r.cmd = cmd;
	ck_assert_int_eq(pthread_create(&p->t, NULL, post_main, p), 0);
}

START_TEST(answers_reach_their_posters)
{
	cfs_requests_init(&q);
	struct poster a, b;
	start(&a, CFS_REQ_STATS_JSON, NULL);
	struct cfs_req *ra, *rb;
	ck_assert_int_eq(cfs_requests_take(&q, 5000, &ra), 0);
	start(&b, CFS_REQ_CONTROL, "next");
	ck_assert_int_eq(cfs_requests_take(&q, 5000, &rb), 0);
	ck_assert_int_eq(ra->kind, CFS_REQ_STATS_JSON);
	ck_assert_str_eq(rb->cmd, "next");
	/* answered in the other order */
	cfs_requests_done(&q, rb, -EINVAL, NULL, 0);
	pthread_join(b.t, NULL);
	ck_assert_int_eq(b.rc, -EINVAL);
	char *text = strdup("{}\n");
	cfs_requests_done(&q, ra, 0, text, 3);
	pthread_join(a.t, NULL);
	ck_assert_int_eq(a.rc, 0);
	ck_assert_str_eq(a.r.buf, "{}\n");
	ck_assert_uint_eq(a.r.len, 3);
	free(a.r.buf);
	cfs_requests_close(&q);
	cfs_requests_destroy(&q);
}
END_TEST

START_TEST(take_times_out)
{
	cfs_requests_init(&q);
	struct cfs_req *r = NULL;
	ck_assert_int_eq(cfs_requests_take(&q, 20, &r), -EAGAIN);
	ck_assert_ptr_null(r);
	cfs_requests_close(&q);
	ck_assert_int_eq(cfs_requests_take(&q, 20, &r), -ECANCELED);
	cfs_requests_destroy(&q);
}
END_TEST

START_TEST(close_cancels_queued_and_later_calls)
{
	cfs_requests_init(&q);
	struct poster a;
	start(&a, CFS_REQ_METRICS, NULL);
	/* wait until it is queued */
	for (int i = 0; i < 5000; i++) {
		pthread_mutex_lock(&q.mu);
		bool queued = q.head != NULL;
		pthread_mutex_unlock(&q.mu);
		if (queued)
			break;
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	cfs_requests_close(&q);
	pthread_join(a.t, NULL);
	ck_assert_int_eq(a.rc, -ECANCELED);
	struct cfs_req r = {.kind = CFS_REQ_CONTROL, .cmd = "next"};
	ck_assert_int_eq(cfs_requests_call(&q, &r), -ECANCELED);
	cfs_requests_destroy(&q);
}
END_TEST

static Suite *requests_suite(void)
{
	Suite *s = suite_create("cachefs-requests");
	TCase *tc = tcase_create("queue");
	tcase_add_test(tc, answers_reach_their_posters);
	tcase_add_test(tc, take_times_out);
	tcase_add_test(tc, close_cancels_queued_and_later_calls);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(requests_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
