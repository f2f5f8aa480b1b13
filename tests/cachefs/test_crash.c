/*
 * test_crash.c - SIGKILL a process writing and evicting shards at random
 * points, 50 rounds on one cache directory; after each, reopening (start-up
 * reconciliation, DESIGN invariant 6) must leave: no file in tmp/, no row
 * without a file, no file without a row, sizes equal, PRAGMA
 * integrity_check = ok, every sealed shard with valid TFRecord framing and
 * as many records as its row and sample rows say, and a budget equal to
 * the resident bytes (invariant 4).
 *
 * RC_CRASH_ROUNDS overrides the number of rounds, RC_CRASH_SEED the seed.
 */
#include "cfs_test.h"

#include "cachefs/shard_writer.h"
#include "cachefs/store.h"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#define LIMIT (2u << 20)

static char dir[256];
static struct cfs_reconcile_report sum; /* what the rounds repaired, for the log */

/* The child: writes shards forever, evicting the oldest when full. */
static void child_loop(int ready_fd, unsigned seed)
{
	struct cfs_store_opts o = {.dir = dir, .limit = LIMIT};
	struct cfs_store *s;
	char err[512], buf[8192];
	uint32_t epoch = 0;

	if (cfs_store_open(&s, &o, err, sizeof(err)) != 0) {
		fprintf(stderr, "child: %s\n", err);
		_exit(3);
	}
	if (write(ready_fd, "r", 1) != 1)
		_exit(4);
	for (unsigned iter = 0;; iter++) {
		struct cfs_shard_writer *w;
		int nrec = 1 + (int)(rand_r(&seed) % 30);

		if (iter % 4 == 3) {
			/* a raw object (format=raw) now and then, written in pieces */
			char key[32];
			size_t len = rand_r(&seed) % sizeof(buf);
			snprintf(key, sizeof(key), "raw/%u", iter);
			memset(buf, (int)iter, sizeof(buf));
			if (cfs_raw_writer_open(&w, s, epoch, 1, key, err, sizeof(err)) != 0)
				_exit(10);
			if (cfs_shard_writer_try_reserve(w, len) == 0 &&
			    cfs_raw_writer_write(w, buf, len / 2) == 0 &&
			    cfs_raw_writer_write(w, buf + len / 2, len - len / 2) == 0) {
				if (cfs_shard_writer_seal(w, NULL, err, sizeof(err)) != 0)
					_exit(11);
			} else {
				cfs_shard_writer_abort(w);
			}
			continue;
		}
		if (cfs_shard_writer_open(&w, s, epoch, err, sizeof(err)) != 0)
			_exit(5);
		for (int i = 0; i < nrec; i++) {
			size_t len = 1 + rand_r(&seed) % sizeof(buf);
			uint64_t need = cfs_shard_writer_record_bytes(len);
			memset(buf, (int)(iter + (unsigned)i), len);
			while (cfs_shard_writer_try_reserve(w, need) == -EAGAIN) {
				/* an evictor's job, done inline: oldest sealed first */
				struct cfs_shard_info *arr;
				size_t n;
				if (cfs_catalog_shards_list(cfs_store_catalog(s),
							    1u << CFS_SHARD_SEALED, &arr, &n) != 0)
					_exit(6);
				if (n == 0) {
					cfs_shard_info_free(arr, n);
					goto seal;
				}
				struct cfs_evict_item it = {arr[0].id, arr[0].kind, arr[0].bytes,
							    false};
				cfs_shard_info_free(arr, n);
				if (cfs_test_evict(s, &it, 1, epoch) != 0 ||
				    cfs_store_reap(s, &it, 1) != 0)
					_exit(7);
			}
			if (cfs_shard_writer_append(w, buf, len, cmn_crc32c(0, buf, len), 1,
						    (uint64_t)i) != 0)
				_exit(8);
		}
	seal:
		if (rand_r(&seed) % 8 == 0) {
			cfs_shard_writer_abort(w);
		} else {
			int rc = cfs_shard_writer_seal(w, NULL, err, sizeof(err));
			if (rc != 0 && rc != -ENODATA)
				_exit(9);
		}
		if (iter % 10 == 9)
			epoch++;
	}
}

struct disk {
	int64_t id;
	long long size;
};

/* Checks every promise of invariant 6 on the reopened cache. */
static void verify(int round)
{
	struct cfs_store_opts o = {.dir = dir, .limit = LIMIT};
	struct cfs_store *s = NULL;
	struct cfs_shard_info *arr;
	struct cfs_budget_stat st;
	char err[512];
	uint64_t total = 0;
	size_t n;
	int rc = cfs_store_open(&s, &o, err, sizeof(err));

	ck_assert_msg(rc == 0, "round %d: reopen: %s", round, err);
	{
		const struct cfs_reconcile_report *rep = cfs_store_reconcile_report(s);
		sum.tmp_removed += rep->tmp_removed;
		sum.rows_dropped += rep->rows_dropped;
		sum.files_removed += rep->files_removed;
		sum.size_mismatches += rep->size_mismatches;
		sum.evictions_finished += rep->evictions_finished;
		sum.resident_files = rep->resident_files;
	}
	ck_assert_int_eq(cfs_test_count(dir, "tmp"), 0);
	ck_assert_int_eq(cfs_catalog_integrity_check(cfs_store_catalog(s), err, sizeof(err)), 0);
	ck_assert_int_eq(cfs_catalog_shards_list(cfs_store_catalog(s),
						 1u << CFS_SHARD_SEALED | 1u << CFS_SHARD_EVICTING,
						 &arr, &n),
			 0);
	/* reconciliation finished every eviction: only SEALED rows are left */
	int nshards = 0, nraw = 0;
	for (size_t i = 0; i < n; i++) {
		char name[64], path[600];
		struct cfs_sample *smp;
		size_t ns;

		ck_assert_int_eq(arr[i].state, CFS_SHARD_SEALED);
		ck_assert_int_eq(cfs_catalog_samples_of(cfs_store_catalog(s), arr[i].id, &smp, &ns),
				 0);
		ck_assert_uint_eq(ns, arr[i].records);
		if (arr[i].kind == CFS_KIND_RAW) {
			/* the whole object is there: its bytes match the crc of its sample */
			static char data[8192];
			FILE *f;
			nraw++;
			snprintf(name, sizeof(name), "objects/%lld", (long long)arr[i].id);
			snprintf(path, sizeof(path), "%s/%s", dir, name);
			ck_assert_uint_eq(ns, 1);
			f = fopen(path, "rb");
			ck_assert_ptr_nonnull(f);
			ck_assert_uint_eq(fread(data, 1, sizeof(data), f), arr[i].bytes);
			fclose(f);
			ck_assert_uint_eq(cmn_crc32c(0, data, arr[i].bytes), smp[0].crc);
		} else {
			nshards++;
			snprintf(name, sizeof(name), "shards/%lld.tfrecord", (long long)arr[i].id);
			snprintf(path, sizeof(path), "%s/%s", dir, name);
			ck_assert_int_eq(cfs_test_tfrecord_records(path), (long)arr[i].records);
		}
		ck_assert_int_eq(cfs_test_size(dir, name), (long long)arr[i].bytes);
		free(smp);
		total += arr[i].bytes;
	}
	ck_assert_int_eq(cfs_test_count(dir, "shards"), nshards);
	ck_assert_int_eq(cfs_test_count(dir, "objects"), nraw);
	cfs_shard_info_free(arr, n);
	cfs_budget_get(cfs_store_budget(s), &st);
	ck_assert_uint_eq(st.sealed, total);
	ck_assert_uint_le(total, LIMIT);
	cfs_store_close(s);
}

/*
 * The surviving shards also pass `rollcache check` (common/tfrecord's
 * reader) when the command is built; this test's own framing check above
 * does not depend on it.
 */
static void check_with_rollcache(void)
{
	const char *bin = getenv("RC_BIN");
	char cmd[1024];
	int status;

	if (!bin || access(bin, X_OK) != 0 || cfs_test_count(dir, "shards") == 0) {
		fprintf(stderr, "crash test: no $RC_BIN or no shard: `rollcache check` not run\n");
		return;
	}
	snprintf(cmd, sizeof(cmd), "'%s' check --help >/dev/null 2>&1", bin);
	if (system(cmd) != 0) {
		fprintf(stderr, "crash test: `rollcache check` is not built: not run\n");
		return;
	}
	snprintf(cmd, sizeof(cmd), "'%s' check '%s/shards'", bin, dir);
	status = system(cmd);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "`rollcache check` rejected surviving shards (status %d)", status);
}

START_TEST(sigkill_rounds_leave_a_consistent_cache)
{
	const char *e = getenv("RC_CRASH_ROUNDS");
	const char *se = getenv("RC_CRASH_SEED");
	int rounds = e ? atoi(e) : 50;
	unsigned seed = se ? (unsigned)strtoul(se, NULL, 0) : (unsigned)time(NULL);
	int killed_busy = 0;

	fprintf(stderr, "crash test: %d rounds, RC_CRASH_SEED=%u\n", rounds, seed);
	cfs_test_mkscratch(dir, sizeof(dir));
	for (int r = 0; r < rounds; r++) {
		int p[2];
		char c;
		pid_t pid;
		int status;
		unsigned child_seed = rand_r(&seed);

		ck_assert_int_eq(pipe(p), 0);
		pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			close(p[0]);
			child_loop(p[1], child_seed);
			_exit(0);
		}
		close(p[1]);
		ck_assert_msg(read(p[0], &c, 1) == 1, "round %d: the writer never started", r);
		close(p[0]);
		usleep(rand_r(&seed) % 40000);
		kill(pid, SIGKILL);
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
			      "round %d: writer exited by itself (status %d)", r, status);
		killed_busy++;
		verify(r);
	}
	ck_assert_int_eq(killed_busy, rounds);
	check_with_rollcache();
	fprintf(stderr,
		"crash test: repaired %llu tmp files, %llu rows without file, %llu files "
		"without row, %llu size mismatches, %llu evictions; %llu shards resident\n",
		(unsigned long long)sum.tmp_removed, (unsigned long long)sum.rows_dropped,
		(unsigned long long)sum.files_removed, (unsigned long long)sum.size_mismatches,
		(unsigned long long)sum.evictions_finished, (unsigned long long)sum.resident_files);
	cfs_test_rmrf(dir);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cachefs");
	TCase *tc = tcase_create("sigkill_rounds_leave_a_consistent_cache");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, sigkill_rounds_leave_a_consistent_cache);
	tcase_set_timeout(tc, 600);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
