/*
 * test_feeder_gpu.c - the feeder's device path: batches copied to a CUDA
 * device, read back and compared with the host slot and the formulas.
 * Exits 77 (skip) only where the machine has no NVIDIA device node; where
 * it has one, a runtime that does not load or finds no device FAILS, so a
 * broken device path never reads as a skip.
 */
#include "rollcache/feeder.h"

#include "fdr_gen.h"
#include "feeder/cuda_i.h"

#include <check.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SPEC "x:float32[64,3],y:int64,ids:int64[]"

static char tmpl[] = "/tmp/rc-feeder-gpu-XXXXXX";

START_TEST(test_device_copies)
{
	char err[1024] = "";
	char *dir = mkdtemp(tmpl);
	ck_assert_ptr_nonnull(dir);
	ck_assert_int_eq(gen_files(dir, SPEC, 3, 50, 0, 0, -1, 0, err, sizeof err), 0);
	struct rc_feeder_opts o;
	rc_feeder_opts_init(&o);
	o.path = dir;
	o.schema = SPEC;
	o.batch_size = 8;
	o.device = 0;
	o.shuffle = true;
	struct rc_feeder *f = rc_feeder_open(&o, err, sizeof err);
	ck_assert_msg(f != NULL, "open: %s", err);
	struct rc_batch *b;
	int rc;
	unsigned seen[150] = {0};
	float *xh = malloc(8 * 64 * 3 * sizeof(float));
	int64_t yh[8], offh[9];
	while ((rc = rc_feeder_next(f, &b)) == 1) {
		const struct rc_tensor *x = rc_batch_get(b, "x"), *y = rc_batch_get(b, "y"),
				       *ids = rc_batch_get(b, "ids");
		uint64_t n = rc_batch_rows(b);
		ck_assert_ptr_nonnull(x->device_data);
		ck_assert_int_eq(x->device, 0);
		ck_assert_int_eq(fdr__cuda_d2h(xh, x->device_data, x->nbytes), 0);
		ck_assert_int_eq(fdr__cuda_d2h(yh, y->device_data, y->nbytes), 0);
		ck_assert_int_eq(fdr__cuda_d2h(offh, ids->device_offsets, (n + 1) * 8), 0);
		ck_assert_int_eq(memcmp(xh, x->data, x->nbytes), 0);
		ck_assert_int_eq(memcmp(offh, ids->offsets, (n + 1) * 8), 0);
		for (uint64_t r = 0; r < n; r++) {
			uint64_t g = (uint64_t)yh[r] / 1000;
			ck_assert_uint_lt(g, 150);
			seen[g]++;
			ck_assert_float_eq(xh[r * 192 + 5], gen_f32(g, 0, 5));
		}
		rc_batch_release(b);
	}
	ck_assert_msg(rc == 0, "next: %s", rc_feeder_error(f));
	for (int g = 0; g < 150; g++)
		ck_assert_uint_eq(seen[g], 1);
	struct rc_feeder_stats st;
	rc_feeder_stats(f, &st);
	ck_assert_int_eq(st.device, 0);
	ck_assert_int_eq(st.pinned, 1);
	ck_assert_uint_gt(st.h2d_bytes, 0);
	/* a second epoch: slots are reused, so copies wait for their release */
	ck_assert_int_eq(rc_feeder_next_epoch(f), 0);
	size_t rows = 0;
	while ((rc = rc_feeder_next(f, &b)) == 1) {
		rows += rc_batch_rows(b);
		rc_batch_release(b);
	}
	ck_assert_int_eq(rc, 0);
	ck_assert_uint_eq(rows, 150);
	rc_feeder_close(f);
	const char *mock = getenv("ROLLCACHE_CUDART");
	if (mock && strstr(mock, "mock")) {
		/* the stand-in runtime counts what the feeder did with the API */
		void *h = dlopen(mock, RTLD_NOW | RTLD_NOLOAD);
		ck_assert_ptr_nonnull(h);
		long *(*counts)(void) = (long *(*)(void))dlsym(h, "mock_cudart_counts");
		ck_assert_ptr_nonnull(counts);
		long *c = counts();
		/* host_allocs, host_frees, dev_allocs, dev_frees, h2d_async, h2d_bytes,
		 * events_recorded, stream_waits, event_syncs, streams, streams_destroyed,
		 * events, events_destroyed, bad_calls */
		ck_assert_int_eq(c[13], 0);	/* no call with bad arguments */
		ck_assert_int_eq(c[0], c[1]);	/* every pinned block freed */
		ck_assert_int_eq(c[2], c[3]);	/* every device block freed */
		ck_assert_int_eq(c[9], c[10]);	/* the copy stream destroyed */
		ck_assert_int_eq(c[11], c[12]); /* every event destroyed */
		ck_assert_int_gt(c[7], 0);	/* copies waited for releases */
		ck_assert_int_ge(c[8], 2 * 19); /* one event sync per batch handed out */
		dlclose(h);
	}
	free(xh);
	char cmd[256];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* rc_feeder_h2d_peak: a positive rate from device 0; a message for a missing device. */
START_TEST(test_h2d_peak)
{
	char err[256] = "";
	double gbps = 0;
	int rc = rc_feeder_h2d_peak(0, (size_t)1 << 20, 3, &gbps, err, sizeof err);
	ck_assert_msg(rc == 0, "rc_feeder_h2d_peak: %d %s", rc, err);
	ck_assert_msg(gbps > 0, "gbps %f", gbps);
	gbps = -1;
	rc = rc_feeder_h2d_peak(1 << 20, (size_t)1 << 20, 3, &gbps, err, sizeof err);
	ck_assert_int_lt(rc, 0);
	ck_assert_msg(err[0] != '\0', "no message for a missing device");
	ck_assert_msg(gbps == -1, "gbps changed on failure: %f", gbps);
}
END_TEST

/* An NVIDIA device node (or WSL's /dev/dxg): the machine has a GPU. */
static int gpu_node_present(void)
{
	static const char *const nodes[] = {"/dev/nvidiactl", "/dev/nvidia0", "/dev/dxg"};
	struct stat st;
	for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++)
		if (stat(nodes[i], &st) == 0)
			return 1;
	return 0;
}

int main(void)
{
	char err[256];
	int n = 0;
	/* the stand-in runtime needs no device node */
	if (!getenv("ROLLCACHE_CUDART") && !gpu_node_present()) {
		printf("skip: no NVIDIA device node (/dev/nvidiactl, /dev/nvidia0): no GPU here\n");
		return 77;
	}
	if (fdr__cuda_devices(&n, err, sizeof err)) {
		printf("FAIL: this machine has a GPU device node but the device path "
		       "does not work: %s\n",
		       err);
		return 1;
	}
	Suite *s = suite_create("feeder-gpu");
	TCase *tc = tcase_create("device_copies");
	tcase_add_test(tc, test_device_copies);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	TCase *tp = tcase_create("h2d_peak");
	tcase_add_test(tp, test_h2d_peak);
	suite_add_tcase(s, tp);
	SRunner *sr = srunner_create(s);
	/* no fork: CUDA, once initialised above, does not survive fork() into a child */
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
