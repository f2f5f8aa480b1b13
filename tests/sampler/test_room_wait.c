/*
 * test_room_wait.c - a sampler that finds the cache full waits for room and
 * goes on (the mount's mode, stop_when_full = false), DESIGN invariant 4.
 *
 * A file:// source of 8 objects x 64 records of 4 KiB; the cache limit first
 * holds about a third of it.  A sampler thread runs the pass; the test sees
 * it wait (budget_waits > 0, disk usage at or below the limit), then raises
 * the limit as an evictor or a new epoch would, and the pass completes with
 * every record admitted once - from file:// (waits inside the transfer) and
 * over HTTP through tests/servers/faults.py (holds its transfers and waits in
 * the fetch loop).  Another case stops a waiting sampler.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cachefs/budget.h"
#include "cachefs/store.h"
#include "common/config.h"
#include "common/tfrecord.h"
#include "sampler/sampler.h"

#define OBJECTS 8
#define RECORDS 64
#define PAYLOAD 4096

static char root[256], src[300], cache[300], url[400];

static void make_source(void)
{
	char err[256], path[512];
	snprintf(root, sizeof(root), "/tmp/smp-room-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(root));
	snprintf(src, sizeof(src), "%s/src", root);
	snprintf(cache, sizeof(cache), "%s/cache", root);
	snprintf(url, sizeof(url), "file://%s/", src);
	ck_assert_int_eq(mkdir(root, 0755) == 0 || errno == EEXIST, 1);
	ck_assert_int_eq(mkdir(src, 0755), 0);
	uint8_t *p = malloc(PAYLOAD);
	for (int o = 0; o < OBJECTS; o++) {
		snprintf(path, sizeof(path), "%s/o%d.tfrecord", src, o);
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		ck_assert_int_ge(fd, 0);
		struct cmn_tfr_writer *w = NULL;
		ck_assert_int_eq(cmn_tfr_writer_open(&w, fd, 0, err, sizeof(err)), 0);
		for (int r = 0; r < RECORDS; r++) {
			memset(p, o * RECORDS + r, PAYLOAD);
			ck_assert_int_eq(cmn_tfr_writer_append(w, p, PAYLOAD, 0, false), 0);
		}
		ck_assert_int_eq(cmn_tfr_writer_flush(w), 0);
		cmn_tfr_writer_free(w);
		close(fd);
	}
	free(p);
}

static void rm_root(void)
{
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	ck_assert_int_eq(system(cmd), 0);
}

struct run {
	struct smp_sampler *s;
	int rc;
	char err[512];
	volatile int done;
};

static void *run_main(void *arg)
{
	struct run *r = arg;
	r->rc = smp_sampler_run(r->s, 0, r->err, sizeof(r->err));
	r->done = 1;
	return NULL;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* Sets up config, store and sampler; limit in bytes. */
static void open_all(struct cmn_config *cfg, struct cfs_store **store, struct smp_sampler **s,
		     uint64_t limit)
{
	char err[512], lim[32];
	cmn_config_init(cfg);
	snprintf(lim, sizeof(lim), "%llu", (unsigned long long)limit);
	ck_assert_int_eq(cmn_config_set(cfg, "url", url, "test", err, sizeof(err)), 0);
	ck_assert_int_eq(cmn_config_set(cfg, "limit", lim, "test", err, sizeof(err)), 0);
	ck_assert_int_eq(cmn_config_set(cfg, "shard_size", "64K", "test", err, sizeof(err)), 0);
	ck_assert_int_eq(cmn_config_set(cfg, "connections", "2", "test", err, sizeof(err)), 0);
	ck_assert_int_eq(cmn_config_finish(cfg, err, sizeof(err)), 0);
	struct cfs_store_opts so = {.dir = cache, .limit = limit};
	ck_assert_msg(cfs_store_open(store, &so, err, sizeof(err)) == 0, "%s", err);
	struct smp_sampler_opts o = {
	    .cfg = cfg, .store = *store, .seed = 3, .stop_when_full = false, .room_wait_ms = 200};
	ck_assert_msg(smp_sampler_new(s, &o, err, sizeof(err)) == 0, "%s", err);
}

/* Starts tests/servers/faults.py (no faults) over src; its URL into url. */
static void start_http(void)
{
	const char *srcdir = getenv("RC_SRCDIR");
	char cmd[1024];
	ck_assert_msg(srcdir != NULL, "RC_SRCDIR is not set (run through meson test)");
	snprintf(cmd, sizeof(cmd),
		 "/usr/bin/python3 %s/tests/servers/faults.py start '%s' '%s/srv' --plan ok",
		 srcdir, src, root);
	FILE *p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	ck_assert_ptr_nonnull(fgets(url, sizeof(url), p));
	ck_assert_int_eq(pclose(p), 0);
	url[strcspn(url, "\n")] = '\0';
	ck_assert(strncmp(url, "http://127.0.0.1:", 17) == 0);
}

static void stop_http(void)
{
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s/tests/servers/faults.py stop '%s/srv'",
		 getenv("RC_SRCDIR"), root);
	ck_assert_int_eq(system(cmd), 0);
}

static void waits_then_resumes(bool http)
{
	make_source();
	if (http)
		start_http();
	struct cmn_config cfg;
	struct cfs_store *store = NULL;
	struct smp_sampler *s = NULL;
	const uint64_t total = (uint64_t)OBJECTS * RECORDS * (PAYLOAD + 16);
	open_all(&cfg, &store, &s, total / 3);
	struct run r = {.s = s};
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, run_main, &r), 0);
	/* bounded wait for the sampler to find the cache full */
	for (int i = 0; i < 200 && SMP_STAT_GET(smp_sampler_stats(s), budget_waits) == 0 && !r.done;
	     i++)
		sleep_ms(50);
	ck_assert_int_eq(r.done, 0);
	ck_assert_uint_gt(SMP_STAT_GET(smp_sampler_stats(s), budget_waits), 0);
	struct cfs_budget_stat bs;
	cfs_budget_get(cfs_store_budget(store), &bs);
	ck_assert_uint_le(bs.reserved + bs.sealed + bs.draining, total / 3);
	/*
	 * While it waits, nothing it wrote is held back unsealed: the partial
	 * shard was sealed before the wait (sealing is asynchronous: bounded
	 * wait), so no bytes stay reserved and the catalog holds every record
	 * the sampler admitted.
	 */
	for (int i = 0; i < 100; i++) {
		cfs_budget_get(cfs_store_budget(store), &bs);
		if (bs.reserved == 0)
			break;
		sleep_ms(20);
	}
	ck_assert_int_eq(r.done, 0);
	ck_assert_uint_eq(bs.reserved, 0);
	ck_assert_uint_gt(bs.sealed, 0);
	struct cfs_resident held;
	ck_assert_int_eq(cfs_catalog_resident(cfs_store_catalog(store), &held), 0);
	ck_assert_uint_eq(held.records, SMP_STAT_GET(smp_sampler_stats(s), records_admitted));
	ck_assert_uint_eq(held.bytes, bs.sealed);
	/* room appears (an evictor or a larger limit): the pass completes */
	cfs_budget_set_limit(cfs_store_budget(store), 2 * total);
	for (int i = 0; i < 600 && !r.done; i++)
		sleep_ms(50);
	ck_assert_int_eq(r.done, 1);
	pthread_join(th, NULL);
	ck_assert_msg(r.rc == 0, "run: %s", r.err);
	ck_assert_uint_eq(SMP_STAT_GET(smp_sampler_stats(s), records_admitted), OBJECTS * RECORDS);
	ck_assert_uint_eq(SMP_STAT_GET(smp_sampler_stats(s), failed_objects), 0);
	struct cfs_resident res;
	ck_assert_int_eq(cfs_catalog_resident(cfs_store_catalog(store), &res), 0);
	ck_assert_uint_eq(res.records, OBJECTS * RECORDS);
	cfs_budget_get(cfs_store_budget(store), &bs);
	ck_assert_uint_le(bs.peak, 2 * total);
	ck_assert_uint_eq(SMP_STAT_GET(smp_sampler_stats(s), records_lost), 0);
	smp_sampler_free(s);
	cfs_store_close(store);
	cmn_config_free(&cfg);
	if (http)
		stop_http();
	rm_root();
}

START_TEST(waits_then_resumes_file)
{
	waits_then_resumes(false);
}
END_TEST

/* over HTTP the waiting sampler holds (pauses) its transfers instead */
START_TEST(waits_then_resumes_http)
{
	waits_then_resumes(true);
}
END_TEST

START_TEST(stop_while_waiting)
{
	make_source();
	struct cmn_config cfg;
	struct cfs_store *store = NULL;
	struct smp_sampler *s = NULL;
	const uint64_t total = (uint64_t)OBJECTS * RECORDS * (PAYLOAD + 16);
	open_all(&cfg, &store, &s, total / 4);
	struct run r = {.s = s};
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, run_main, &r), 0);
	for (int i = 0; i < 200 && SMP_STAT_GET(smp_sampler_stats(s), budget_waits) == 0 && !r.done;
	     i++)
		sleep_ms(50);
	ck_assert_uint_gt(SMP_STAT_GET(smp_sampler_stats(s), budget_waits), 0);
	smp_sampler_stop(s);
	for (int i = 0; i < 200 && !r.done; i++)
		sleep_ms(50);
	ck_assert_int_eq(r.done, 1);
	pthread_join(th, NULL);
	ck_assert_msg(r.rc == 0, "run: %s", r.err);
	struct cfs_budget_stat bs;
	cfs_budget_get(cfs_store_budget(store), &bs);
	ck_assert_uint_le(bs.peak, total / 4);
	smp_sampler_free(s);
	cfs_store_close(store);
	cmn_config_free(&cfg);
	rm_root();
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("sampler-room-wait");
	TCase *t = tcase_create("waits-then-resumes-file");
	tcase_add_test(t, waits_then_resumes_file);
	tcase_set_timeout(t, 60);
	suite_add_tcase(s, t);
	t = tcase_create("waits-then-resumes-http-faults-server");
	tcase_add_test(t, waits_then_resumes_http);
	tcase_set_timeout(t, 60);
	suite_add_tcase(s, t);
	t = tcase_create("stop-while-waiting");
	tcase_add_test(t, stop_while_waiting);
	tcase_set_timeout(t, 60);
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
