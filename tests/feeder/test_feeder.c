/*
 * test_feeder.c - the feeder pipeline in host mode (Check suite "feeder").
 *
 * Data comes from fdr_gen.h: every value is a formula of its global record
 * id g, so each batch row is checked value by value, and the ids collected
 * over an epoch prove that every record arrives exactly once.  The oracle
 * for encoding is common/example.c's encoder, checked against
 * python3-protobuf by tests/common; tests/python/test_feeder.py checks the Python path.
 */
#include "rollcache/feeder.h"

#include "fdr_gen.h"

#include <malloc.h>
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#define SPEC   "x:float32[2,3],y:int64,ids:int64[],name:bytes,m:uint8[5]"
#define NFILES 5
#define NREC   37
#define TOTAL  (NFILES * NREC)

static char tmpl[] = "/tmp/rc-feeder-test-XXXXXX";
static char *dir;

static void rm_rf(const char *d)
{
	char cmd[4200];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", d);
	if (system(cmd) != 0)
		fprintf(stderr, "cleanup of %s failed\n", d);
}

/* A fresh sub-directory of the test's temp dir with generated files. */
static char *make_data(const char *name, const char *spec, unsigned files, unsigned recs, int gzip,
		       int raw, int skip_feature, uint64_t skip_g)
{
	static char path[4200];
	char err[512] = "";
	snprintf(path, sizeof path, "%s/%s", dir, name);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	int rc =
	    gen_files(path, spec, files, recs, gzip, raw, skip_feature, skip_g, err, sizeof err);
	ck_assert_msg(rc == 0, "gen_files: %s", err);
	return path;
}

static void setup(void)
{
	strcpy(tmpl, "/tmp/rc-feeder-test-XXXXXX");
	dir = mkdtemp(tmpl);
	ck_assert_ptr_nonnull(dir);
}

static void teardown(void)
{
	rm_rf(dir);
}

static struct rc_feeder *open_f(const char *path, const char *spec, uint64_t batch,
				void (*tweak)(struct rc_feeder_opts *, void *), void *arg)
{
	struct rc_feeder_opts o;
	char err[1024] = "";
	rc_feeder_opts_init(&o);
	o.path = path;
	o.schema = spec;
	o.batch_size = batch;
	o.read_size = 4096; /* several chunks per file */
	if (tweak)
		tweak(&o, arg);
	struct rc_feeder *f = rc_feeder_open(&o, err, sizeof err);
	ck_assert_msg(f != NULL, "rc_feeder_open: %s", err);
	return f;
}

/* Checks one batch row against the formulas; returns its g. */
static uint64_t check_row(const struct rc_batch *b, size_t row)
{
	const struct rc_tensor *y = rc_batch_get(b, "y");
	ck_assert_ptr_nonnull(y);
	ck_assert_int_eq(y->dtype, RC_DT_INT64);
	ck_assert_int_eq(y->ndim, 1);
	int64_t yv = ((const int64_t *)y->data)[row];
	ck_assert_int_ge(yv, 0);
	uint64_t g = (uint64_t)yv / 1000;
	ck_assert_int_eq(yv, gen_i64(g, 1, 0));

	const struct rc_tensor *x = rc_batch_get(b, "x");
	ck_assert_int_eq(x->ndim, 3);
	ck_assert_int_eq(x->shape[1], 2);
	ck_assert_int_eq(x->shape[2], 3);
	for (int e = 0; e < 6; e++)
		ck_assert_float_eq(((const float *)x->data)[row * 6 + e], gen_f32(g, 0, e));

	const struct rc_tensor *ids = rc_batch_get(b, "ids");
	ck_assert_int_eq(ids->ragged, 1);
	ck_assert_ptr_nonnull(ids->offsets);
	int64_t a = ids->offsets[row], z = ids->offsets[row + 1];
	ck_assert_int_eq(z - a, (int64_t)((g + 2) % 4));
	for (int64_t e = 0; e < z - a; e++)
		ck_assert_int_eq(((const int64_t *)ids->data)[a + e], gen_i64(g, 2, (uint64_t)e));

	const struct rc_tensor *nm = rc_batch_get(b, "name");
	ck_assert_int_eq(nm->dtype, RC_DT_BYTES);
	a = nm->offsets[row];
	z = nm->offsets[row + 1];
	ck_assert_int_eq(z - a, (int64_t)((g + 3) % 7));
	for (int64_t e = 0; e < z - a; e++)
		ck_assert_uint_eq(((const uint8_t *)nm->data)[a + e], gen_u8(g, 3, (uint64_t)e));

	const struct rc_tensor *m = rc_batch_get(b, "m");
	for (int e = 0; e < 5; e++)
		ck_assert_uint_eq(((const uint8_t *)m->data)[row * 5 + e], gen_u8(g, 4, e));
	return g;
}

/*
 * Reads one epoch; counts each g in seen[], checks every row, records the
 * order in order[] (if not NULL).  Returns the number of rows.
 */
static size_t read_epoch(struct rc_feeder *f, unsigned *seen, size_t nseen, uint64_t *order,
			 uint64_t batch, bool expect_full)
{
	size_t rows = 0;
	struct rc_batch *b;
	int rc;
	uint64_t idx = 0;

	while ((rc = rc_feeder_next(f, &b)) == 1) {
		ck_assert_uint_eq(rc_batch_index(b), idx++);
		uint64_t n = rc_batch_rows(b);
		ck_assert_uint_ge(n, 1);
		ck_assert_uint_le(n, batch);
		if (expect_full)
			ck_assert_uint_eq(n, batch);
		const struct rc_tensor *y = rc_batch_get(b, "y");
		ck_assert_int_eq(y->shape[0], (int64_t)n);
		for (size_t r = 0; r < n; r++) {
			uint64_t g = check_row(b, r);
			ck_assert_uint_lt(g, nseen);
			seen[g]++;
			if (order)
				order[rows] = g;
			rows++;
		}
		rc_batch_release(b);
	}
	ck_assert_msg(rc == 0, "rc_feeder_next: %d %s", rc, rc_feeder_error(f));
	return rows;
}

/* Like read_epoch, for an epoch resumed at batch index `first`. */
static size_t read_epoch_from(struct rc_feeder *f, unsigned *seen, size_t nseen, uint64_t first)
{
	struct rc_batch *b;
	size_t rows = 0;
	int rc;
	while ((rc = rc_feeder_next(f, &b)) == 1) {
		ck_assert_uint_eq(rc_batch_index(b), first++);
		for (size_t r = 0; r < rc_batch_rows(b); r++) {
			uint64_t g = check_row(b, r);
			ck_assert_uint_lt(g, nseen);
			seen[g]++;
			rows++;
		}
		rc_batch_release(b);
	}
	ck_assert_msg(rc == 0, "rc_feeder_next: %d %s", rc, rc_feeder_error(f));
	return rows;
}

static void assert_once(const unsigned *seen, size_t n)
{
	for (size_t g = 0; g < n; g++)
		ck_assert_msg(seen[g] == 1, "record %zu delivered %u times", g, seen[g]);
}

/* ---- exactly once, in order, without shuffle ---- */
START_TEST(test_in_order)
{
	char *p = make_data("plain", SPEC, NFILES, NREC, 0, 0, -1, 0);
	struct rc_feeder *f = open_f(p, SPEC, 8, NULL, NULL);
	unsigned seen[TOTAL] = {0};
	uint64_t order[TOTAL];
	size_t rows = read_epoch(f, seen, TOTAL, order, 8, false);
	ck_assert_uint_eq(rows, TOTAL);
	assert_once(seen, TOTAL);
	for (size_t i = 0; i < TOTAL; i++)
		ck_assert_uint_eq(order[i], i); /* sorted files, file order */
	rc_feeder_close(f);
}
END_TEST

static void tw_shuffle(struct rc_feeder_opts *o, void *arg)
{
	o->shuffle = true;
	o->seed = arg ? *(uint64_t *)arg : 7;
	o->threads = 3;
	o->readers = 2;
	o->shuffle_window = 3;
}

/* ---- shuffled: exactly once per epoch, order differs per epoch, same seed same order ---- */
START_TEST(test_shuffle_epochs)
{
	char *p = make_data("shuf", SPEC, NFILES, NREC, 0, 0, -1, 0);
	uint64_t seed = 11;
	struct rc_feeder *f = open_f(p, SPEC, 8, tw_shuffle, &seed);
	struct rc_feeder *f2 = open_f(p, SPEC, 8, tw_shuffle, &seed);
	uint64_t o1[TOTAL], o2[TOTAL], o3[TOTAL];
	for (int epoch = 0; epoch < 3; epoch++) {
		unsigned seen[TOTAL] = {0};
		ck_assert_uint_eq(rc_feeder_epoch(f), (uint64_t)epoch);
		size_t rows = read_epoch(f, seen, TOTAL, epoch == 0 ? o1 : o2, 8, false);
		ck_assert_uint_eq(rows, TOTAL);
		assert_once(seen, TOTAL);
		if (epoch == 1) {
			size_t same = 0;
			for (size_t i = 0; i < TOTAL; i++)
				same += o1[i] == o2[i];
			ck_assert_uint_lt(same, TOTAL / 2); /* reshuffled by seed + epoch */
		}
		ck_assert_int_eq(rc_feeder_next_epoch(f), 0);
	}
	/* a second feeder with the same seed yields the same epoch-0 order */
	unsigned seen[TOTAL] = {0};
	read_epoch(f2, seen, TOTAL, o3, 8, false);
	for (size_t i = 0; i < TOTAL; i++)
		ck_assert_uint_eq(o1[i], o3[i]);
	size_t inorder = 0;
	for (size_t i = 0; i < TOTAL; i++)
		inorder += o1[i] == i;
	ck_assert_uint_lt(inorder, TOTAL / 2);
	rc_feeder_close(f);
	rc_feeder_close(f2);
}
END_TEST

struct rank_arg {
	uint32_t rank, world;
	bool drop;
	int format;
};

static void tw_rank(struct rc_feeder_opts *o, void *arg)
{
	struct rank_arg *r = arg;
	o->rank = r->rank;
	o->world_size = r->world;
	o->shuffle = true;
	o->seed = 3;
	o->drop_last = r->drop;
	o->format = r->format;
}

/*
 * Reads one epoch of rank ra->rank: counts each g in seen[] (checked row by
 * row), checks that rc_feeder_batches said how many batches came.  Returns
 * the rows; *nb the batches.
 */
static size_t read_rank_epoch(struct rc_feeder *f, unsigned *seen, size_t nseen, uint64_t batch,
			      uint64_t *nb)
{
	uint64_t want;
	ck_assert_int_eq(rc_feeder_batches(f, &want), 0);
	struct rc_batch *b;
	int rc;
	size_t rows = 0;
	*nb = 0;
	while ((rc = rc_feeder_next(f, &b)) == 1) {
		const struct rc_tensor *y = rc_batch_get(b, "y");
		for (size_t r = 0; r < rc_batch_rows(b); r++) {
			uint64_t g = (uint64_t)((const int64_t *)y->data)[r] / 1000;
			ck_assert_uint_lt(g, nseen);
			seen[g]++;
		}
		rows += rc_batch_rows(b);
		(*nb)++;
		rc_batch_release(b);
	}
	ck_assert_msg(rc == 0, "rc_feeder_next: %d %s", rc, rc_feeder_error(f));
	ck_assert_uint_eq(*nb, want);
	return rows;
}

/*
 * Splits the records of `total` over `world` ranks and checks the contract
 * (DESIGN "Scale-out", docs/feeder.md "Ranks"): every rank the same rows
 * and batches; without drop_last every record at least once and only the
 * padding (w * ceil(T/w) - T records) twice; with drop_last no record twice
 * and only full batches.  Over two epochs (the second reshuffled).
 */
static void check_split(const char *p, const char *spec, size_t total, uint32_t world, bool drop,
			int format, uint64_t B)
{
	unsigned *seen = calloc(total, sizeof *seen);
	struct rc_feeder *f[8];
	ck_assert_uint_le(world, 8);
	for (uint32_t r = 0; r < world; r++) {
		struct rank_arg ra = {.rank = r, .world = world, .drop = drop, .format = format};
		f[r] = open_f(p, spec, B, tw_rank, &ra);
		uint32_t gr, gw;
		rc_feeder_split(f[r], &gr, &gw);
		ck_assert_uint_eq(gr, r);
		ck_assert_uint_eq(gw, world);
	}
	size_t share = drop ? total / world : (total + world - 1) / world;
	for (int epoch = 0; epoch < 2; epoch++) {
		memset(seen, 0, total * sizeof *seen);
		uint64_t nb0 = 0;
		size_t rows0 = 0;
		for (uint32_t r = 0; r < world; r++) {
			uint64_t nb;
			size_t rows = read_rank_epoch(f[r], seen, total, B, &nb);
			if (r == 0) {
				nb0 = nb;
				rows0 = rows;
			}
			ck_assert_uint_eq(nb, nb0); /* equal steps on every rank */
			ck_assert_uint_eq(rows, rows0);
			ck_assert_uint_eq(rows, drop ? share / B * B : share);
			ck_assert_uint_eq(nb, drop ? share / B : (share + B - 1) / B);
			ck_assert_int_eq(rc_feeder_next_epoch(f[r]), 0);
		}
		size_t twice = 0, missing = 0;
		for (size_t g = 0; g < total; g++) {
			ck_assert_uint_le(seen[g], 2);
			twice += seen[g] == 2;
			missing += seen[g] == 0;
		}
		if (drop) {
			ck_assert_uint_eq(twice, 0);
			ck_assert_uint_eq(missing, total - world * (share / B * B));
		} else {
			ck_assert_uint_eq(missing, 0);
			ck_assert_uint_eq(twice, world * share - total);
		}
	}
	for (uint32_t r = 0; r < world; r++)
		rc_feeder_close(f[r]);
	free(seen);
}

/* ---- rank split by records: equal batches, disjoint (but the padding), complete ---- */
START_TEST(test_rank_split)
{
	char *p = make_data("ranks", SPEC, NFILES, NREC, 0, 0, -1, 0);
	static const uint32_t worlds[] = {2, 3, 6};
	for (size_t i = 0; i < 3; i++)
		for (int drop = 0; drop < 2; drop++)
			check_split(p, SPEC, TOTAL, worlds[i], drop, RC_FORMAT_TFRECORD, 4);
	/* more ranks than records per file, batches larger than a share */
	check_split(p, SPEC, TOTAL, 8, false, RC_FORMAT_TFRECORD, 32);
	check_split(p, SPEC, TOTAL, 8, true, RC_FORMAT_TFRECORD, 5);
}
END_TEST

/* ---- the same over GZIP files (skipped into by inflating) and raw files ---- */
START_TEST(test_rank_split_gzip_raw)
{
	char *p = make_data("ranks-gz", SPEC, 3, NREC, 1, 0, -1, 0);
	check_split(p, SPEC, 3 * NREC, 4, false, RC_FORMAT_TFRECORD, 4);
	check_split(p, SPEC, 3 * NREC, 3, true, RC_FORMAT_TFRECORD, 4);
	const char *rspec = "y:int64,x:float32[2,3],m:uint8[5]";
	char *q = make_data("ranks-raw", rspec, 3, 50, 0, 1, -1, 0);
	check_split(q, rspec, 150, 4, false, RC_FORMAT_RAW, 8);
	check_split(q, rspec, 150, 4, true, RC_FORMAT_RAW, 8);
}
END_TEST

/* ---- fewer records than ranks: padding gives each rank one; dropping, none ---- */
START_TEST(test_rank_split_tiny)
{
	char *p = make_data("tiny", SPEC, 1, 3, 0, 0, -1, 0);
	check_split(p, SPEC, 3, 5, false, RC_FORMAT_TFRECORD, 2);
	check_split(p, SPEC, 3, 5, true, RC_FORMAT_TFRECORD, 2);
}
END_TEST

/* Rows' g of the rest of the epoch, in order, into out; returns how many. */
static size_t read_order(struct rc_feeder *f, uint64_t *out, size_t cap, uint64_t first_index)
{
	struct rc_batch *b;
	size_t n = 0;
	int rc;
	uint64_t idx = first_index;
	while ((rc = rc_feeder_next(f, &b)) == 1) {
		ck_assert_uint_eq(rc_batch_index(b), idx++);
		const struct rc_tensor *y = rc_batch_get(b, "y");
		for (size_t r = 0; r < rc_batch_rows(b); r++) {
			ck_assert_uint_lt(n, cap);
			out[n++] = (uint64_t)((const int64_t *)y->data)[r] / 1000;
		}
		rc_batch_release(b);
	}
	ck_assert_msg(rc == 0, "rc_feeder_next: %d %s", rc, rc_feeder_error(f));
	return n;
}

/* ---- seek: resuming at batch k gives the same records as reading on ---- */
START_TEST(test_seek_resume)
{
	char *p = make_data("seek", SPEC, NFILES, NREC, 0, 0, -1, 0);
	struct rank_arg ra = {.rank = 1, .world = 2};
	uint64_t a[2 * TOTAL], b[TOTAL];
	struct rc_feeder *f = open_f(p, SPEC, 4, tw_rank, &ra);
	size_t n0 = read_order(f, a, TOTAL, 0);
	ck_assert_uint_eq(n0, (TOTAL + 1) / 2);
	ck_assert_int_eq(rc_feeder_next_epoch(f), 0);
	size_t n1 = read_order(f, a + n0, 2 * TOTAL - n0, 0);
	rc_feeder_close(f);

	/* a new feeder (a restarted job) resumes epoch 0 at batch 5 */
	f = open_f(p, SPEC, 4, tw_rank, &ra);
	ck_assert_int_eq(rc_feeder_seek(f, 0, 5, -1), 0);
	ck_assert_uint_eq(rc_feeder_position(f), 5);
	size_t m = read_order(f, b, TOTAL, 5);
	ck_assert_uint_eq(m, n0 - 20);
	for (size_t i = 0; i < m; i++)
		ck_assert_uint_eq(b[i], a[20 + i]);
	/* and epoch 1 at batch 2, after reading a little of epoch 0 again */
	ck_assert_int_eq(rc_feeder_seek(f, 0, 0, -1), 0);
	struct rc_batch *bt;
	ck_assert_int_eq(rc_feeder_next(f, &bt), 1);
	rc_batch_release(bt);
	ck_assert_int_eq(rc_feeder_seek(f, 1, 2, -1), 0);
	ck_assert_uint_eq(rc_feeder_epoch(f), 1);
	m = read_order(f, b, TOTAL, 2);
	ck_assert_uint_eq(m, n1 - 8);
	for (size_t i = 0; i < m; i++)
		ck_assert_uint_eq(b[i], a[n0 + 8 + i]);
	/* past the end: an empty epoch */
	ck_assert_int_eq(rc_feeder_seek(f, 1, 1000, -1), 0);
	ck_assert_int_eq(rc_feeder_next(f, &bt), 0);
	rc_feeder_close(f);
}
END_TEST

/*
 * Checks a resume at world size `to` of a state saved at world size `from`
 * after k batches of epoch 0 (every old rank at batch k): the old ranks'
 * first k batches and the new ranks' batches together read every record
 * of the epoch once - but for the new split's padding (without drop_last)
 * or its dropped remainder (with) - and every new rank gets the same
 * number of batches, the one rc_feeder_batches announced.  Then the next
 * epoch is the plain split's.
 */
static void check_resplit(const char *p, uint32_t from, uint32_t to, uint64_t k, bool drop)
{
	unsigned seen[TOTAL] = {0}, next[TOTAL] = {0}, want_next[TOTAL] = {0};
	struct rank_arg ra = {.world = from, .drop = drop};
	uint64_t consumed = 0;
	for (uint32_t r = 0; r < from; r++) {
		ra.rank = r;
		struct rc_feeder *f = open_f(p, SPEC, 4, tw_rank, &ra);
		struct rc_batch *b;
		for (uint64_t i = 0; i < k; i++) {
			ck_assert_int_eq(rc_feeder_next(f, &b), 1);
			for (size_t row = 0; row < rc_batch_rows(b); row++) {
				seen[check_row(b, row)]++;
				consumed++;
			}
			rc_batch_release(b);
		}
		rc_feeder_close(f);
	}
	ck_assert_uint_eq(consumed, from * k * 4);
	uint64_t rest = TOTAL - consumed, batches[8];
	size_t rows = 0;
	ra.world = to;
	for (uint32_t r = 0; r < to; r++) {
		ra.rank = r;
		struct rc_feeder *f = open_f(p, SPEC, 4, tw_rank, &ra);
		ck_assert_int_eq(rc_feeder_seek_resplit(f, 0, 0, -1, from, k), 0);
		rows += read_rank_epoch(f, seen, TOTAL, 4, &batches[r]);
		ck_assert_uint_eq(batches[r], batches[0]);
		/* the epoch after it: the plain split */
		ck_assert_int_eq(rc_feeder_next_epoch(f), 0);
		uint64_t nb, nb2;
		read_rank_epoch(f, next, TOTAL, 4, &nb);
		rc_feeder_close(f);
		f = open_f(p, SPEC, 4, tw_rank, &ra);
		ck_assert_int_eq(rc_feeder_seek(f, 1, 0, -1), 0);
		read_rank_epoch(f, want_next, TOTAL, 4, &nb2);
		ck_assert_uint_eq(nb, nb2);
		rc_feeder_close(f);
	}
	for (size_t g = 0; g < TOTAL; g++)
		ck_assert_uint_eq(next[g], want_next[g]);
	uint64_t share = drop ? rest / to : (rest + to - 1) / to;
	ck_assert_uint_eq(batches[0], drop ? share / 4 : (share + 3) / 4);
	size_t missing = 0, twice = 0;
	for (size_t g = 0; g < TOTAL; g++) {
		ck_assert_uint_le(seen[g], 2);
		missing += seen[g] == 0;
		twice += seen[g] == 2;
	}
	if (drop) {
		ck_assert_uint_eq(twice, 0);
		ck_assert_uint_eq(rows, to * (share / 4 * 4));
		ck_assert_uint_eq(missing, rest - rows);
	} else {
		ck_assert_uint_eq(missing, 0);
		ck_assert_uint_eq(rows, to * share);
		ck_assert_uint_eq(twice, to * share - rest);
	}
}

/* ---- resume at another world size: the rest of the epoch, once, split evenly ---- */
START_TEST(test_resplit)
{
	char *p = make_data("resplit", SPEC, NFILES, NREC, 0, 0, -1, 0);
	check_resplit(p, 1, 2, 10, false);
	check_resplit(p, 1, 2, 10, true);
	check_resplit(p, 2, 3, 5, false);
	check_resplit(p, 3, 1, 4, false);
	check_resplit(p, 2, 2, 0, true); /* nothing consumed: a plain split of the epoch */
	/* GZIP files: segments inside a file are reached by inflating */
	char *q = make_data("resplit-gz", SPEC, NFILES, NREC, 1, 0, -1, 0);
	check_resplit(q, 1, 3, 7, false);

	/* every slot held: the replay has none to assemble in, and says so */
	struct rank_arg ra = {.rank = 0, .world = 2};
	struct rc_feeder *f = open_f(p, SPEC, 4, tw_rank, &ra);
	struct rc_batch *held[4];
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(rc_feeder_next(f, &held[i]), 1);
	ck_assert_int_eq(rc_feeder_seek_resplit(f, 0, 0, -1, 1, 3), -EBUSY);
	ck_assert_msg(strstr(rc_feeder_error(f), "ring slots are held"), "message: %s",
		      rc_feeder_error(f));
	for (int i = 0; i < 4; i++)
		rc_batch_release(held[i]);
	ck_assert_int_eq(rc_feeder_seek_resplit(f, 0, 0, -1, 1, 3), 0);
	unsigned seen[TOTAL] = {0};
	uint64_t nb;
	ck_assert_uint_eq(read_rank_epoch(f, seen, TOTAL, 4, &nb), (TOTAL - 12 + 1) / 2);
	rc_feeder_close(f);
}
END_TEST

/* ---- truncate: the epoch ends after n batches; batches() counts with world 1 ---- */
START_TEST(test_truncate)
{
	char *p = make_data("trunc", SPEC, NFILES, NREC, 0, 0, -1, 0);
	struct rc_feeder *f = open_f(p, SPEC, 10, tw_shuffle, NULL);
	uint64_t n;
	ck_assert_int_eq(rc_feeder_batches(f, &n), 0);
	ck_assert_uint_eq(n, (TOTAL + 9) / 10); /* counted: world 1 plans whole files */
	struct rc_batch *b;
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(rc_feeder_next(f, &b), 1);
		rc_batch_release(b);
	}
	rc_feeder_truncate(f, 3);
	ck_assert_int_eq(rc_feeder_batches(f, &n), 0);
	ck_assert_uint_eq(n, 3);
	ck_assert_int_eq(rc_feeder_next(f, &b), 1);
	rc_batch_release(b);
	ck_assert_int_eq(rc_feeder_next(f, &b), 0);
	ck_assert_uint_eq(rc_feeder_position(f), 3);
	/* the next epoch is whole again */
	ck_assert_int_eq(rc_feeder_next_epoch(f), 0);
	unsigned seen[TOTAL] = {0};
	ck_assert_uint_eq(read_epoch(f, seen, TOTAL, NULL, 10, false), TOTAL);
	rc_feeder_close(f);
}
END_TEST

static void tw_env(struct rc_feeder_opts *o, void *arg)
{
	(void)arg;
	o->world_size = 0; /* the default: from the environment */
}

/* ---- world_size 0: RANK/WORLD_SIZE on a directory, malformed ones refused ---- */
START_TEST(test_env_split)
{
	char *p = make_data("env", SPEC, NFILES, NREC, 0, 0, -1, 0);
	uint32_t r, w;
	setenv("RANK", "2", 1);
	setenv("WORLD_SIZE", "3", 1);
	setenv("LOCAL_RANK", "0", 1);
	setenv("LOCAL_WORLD_SIZE", "1", 1);
	struct rc_feeder *f = open_f(p, SPEC, 4, tw_env, NULL);
	rc_feeder_split(f, &r, &w);
	ck_assert_uint_eq(r, 2);
	ck_assert_uint_eq(w, 3); /* a plain directory: the global pair */
	unsigned seen[TOTAL] = {0};
	ck_assert_uint_eq(read_epoch(f, seen, TOTAL, NULL, 4, false), (TOTAL + 2) / 3);
	rc_feeder_close(f);
	setenv("WORLD_SIZE", "x3", 1);
	struct rc_feeder_opts o;
	char err[512] = "";
	rc_feeder_opts_init(&o);
	o.path = p;
	o.schema = SPEC;
	o.batch_size = 4;
	ck_assert_ptr_null(rc_feeder_open(&o, err, sizeof err));
	ck_assert_msg(strstr(err, "WORLD_SIZE=x3"), "message: %s", err);
	setenv("WORLD_SIZE", "2", 1);
	ck_assert_ptr_null(rc_feeder_open(&o, err, sizeof err));
	ck_assert_msg(strstr(err, "RANK=2 out of range"), "message: %s", err);
	unsetenv("RANK");
	unsetenv("WORLD_SIZE");
	unsetenv("LOCAL_RANK");
	unsetenv("LOCAL_WORLD_SIZE");
	f = open_f(p, SPEC, 4, tw_env, NULL);
	rc_feeder_split(f, &r, &w);
	ck_assert_uint_eq(w, 1);
	rc_feeder_close(f);
}
END_TEST

/*
 * A stand-in for a rollcache mount with epochs: m/.rollcache/control and
 * metrics (plain files: the test reads what the feeder wrote), m/epochs/N
 * and m/current -> epochs/<cur>.  Returns m's path (static).
 */
static const char *fake_mount(int cur, uint64_t resident)
{
	static char m[4200];
	char p[4400];
	snprintf(m, sizeof m, "%s/m", dir);
	ck_assert_int_eq(mkdir(m, 0755), 0);
	snprintf(p, sizeof p, "%s/.rollcache", m);
	ck_assert_int_eq(mkdir(p, 0755), 0);
	snprintf(p, sizeof p, "%s/epochs", m);
	ck_assert_int_eq(mkdir(p, 0755), 0);
	snprintf(p, sizeof p, "%s/epochs/%d", m, cur);
	ck_assert_int_eq(mkdir(p, 0755), 0);
	snprintf(p, sizeof p, "%s/current", m);
	char target[64];
	snprintf(target, sizeof target, "epochs/%d", cur);
	ck_assert_int_eq(symlink(target, p), 0);
	snprintf(p, sizeof p, "%s/.rollcache/control", m);
	FILE *fp = fopen(p, "w");
	ck_assert_ptr_nonnull(fp);
	fclose(fp);
	snprintf(p, sizeof p, "%s/.rollcache/metrics", m);
	fp = fopen(p, "w");
	ck_assert_ptr_nonnull(fp);
	fprintf(fp,
		"# HELP rollcache_epoch x\nrollcache_epoch %d\nrollcache_resident_records %llu\n",
		cur, (unsigned long long)resident);
	fclose(fp);
	return m;
}

static void fake_epoch(const char *m, int e, unsigned files, unsigned recs)
{
	char p[4400], err[512] = "";
	snprintf(p, sizeof p, "%s/epochs/%d", m, e);
	mkdir(p, 0755);
	ck_assert_int_eq(gen_files(p, SPEC, files, recs, 0, 0, -1, 0, err, sizeof err), 0);
}

/* The last command the feeder wrote to the stand-in's control file. */
static void control_says(const char *m, const char *want)
{
	char p[4400], got[64] = "";
	snprintf(p, sizeof p, "%s/.rollcache/control", m);
	FILE *fp = fopen(p, "r");
	ck_assert_ptr_nonnull(fp);
	size_t n = fread(got, 1, sizeof got - 1, fp);
	fclose(fp);
	got[n] = '\0';
	ck_assert_str_eq(got, want);
	fp = fopen(p, "w"); /* empty again for the next command */
	fclose(fp);
}

/* ---- a mount's epochs: epochs/<base + e>, "next N", never `current` ---- */
START_TEST(test_mount_epochs)
{
	const char *m = fake_mount(3, 0);
	fake_epoch(m, 3, 2, 10);
	fake_epoch(m, 4, 3, 10);
	char cur[4300];
	snprintf(cur, sizeof cur, "%s/current", m);
	struct rank_arg ra = {.rank = 0, .world = 2};
	struct rc_feeder *f = open_f(cur, SPEC, 4, tw_rank, &ra);
	ck_assert_int_eq(rc_feeder_mount_epoch(f), 3);
	unsigned seen[30] = {0};
	ck_assert_uint_eq(read_epoch(f, seen, 30, NULL, 4, false), 10);
	ck_assert_int_eq(rc_feeder_next_epoch(f), 0);
	control_says(m, "next 4");
	ck_assert_int_eq(rc_feeder_mount_epoch(f), 4);
	ck_assert_uint_eq(rc_feeder_epoch(f), 1);
	memset(seen, 0, sizeof seen);
	ck_assert_uint_eq(read_epoch(f, seen, 30, NULL, 4, false), 15); /* epochs/4, not current */
	/* a saved state: feeder epoch 0 was mount epoch 3 */
	ck_assert_int_eq(rc_feeder_seek(f, 0, 1, 3), 0);
	control_says(m, "next 3");
	ck_assert_int_eq(rc_feeder_mount_epoch(f), 3);
	memset(seen, 0, sizeof seen);
	ck_assert_uint_eq(read_epoch_from(f, seen, 30, 1), 6);
	ck_assert_int_eq(rc_feeder_advance_to(f, 9), 0);
	control_says(m, "next 9");
	/* the epoch is gone: the listing error names it */
	ck_assert_int_eq(rc_feeder_seek(f, 5, 0, -1), -ENOENT);
	ck_assert_msg(strstr(rc_feeder_error(f), "epochs/8"), "message: %s", rc_feeder_error(f));
	rc_feeder_close(f);
	/* opened on epochs/4 itself: base 4 */
	char e4[4300];
	snprintf(e4, sizeof e4, "%s/epochs/4", m);
	f = open_f(e4, SPEC, 4, tw_rank, &ra);
	ck_assert_int_eq(rc_feeder_mount_epoch(f), 4);
	rc_feeder_close(f);
}
END_TEST

struct late_data {
	const char *m;
};

static void *data_arrives(void *arg)
{
	struct late_data *ld = arg;
	usleep(300 * 1000);
	fake_epoch(ld->m, 1, 2, 5);
	char p[4400];
	snprintf(p, sizeof p, "%s/.rollcache/metrics", ld->m);
	FILE *fp = fopen(p, "w");
	fprintf(fp, "rollcache_epoch 0\nrollcache_resident_records 10\n");
	fclose(fp);
	return NULL;
}

static void tw_wait(struct rc_feeder_opts *o, void *arg)
{
	o->wait_ms = arg ? 300 : 20000;
	o->world_size = 1;
}

/* ---- an empty first epoch: wait for data, then ask for the next epoch ---- */
START_TEST(test_mount_wait_data)
{
	const char *m = fake_mount(0, 0);
	char cur[4300];
	snprintf(cur, sizeof cur, "%s/current", m);
	/* nothing arrives: a clear error after wait_ms */
	struct rc_feeder_opts o;
	char err[1024] = "";
	rc_feeder_opts_init(&o);
	o.path = cur;
	o.schema = SPEC;
	o.batch_size = 4;
	tw_wait(&o, (void *)1);
	ck_assert_ptr_null(rc_feeder_open(&o, err, sizeof err));
	ck_assert_msg(strstr(err, "epoch 0 has no files and no data arrived"), "message: %s", err);
	/* data arrives: the feeder asks for epoch 1 and reads it */
	struct late_data ld = {.m = m};
	pthread_t t;
	pthread_create(&t, NULL, data_arrives, &ld);
	struct rc_feeder *f = open_f(cur, SPEC, 4, tw_wait, NULL);
	pthread_join(t, NULL);
	control_says(m, "next 1 wait");
	ck_assert_int_eq(rc_feeder_mount_epoch(f), 1);
	ck_assert_uint_eq(rc_feeder_epoch(f), 0);
	unsigned seen[10] = {0};
	ck_assert_uint_eq(read_epoch(f, seen, 10, NULL, 4, false), 10);
	assert_once(seen, 10);
	rc_feeder_close(f);
}
END_TEST

static void tw_drop(struct rc_feeder_opts *o, void *arg)
{
	o->drop_last = true;
	o->shuffle = arg != NULL;
}

/* ---- drop_last: only full batches, the remainder dropped ---- */
START_TEST(test_drop_last)
{
	char *p = make_data("drop", SPEC, NFILES, NREC, 0, 0, -1, 0);
	for (int shuf = 0; shuf < 2; shuf++) {
		struct rc_feeder *f = open_f(p, SPEC, 10, tw_drop, shuf ? p : NULL);
		unsigned seen[TOTAL] = {0};
		size_t rows = read_epoch(f, seen, TOTAL, NULL, 10, true);
		ck_assert_uint_eq(rows, (TOTAL / 10) * 10);
		size_t once = 0;
		for (size_t g = 0; g < TOTAL; g++) {
			ck_assert_uint_le(seen[g], 1);
			once += seen[g];
		}
		ck_assert_uint_eq(once, rows);
		rc_feeder_close(f);
	}
	/* without drop_last the last batch is short */
	struct rc_feeder *f = open_f(p, SPEC, 10, NULL, NULL);
	struct rc_batch *b, *last = NULL;
	uint64_t lastrows = 0;
	while (rc_feeder_next(f, &b) == 1) {
		lastrows = rc_batch_rows(b);
		last = b;
		rc_batch_release(b);
	}
	ck_assert_ptr_nonnull(last);
	ck_assert_uint_eq(lastrows, TOTAL % 10);
	rc_feeder_close(f);
}
END_TEST

/* ---- GZIP files (auto-detected) ---- */
START_TEST(test_gzip)
{
	char *p = make_data("gz", SPEC, 3, NREC, 1, 0, -1, 0);
	struct rc_feeder *f = open_f(p, SPEC, 7, tw_shuffle, NULL);
	unsigned seen[3 * NREC] = {0};
	ck_assert_uint_eq(read_epoch(f, seen, 3 * NREC, NULL, 7, false), 3 * NREC);
	assert_once(seen, 3 * NREC);
	rc_feeder_close(f);
}
END_TEST

static void tw_raw(struct rc_feeder_opts *o, void *arg)
{
	o->format = RC_FORMAT_RAW;
	o->read_size = 4096;
}

/* ---- raw fixed-size records ---- */
START_TEST(test_raw)
{
	const char *spec = "y:int64,x:float32[2,3],m:uint8[5]";
	char *p = make_data("raw", spec, 2, 300, 0, 1, -1, 0);
	struct rc_feeder *f = open_f(p, spec, 16, tw_raw, NULL);
	struct rc_batch *b;
	unsigned seen[600] = {0};
	int rc;
	while ((rc = rc_feeder_next(f, &b)) == 1) {
		const struct rc_tensor *y = rc_batch_get(b, "y"), *x = rc_batch_get(b, "x"),
				       *m = rc_batch_get(b, "m");
		for (size_t r = 0; r < rc_batch_rows(b); r++) {
			uint64_t g = (uint64_t)((const int64_t *)y->data)[r] / 1000;
			ck_assert_uint_lt(g, 600);
			seen[g]++;
			ck_assert_int_eq(((const int64_t *)y->data)[r], gen_i64(g, 0, 0));
			for (int e = 0; e < 6; e++)
				ck_assert_float_eq(((const float *)x->data)[r * 6 + e],
						   gen_f32(g, 1, e));
			for (int e = 0; e < 5; e++)
				ck_assert_uint_eq(((const uint8_t *)m->data)[r * 5 + e],
						  gen_u8(g, 2, e));
		}
		rc_batch_release(b);
	}
	ck_assert_int_eq(rc, 0);
	assert_once(seen, 600);
	rc_feeder_close(f);
}
END_TEST

/* Expects open to succeed and the first failing next() to return want_rc with all needles. */
static void expect_next_error(const char *path, const char *spec, int want_rc,
			      const char *const *needles)
{
	struct rc_feeder *f = open_f(path, spec, 4, NULL, NULL);
	struct rc_batch *b;
	int rc;
	while ((rc = rc_feeder_next(f, &b)) == 1)
		rc_batch_release(b);
	ck_assert_int_eq(rc, want_rc);
	const char *msg = rc_feeder_error(f);
	for (size_t i = 0; needles[i]; i++)
		ck_assert_msg(strstr(msg, needles[i]), "message '%s' lacks '%s'", msg, needles[i]);
	rc_feeder_close(f);
}

/* ---- a record missing a feature: file, record index and feature named ---- */
START_TEST(test_err_missing_feature)
{
	/* feature 1 (y) missing from g = 45 = file 1, record 8 */
	char *p = make_data("miss", SPEC, 2, NREC, 0, 0, 1, 45);
	const char *needles[] = {"part-00001.tfrecord", "record 8", "'y'", NULL};
	expect_next_error(p, SPEC, -ENOENT, needles);
	/* with a default the same files read cleanly */
	const char *spec2 = "x:float32[2,3],y:int64=-5,ids:int64[],name:bytes,m:uint8[5]";
	struct rc_feeder *f = open_f(p, spec2, 4, NULL, NULL);
	struct rc_batch *b;
	size_t rows = 0, defaults = 0;
	int rc;
	while ((rc = rc_feeder_next(f, &b)) == 1) {
		const struct rc_tensor *y = rc_batch_get(b, "y");
		for (size_t r = 0; r < rc_batch_rows(b); r++)
			defaults += ((const int64_t *)y->data)[r] == -5;
		rows += rc_batch_rows(b);
		rc_batch_release(b);
	}
	ck_assert_int_eq(rc, 0);
	ck_assert_uint_eq(rows, 2 * NREC);
	ck_assert_uint_eq(defaults, 1);
	rc_feeder_close(f);
}
END_TEST

/* ---- wrong type / wrong count ---- */
START_TEST(test_err_wrong_type)
{
	char *p = make_data("type", SPEC, 1, NREC, 0, 0, -1, 0);
	const char *n1[] = {"part-00000.tfrecord", "record 0", "'y'", NULL};
	expect_next_error(p, "y:float32", -EINVAL, n1);
	const char *n2[] = {"part-00000.tfrecord", "record 0", "'x'", NULL};
	expect_next_error(p, "x:float32[7]", -EINVAL, n2);
}
END_TEST

/* ---- a corrupt record (payload bit flip) and a truncated file ---- */
START_TEST(test_err_corrupt)
{
	char *p = make_data("corrupt", SPEC, 1, NREC, 0, 0, -1, 0);
	char file[4400];
	snprintf(file, sizeof file, "%s/part-00000.tfrecord", p);
	struct stat sb;
	ck_assert_int_eq(stat(file, &sb), 0);
	FILE *fp = fopen(file, "r+b");
	ck_assert_ptr_nonnull(fp);
	/* flip a byte in the middle: some record's payload */
	long mid = (long)sb.st_size / 2;
	fseek(fp, mid, SEEK_SET);
	int c = fgetc(fp);
	fseek(fp, mid, SEEK_SET);
	fputc(c ^ 0x40, fp);
	fclose(fp);
	const char *n1[] = {"part-00000.tfrecord", "record ", "crc", NULL};
	struct rc_feeder *f = open_f(p, SPEC, 4, NULL, NULL);
	struct rc_batch *b;
	int rc;
	while ((rc = rc_feeder_next(f, &b)) == 1)
		rc_batch_release(b);
	ck_assert_msg(rc == -EBADMSG || rc == -EILSEQ, "rc %d: %s", rc, rc_feeder_error(f));
	for (size_t i = 0; n1[i]; i++)
		ck_assert_msg(strstr(rc_feeder_error(f), n1[i]), "'%s' lacks '%s'",
			      rc_feeder_error(f), n1[i]);
	rc_feeder_close(f);

	/* truncated: cut the file in the middle of its last record */
	ck_assert_int_eq(truncate(file, sb.st_size - 3), 0);
	f = open_f(p, SPEC, 4, NULL, NULL);
	while ((rc = rc_feeder_next(f, &b)) == 1)
		rc_batch_release(b);
	ck_assert_int_lt(rc, 0);
	ck_assert_msg(strstr(rc_feeder_error(f), "part-00000.tfrecord"), "%s", rc_feeder_error(f));
	rc_feeder_close(f);
	/* without the flipped byte only the truncation remains */
	char *q = make_data("trunc", SPEC, 1, NREC, 0, 0, -1, 0);
	snprintf(file, sizeof file, "%s/part-00000.tfrecord", q);
	ck_assert_int_eq(stat(file, &sb), 0);
	ck_assert_int_eq(truncate(file, sb.st_size - 3), 0);
	char msg[64];
	snprintf(msg, sizeof msg, "record %d", NREC - 1);
	const char *n3[] = {"part-00000.tfrecord", msg, "truncated", NULL};
	expect_next_error(q, SPEC, -EPROTO, n3);
}
END_TEST

/* ---- counting by the framing: records longer than a walk block, a truncated file, a bad header
 * ---- */
START_TEST(test_count_framing)
{
	/* 80 KB records: each costs the count one small read of its header */
	const char *big = "y:int64,x:float32[20000]";
	char *p = make_data("count-big", big, 2, 9, 0, 0, -1, 0);
	struct rc_feeder *f = open_f(p, big, 1, NULL, NULL);
	uint64_t n;
	ck_assert_msg(rc_feeder_batches(f, &n) == 0, "%s", rc_feeder_error(f));
	ck_assert_uint_eq(n, 18);
	rc_feeder_close(f);

	char file[4400];
	struct stat sb;
	p = make_data("count-trunc", SPEC, 1, NREC, 0, 0, -1, 0);
	snprintf(file, sizeof file, "%s/part-00000.tfrecord", p);
	ck_assert_int_eq(stat(file, &sb), 0);
	ck_assert_int_eq(truncate(file, sb.st_size - 3), 0);
	f = open_f(p, SPEC, 1, NULL, NULL);
	ck_assert_int_eq(rc_feeder_batches(f, &n), -EPROTO);
	char msg[64];
	snprintf(msg, sizeof msg, "record %d (offset ", NREC - 1);
	ck_assert_msg(strstr(rc_feeder_error(f), msg) && strstr(rc_feeder_error(f), "(truncated)"),
		      "%s", rc_feeder_error(f));
	rc_feeder_close(f);

	/* a flipped length bit in the second record's header */
	p = make_data("count-header", SPEC, 1, NREC, 0, 0, -1, 0);
	snprintf(file, sizeof file, "%s/part-00000.tfrecord", p);
	FILE *fp = fopen(file, "r+b");
	ck_assert_ptr_nonnull(fp);
	unsigned char hdr[CMN_TFR_HEADER_SIZE];
	ck_assert_uint_eq(fread(hdr, 1, sizeof hdr, fp), sizeof hdr);
	uint64_t len = 0;
	ck_assert_int_eq(cmn_tfr_get_header(hdr, CMN_TFR_DEFAULT_MAX_RECORD, &len), 0);
	long second = (long)(len + CMN_TFR_OVERHEAD);
	fseek(fp, second + 1, SEEK_SET);
	int c = fgetc(fp);
	fseek(fp, second + 1, SEEK_SET);
	fputc(c ^ 0x01, fp);
	fclose(fp);
	f = open_f(p, SPEC, 1, NULL, NULL);
	ck_assert_int_eq(rc_feeder_batches(f, &n), -EBADMSG);
	snprintf(msg, sizeof msg, "record 1 (offset %ld): corrupt framing", second);
	ck_assert_msg(strstr(rc_feeder_error(f), msg), "%s", rc_feeder_error(f));
	rc_feeder_close(f);
}
END_TEST

/* ---- open-time errors: bad schema, no files, bad options ---- */
START_TEST(test_err_open)
{
	char *p = make_data("open", SPEC, 1, 3, 0, 0, -1, 0);
	struct rc_feeder_opts o;
	char err[1024];
	rc_feeder_opts_init(&o);
	o.path = p;
	o.batch_size = 2;
	o.schema = "x:float33[3]";
	err[0] = '\0';
	ck_assert_ptr_null(rc_feeder_open(&o, err, sizeof err));
	ck_assert_msg(strstr(err, "float33"), "bad schema message: %s", err);
	o.schema = "x:float32[2,3]";
	o.path = "/nonexistent/rollcache-feeder";
	ck_assert_ptr_null(rc_feeder_open(&o, err, sizeof err));
	ck_assert_msg(strstr(err, "/nonexistent/rollcache-feeder"), "no-file message: %s", err);
	o.path = p;
	o.batch_size = 0;
	ck_assert_ptr_null(rc_feeder_open(&o, err, sizeof err));
	ck_assert_msg(strstr(err, "batch_size"), "%s", err);
	o.batch_size = 2;
	o.rank = 2;
	o.world_size = 2;
	ck_assert_ptr_null(rc_feeder_open(&o, err, sizeof err));
	ck_assert_msg(strstr(err, "rank"), "%s", err);
	o.rank = 0;
	o.world_size = 1;
	o.format = RC_FORMAT_RAW;
	o.schema = "ids:int64[]";
	ck_assert_ptr_null(rc_feeder_open(&o, err, sizeof err));
	ck_assert_msg(strstr(err, "raw"), "%s", err);
}
END_TEST

/* ---- many threads release batches; consumer keeps taking (ASan/TSan food) ---- */
struct relq {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct rc_batch *q[64];
	size_t n;
	bool done;
	unsigned *seen;
};

static void *releaser(void *arg)
{
	struct relq *q = arg;
	pthread_mutex_lock(&q->mu);
	for (;;) {
		while (!q->n && !q->done)
			pthread_cond_wait(&q->cv, &q->mu);
		if (!q->n && q->done)
			break;
		struct rc_batch *b = q->q[--q->n];
		pthread_mutex_unlock(&q->mu);
		for (size_t r = 0; r < rc_batch_rows(b); r++)
			(void)check_row(b, r);
		rc_batch_release(b);
		pthread_mutex_lock(&q->mu);
	}
	pthread_mutex_unlock(&q->mu);
	return NULL;
}

static void tw_threads(struct rc_feeder_opts *o, void *arg)
{
	o->shuffle = true;
	o->threads = 4;
	o->readers = 3;
	o->ring_slots = 6;
}

START_TEST(test_threads_release)
{
	char *p = make_data("thr", SPEC, NFILES, NREC, 0, 0, -1, 0);
	struct rc_feeder *f = open_f(p, SPEC, 3, tw_threads, NULL);
	struct relq q = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
	pthread_t th[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&th[i], NULL, releaser, &q);
	for (int epoch = 0; epoch < 3; epoch++) {
		unsigned seen[TOTAL] = {0};
		struct rc_batch *b;
		int rc;
		size_t rows = 0;
		while ((rc = rc_feeder_next(f, &b)) == 1) {
			const struct rc_tensor *y = rc_batch_get(b, "y");
			for (size_t r = 0; r < rc_batch_rows(b); r++)
				seen[((const int64_t *)y->data)[r] / 1000]++;
			rows += rc_batch_rows(b);
			pthread_mutex_lock(&q.mu);
			q.q[q.n++] = b;
			pthread_cond_signal(&q.cv);
			pthread_mutex_unlock(&q.mu);
		}
		ck_assert_msg(rc == 0, "next: %d %s", rc, rc_feeder_error(f));
		ck_assert_uint_eq(rows, TOTAL);
		assert_once(seen, TOTAL);
		/* next_epoch while releasers may still hold batches of this epoch */
		ck_assert_int_eq(rc_feeder_next_epoch(f), 0);
	}
	pthread_mutex_lock(&q.mu);
	q.done = true;
	pthread_cond_broadcast(&q.cv);
	pthread_mutex_unlock(&q.mu);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	rc_feeder_close(f);
}
END_TEST

/* ---- next_epoch in the middle of an epoch, and holding every slot ---- */
static void tw_busy(struct rc_feeder_opts *o, void *arg)
{
	tw_shuffle(o, arg);
	o->busy_timeout_ms = 50;
}

START_TEST(test_epoch_abort_and_busy)
{
	char *p = make_data("abort", SPEC, NFILES, NREC, 0, 0, -1, 0);
	struct rc_feeder *f = open_f(p, SPEC, 4, tw_busy, NULL);
	struct rc_batch *held[4];
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(rc_feeder_next(f, &held[i]), 1);
	struct rc_batch *b;
	ck_assert_int_eq(rc_feeder_next(f, &b), -EBUSY); /* 4 slots, all held */
	rc_batch_release(held[0]);
	ck_assert_int_eq(rc_feeder_next(f, &b), 1);
	rc_batch_release(b);
	ck_assert_int_eq(rc_feeder_next_epoch(f), 0); /* abandon epoch 0 */
	for (int i = 1; i < 4; i++)
		rc_batch_release(held[i]);
	unsigned seen[TOTAL] = {0};
	ck_assert_uint_eq(read_epoch(f, seen, TOTAL, NULL, 4, false), TOTAL);
	assert_once(seen, TOTAL);
	rc_feeder_close(f);
}
END_TEST

/*
 * Allocations counted outside the feeder, for the no-allocation test: every
 * malloc, calloc, realloc and aligned allocation of the process (any
 * thread) while `alloc_armed` is set.  A plain build interposes the
 * allocator's entry points and forwards them to glibc's; under ASan the
 * sanitizer's allocator hook counts them.  Check's asserts allocate (a
 * location record per assert), so the counted window holds none.
 */
static atomic_int alloc_armed;
static atomic_ulong alloc_count;

static void alloc_note(void)
{
	if (atomic_load_explicit(&alloc_armed, memory_order_relaxed))
		atomic_fetch_add_explicit(&alloc_count, 1, memory_order_relaxed);
}

#if defined(__SANITIZE_ADDRESS__)
/* from the sanitizer runtime (sanitizer/allocator_interface.h, not always installed) */
int __sanitizer_install_malloc_and_free_hooks(void (*m)(const volatile void *, size_t),
					      void (*f)(const volatile void *));
static void alloc_hook(const volatile void *ptr, size_t size)
{
	alloc_note();
}
static void free_hook(const volatile void *ptr)
{
}
static void alloc_count_install(void)
{
	__sanitizer_install_malloc_and_free_hooks(alloc_hook, free_hook);
}
#else
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

void *malloc(size_t n)
{
	alloc_note();
	return __libc_malloc(n);
}
void *calloc(size_t n, size_t m)
{
	alloc_note();
	return __libc_calloc(n, m);
}
void *realloc(void *p, size_t n)
{
	alloc_note();
	return __libc_realloc(p, n);
}
void *aligned_alloc(size_t a, size_t n)
{
	alloc_note();
	return __libc_memalign(a, n);
}
void *memalign(size_t a, size_t n)
{
	alloc_note();
	return __libc_memalign(a, n);
}
int posix_memalign(void **out, size_t a, size_t n)
{
	alloc_note();
	void *p = __libc_memalign(a, n);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}
static void alloc_count_install(void)
{
}
#endif

/*
 * Reads one epoch with no Check assert inside the counted window: counts
 * each record's g (from y) in seen[]; returns the rows, -1 on an error.
 */
static long read_epoch_counted(struct rc_feeder *f, unsigned *seen, size_t nseen,
			       unsigned long *allocs)
{
	long rows = 0;
	struct rc_batch *b;
	int rc;
	atomic_store(&alloc_count, 0);
	atomic_store(&alloc_armed, 1);
	while ((rc = rc_feeder_next(f, &b)) == 1) {
		const struct rc_tensor *y = rc_batch_get(b, "y");
		for (uint64_t r = 0; y && r < rc_batch_rows(b); r++) {
			uint64_t g = (uint64_t)((const int64_t *)y->data)[r] / 1000;
			if (g < nseen)
				seen[g]++;
			rows++;
		}
		rc_batch_release(b);
	}
	atomic_store(&alloc_armed, 0);
	*allocs = atomic_load(&alloc_count);
	return rc == 0 ? rows : -1;
}

static void tw_one_thread(struct rc_feeder_opts *o, void *arg)
{
	o->shuffle = true;
	o->threads = 1;
	o->readers = 1;
}

/*
 * ---- steady state: no allocation per batch or record ----
 * 4 files x 200 records, batches of 8: 100 batches an epoch.  The only
 * allocations left in a steady-state epoch are those of the next epoch's
 * directory listing (the producer lists a plain directory once an epoch:
 * opendir and one copy of each name), at most two listings in the window.
 * One allocation per batch would count 100.
 */
#define NA_FILES 4
#define NA_TOTAL (NA_FILES * 200)
START_TEST(test_steady_state_no_alloc)
{
	char *p = make_data("alloc", SPEC, NA_FILES, 200, 0, 0, -1, 0);
	struct rc_feeder *f = open_f(p, SPEC, 8, tw_one_thread, NULL);
	unsigned seen[NA_TOTAL];
	struct rc_feeder_stats st1, st2;
	for (int e = 0; e < 3; e++) {
		memset(seen, 0, sizeof seen);
		read_epoch(f, seen, NA_TOTAL, NULL, 8, false);
		rc_feeder_next_epoch(f);
	}
	rc_feeder_stats(f, &st1);
	memset(seen, 0, sizeof seen);
	alloc_count_install();
	unsigned long allocs = 0;
	long rows = read_epoch_counted(f, seen, NA_TOTAL, &allocs);
	ck_assert_msg(rows == NA_TOTAL, "rows %ld: %s", rows, rc_feeder_error(f));
	assert_once(seen, NA_TOTAL);
	rc_feeder_stats(f, &st2);
	ck_assert_uint_gt(st2.records, st1.records); /* stats move; records are counted at decode */
	ck_assert_msg(allocs <= 2 * (NA_FILES + 8),
		      "%lu allocations in a steady-state epoch of 100 batches", allocs);
	ck_assert_uint_eq(st2.allocations, st1.allocations);
	ck_assert_int_eq(st2.device, -1);
	rc_feeder_close(f);
}
END_TEST

static void tw_tiny_ragged(struct rc_feeder_opts *o, void *arg)
{
	o->ragged_hint = 1; /* 8 bytes per slot: every slot must grow */
	o->threads = 1;
	o->readers = 1;
}

/* ---- ragged capacity policy: grows past the hint, values intact, then stops ---- */
START_TEST(test_ragged_growth)
{
	char *p = make_data("ragged", SPEC, NFILES, NREC, 0, 0, -1, 0);
	struct rc_feeder *f = open_f(p, SPEC, 37, tw_tiny_ragged, NULL);
	struct rc_feeder_stats st0, st1, st2;
	rc_feeder_stats(f, &st0);
	unsigned seen[TOTAL] = {0};
	ck_assert_uint_eq(read_epoch(f, seen, TOTAL, NULL, 37, false), TOTAL); /* checks ids/name */
	assert_once(seen, TOTAL);
	rc_feeder_stats(f, &st1);
	ck_assert_uint_gt(st1.allocations, st0.allocations); /* it had to grow */
	/* slots that missed the last raise of the high-water mark catch up once
	 * (epoch 1); from then on nothing grows */
	for (int e = 0; e < 3; e++) {
		if (e == 2)
			rc_feeder_stats(f, &st1);
		ck_assert_int_eq(rc_feeder_next_epoch(f), 0);
		memset(seen, 0, sizeof seen);
		ck_assert_uint_eq(read_epoch(f, seen, TOTAL, NULL, 37, false), TOTAL);
		assert_once(seen, TOTAL);
	}
	rc_feeder_stats(f, &st2);
	ck_assert_uint_eq(st2.allocations, st1.allocations); /* and stopped growing */
	rc_feeder_close(f);
}
END_TEST

/* ---- inside a rollcache mount: next_epoch writes "next" to .rollcache/control ---- */
START_TEST(test_control_advance)
{
	char mnt[4200], cur[4300], ctl[4400];
	snprintf(mnt, sizeof mnt, "%s/mnt", dir);
	snprintf(cur, sizeof cur, "%s/current", mnt);
	ck_assert_int_eq(mkdir(mnt, 0755), 0);
	ck_assert_int_eq(mkdir(cur, 0755), 0);
	snprintf(ctl, sizeof ctl, "%s/.rollcache", mnt);
	ck_assert_int_eq(mkdir(ctl, 0755), 0);
	snprintf(ctl, sizeof ctl, "%s/.rollcache/control", mnt);
	FILE *fp = fopen(ctl, "w");
	ck_assert_ptr_nonnull(fp);
	fclose(fp);
	char err[512] = "";
	ck_assert_int_eq(gen_files(cur, SPEC, 2, 5, 0, 0, -1, 0, err, sizeof err), 0);
	struct rc_feeder *f = open_f(cur, SPEC, 4, NULL, NULL);
	unsigned seen[10] = {0};
	ck_assert_uint_eq(read_epoch(f, seen, 10, NULL, 4, false), 10);
	ck_assert_int_eq(rc_feeder_next_epoch(f), 0);
	char got[16] = "";
	fp = fopen(ctl, "r");
	ck_assert_ptr_nonnull(fp);
	size_t n = fread(got, 1, sizeof got - 1, fp);
	fclose(fp);
	got[n] = '\0';
	ck_assert_str_eq(got, "next");
	/* the directory is listed again: a file added "by the cache" is read */
	ck_assert_int_eq(gen_files(cur, SPEC, 3, 5, 0, 0, -1, 0, err, sizeof err), 0);
	ck_assert_int_eq(rc_feeder_next_epoch(f), 0);
	unsigned seen2[15] = {0};
	ck_assert_uint_eq(read_epoch(f, seen2, 15, NULL, 4, false), 15);
	assert_once(seen2, 15);
	rc_feeder_close(f);
}
END_TEST

/*
 * ---- plain directories: the next epoch is produced before next_epoch is
 * called, and gives the same batches as the unprefetched path (a mount) ----
 */
START_TEST(test_prefetch_epoch)
{
	char *p = make_data("pre", SPEC, NFILES, NREC, 0, 0, -1, 0);
	char plain[4300];
	snprintf(plain, sizeof plain, "%s", p);
	/* the same files inside a fake rollcache mount: no prefetch there */
	char mnt[4200], cur[4300], ctl[4400];
	snprintf(mnt, sizeof mnt, "%s/mnt", dir);
	snprintf(cur, sizeof cur, "%s/current", mnt);
	ck_assert_int_eq(mkdir(mnt, 0755), 0);
	ck_assert_int_eq(mkdir(cur, 0755), 0);
	snprintf(ctl, sizeof ctl, "%s/.rollcache", mnt);
	ck_assert_int_eq(mkdir(ctl, 0755), 0);
	snprintf(ctl, sizeof ctl, "%s/.rollcache/control", mnt);
	FILE *fp = fopen(ctl, "w");
	ck_assert_ptr_nonnull(fp);
	fclose(fp);
	char err[512] = "";
	ck_assert_int_eq(gen_files(cur, SPEC, NFILES, NREC, 0, 0, -1, 0, err, sizeof err), 0);

	uint64_t seed = 5;
	struct rc_feeder *a = open_f(plain, SPEC, 8, tw_shuffle, &seed);
	struct rc_feeder *b = open_f(cur, SPEC, 8, tw_shuffle, &seed);
	uint64_t oa[TOTAL], ob[TOTAL];
	for (int epoch = 0; epoch < 3; epoch++) {
		unsigned sa[TOTAL] = {0}, sb[TOTAL] = {0};
		ck_assert_uint_eq(read_epoch(a, sa, TOTAL, oa, 8, false), TOTAL);
		ck_assert_uint_eq(read_epoch(b, sb, TOTAL, ob, 8, false), TOTAL);
		assert_once(sa, TOTAL);
		assert_once(sb, TOTAL);
		for (size_t i = 0; i < TOTAL; i++)
			ck_assert_uint_eq(oa[i], ob[i]);
		/* a's next epoch gets decoded without being asked for */
		struct rc_feeder_stats st;
		uint64_t want = (uint64_t)(epoch + 1) * TOTAL;
		for (int k = 0; k < 500; k++) {
			rc_feeder_stats(a, &st);
			if (st.records > want)
				break;
			usleep(10000);
		}
		ck_assert_uint_gt(st.records, want);
		rc_feeder_stats(b, &st);
		ck_assert_uint_eq(st.records, want); /* the mount's waits for next_epoch */
		ck_assert_int_eq(rc_feeder_next_epoch(a), 0);
		ck_assert_int_eq(rc_feeder_next_epoch(b), 0);
		ck_assert_uint_eq(rc_feeder_epoch(a), (uint64_t)epoch + 1);
	}
	rc_feeder_close(a);
	rc_feeder_close(b);
}
END_TEST

static void tw_big_ring(struct rc_feeder_opts *o, void *arg)
{
	o->shuffle = true;
	o->ring_slots = 8;
}

/* ---- abandoning an epoch after the producer already moved to the next ---- */
START_TEST(test_abandon_after_prefetch)
{
	char *p = make_data("aband", SPEC, 2, 10, 0, 0, -1, 0); /* 20 records: 3 batches of 8 */
	struct rc_feeder *f = open_f(p, SPEC, 8, tw_big_ring, NULL);
	for (int round = 0; round < 3; round++) {
		struct rc_batch *b;
		ck_assert_int_eq(rc_feeder_next(f, &b), 1);
		struct rc_feeder_stats st;
		for (int k = 0; k < 500; k++) { /* the whole next epoch fits the ring */
			rc_feeder_stats(f, &st);
			if (st.records >= (uint64_t)(2 * round + 2) * 20)
				break;
			usleep(10000);
		}
		ck_assert_uint_ge(st.records, (uint64_t)(2 * round + 2) * 20);
		ck_assert_int_eq(rc_feeder_next_epoch(f), 0); /* leaves 2 batches behind */
		rc_batch_release(b);
		unsigned seen[20] = {0};
		ck_assert_uint_eq(read_epoch(f, seen, 20, NULL, 8, false), 20);
		assert_once(seen, 20);
		ck_assert_int_eq(rc_feeder_next_epoch(f), 0);
	}
	rc_feeder_close(f);
}
END_TEST

/* ---- big records (larger than read_size) and a glob path ---- */
START_TEST(test_big_records_glob)
{
	const char *spec = "x:float32[3000],y:int64";
	char *p = make_data("big", spec, 2, 9, 0, 0, -1, 0);
	char glob_path[4400];
	snprintf(glob_path, sizeof glob_path, "%s/part-*.tfrecord", p);
	struct rc_feeder *f = open_f(glob_path, spec, 2, NULL, NULL); /* read_size 4096 < 12 KB */
	struct rc_batch *b;
	unsigned seen[18] = {0};
	int rc;
	while ((rc = rc_feeder_next(f, &b)) == 1) {
		const struct rc_tensor *x = rc_batch_get(b, "x"), *y = rc_batch_get(b, "y");
		for (size_t r = 0; r < rc_batch_rows(b); r++) {
			uint64_t g = (uint64_t)((const int64_t *)y->data)[r] / 1000;
			ck_assert_uint_lt(g, 18);
			seen[g]++;
			for (int e = 0; e < 3000; e += 97)
				ck_assert_float_eq(((const float *)x->data)[r * 3000 + e],
						   gen_f32(g, 0, e));
		}
		rc_batch_release(b);
	}
	ck_assert_int_eq(rc, 0);
	assert_once(seen, 18);
	rc_feeder_close(f);
}
END_TEST

/* ---- real files written by TensorFlow (../shared/testdata, README values) ---- */
START_TEST(test_real_testdata)
{
	const char *td = getenv("RC_TESTDATA");
	ck_assert_msg(td != NULL, "RC_TESTDATA not set (meson test sets it)");
	char p1[4200], p2[4200];
	snprintf(p1, sizeof p1, "%s/example__pytorch_data__example.tfrecord", td);
	snprintf(p2, sizeof p2,
		 "%s/example_gzip__tfx__penguin_Split-eval_data_tfrecord-00000-of-00001.gz", td);
	const char *spec = "x_int:int64[10],x_float:float32[10],x_byte:bytes";
	struct rc_feeder_opts o;
	char err[1024];
	rc_feeder_opts_init(&o);
	o.path = p1;
	o.schema = spec;
	o.batch_size = 3;
	struct rc_feeder *f = rc_feeder_open(&o, err, sizeof err);
	ck_assert_msg(f != NULL, "%s", err);
	struct rc_batch *b;
	int rc;
	int64_t i = 0;
	while ((rc = rc_feeder_next(f, &b)) == 1) {
		const struct rc_tensor *xi = rc_batch_get(b, "x_int"),
				       *xf = rc_batch_get(b, "x_float"),
				       *xb = rc_batch_get(b, "x_byte");
		for (size_t r = 0; r < rc_batch_rows(b); r++, i++) {
			for (int j = 0; j < 10; j++) {
				ck_assert_int_eq(((const int64_t *)xi->data)[r * 10 + j],
						 10 * (10 * i + j));
				ck_assert_float_eq(((const float *)xf->data)[r * 10 + j],
						   (float)(10 * i + j));
			}
			int64_t a = xb->offsets[r], z = xb->offsets[r + 1];
			ck_assert_int_eq(z - a, 8);
			ck_assert_int_eq(memcmp((const uint8_t *)xb->data + a, "test str", 8), 0);
		}
		rc_batch_release(b);
	}
	ck_assert_msg(rc == 0, "%s", rc_feeder_error(f));
	ck_assert_int_eq(i, 4);
	rc_feeder_close(f);

	o.path = p2; /* GZIP, auto-detected */
	o.schema = "species:int64[1],culmen_length_mm:float32[1],body_mass_g:float32[1]";
	o.batch_size = 32;
	f = rc_feeder_open(&o, err, sizeof err);
	ck_assert_msg(f != NULL, "%s", err);
	size_t n = 0;
	while ((rc = rc_feeder_next(f, &b)) == 1) {
		const struct rc_tensor *sp = rc_batch_get(b, "species"),
				       *bm = rc_batch_get(b, "body_mass_g");
		for (size_t r = 0; r < rc_batch_rows(b); r++, n++) {
			ck_assert_int_ge(((const int64_t *)sp->data)[r], 0);
			ck_assert_int_le(((const int64_t *)sp->data)[r], 2);
			ck_assert_float_gt(((const float *)bm->data)[r], 0.0f);
		}
		rc_batch_release(b);
	}
	ck_assert_msg(rc == 0, "%s", rc_feeder_error(f));
	ck_assert_uint_eq(n, 100);
	rc_feeder_close(f);
}
END_TEST

/* Sets the mount's record-count xattr of m/epochs/<e>/part-<k>.tfrecord to value. */
static void set_records_xattr(const char *m, int e, unsigned k, const char *value)
{
	char p[4400];
	snprintf(p, sizeof p, "%s/epochs/%d/part-%05u.tfrecord", m, e, k);
	ck_assert_msg(setxattr(p, "user.rollcache.records", value, strlen(value), 0) == 0,
		      "setxattr %s: %s", p, strerror(errno));
}

static void tw_world1(struct rc_feeder_opts *o, void *arg)
{
	o->world_size = 1;
	o->drop_last = arg != NULL;
}

/*
 * ---- counts come from the mount's xattr user.rollcache.records, not a read ----
 * The files hold 10 records each; their xattrs say otherwise, and len() and
 * the rank split follow the xattrs: counting read nothing.
 */
START_TEST(test_xattr_counts)
{
	const char *m = fake_mount(0, 30);
	fake_epoch(m, 0, 3, 10);
	for (unsigned k = 0; k < 3; k++)
		set_records_xattr(m, 0, k, "7");
	char cur[4300];
	snprintf(cur, sizeof cur, "%s/current", m);
	struct rc_feeder *f = open_f(cur, SPEC, 4, tw_world1, NULL);
	uint64_t n = 0;
	ck_assert_int_eq(rc_feeder_batches(f, &n), 0);
	ck_assert_uint_eq(n, 6); /* ceil(21 / 4): 3 x 7 from the xattrs, not 3 x 10 */
	rc_feeder_close(f);

	/* two ranks split by the xattrs' counts: rank 1 starts at record 11 = file 1, record 4 */
	struct rank_arg ra = {.rank = 1, .world = 2};
	f = open_f(cur, SPEC, 4, tw_rank, &ra);
	ck_assert_int_eq(rc_feeder_batches(f, &n), 0);
	ck_assert_uint_eq(n, 3); /* ceil(21 / 2) = 11 records */
	unsigned seen[30] = {0};
	ck_assert_uint_eq(read_epoch(f, seen, 30, NULL, 4, false), 11);
	rc_feeder_close(f);

	/* the true counts: the two ranks read every record once */
	for (unsigned k = 0; k < 3; k++)
		set_records_xattr(m, 0, k, "10");
	memset(seen, 0, sizeof seen);
	for (uint32_t r = 0; r < 2; r++) {
		ra.rank = r;
		f = open_f(cur, SPEC, 4, tw_rank, &ra);
		ck_assert_uint_eq(read_epoch(f, seen, 30, NULL, 4, false), 15);
		rc_feeder_close(f);
	}
	assert_once(seen, 30);

	/* a value that is not a count is an error naming the file and the xattr */
	set_records_xattr(m, 0, 2, "12x");
	struct rc_feeder_opts o;
	char err[1024] = "";
	rc_feeder_opts_init(&o);
	o.path = cur;
	o.schema = SPEC;
	o.batch_size = 4;
	o.rank = 0;
	o.world_size = 2;
	ck_assert_ptr_null(rc_feeder_open(&o, err, sizeof err));
	ck_assert_msg(strstr(err, "part-00002.tfrecord") && strstr(err, "user.rollcache.records"),
		      "message: %s", err);
}
END_TEST

static void tw_small_ring(struct rc_feeder_opts *o, void *arg)
{
	o->world_size = 1;
	o->ring_slots = 2;
}

/*
 * ---- a listed file that vanished: the mount retired it (retire = read) ----
 * The last file of the epoch is removed after the feeder listed it and
 * before its lane opens it (the ring of 2 batches of 4 keeps the producer
 * within the first file): the error says what happened and what to do.
 */
START_TEST(test_vanished_file_message)
{
	const char *m = fake_mount(0, 600);
	fake_epoch(m, 0, 3, 200);
	char cur[4300], last[4400];
	snprintf(cur, sizeof cur, "%s/current", m);
	struct rc_feeder *f = open_f(cur, SPEC, 4, tw_small_ring, NULL);
	snprintf(last, sizeof last, "%s/epochs/0/part-00002.tfrecord", m);
	ck_assert_int_eq(unlink(last), 0);
	struct rc_batch *b;
	int rc;
	uint64_t batches = 0;
	while ((rc = rc_feeder_next(f, &b)) == 1) {
		batches++;
		rc_batch_release(b);
	}
	ck_assert_int_eq(rc, -ENOENT);
	ck_assert_uint_eq(batches, 100); /* the first two files */
	const char *msg = rc_feeder_error(f);
	ck_assert_msg(strstr(msg, "part-00002.tfrecord: already read in this epoch (the mount "
				  "retired it; read each file once per epoch, or use retire = "
				  "boundary)"),
		      "message: %s", msg);
	rc_feeder_close(f);
}
END_TEST

/*
 * The suite; with `testdata`, only the case that reads $RC_TESTDATA
 * (test `feeder-testdata`, which fails where those files are missing).
 */
static Suite *feeder_suite(const char *mode)
{
	Suite *s = suite_create(mode[0] ? mode : "feeder");
	struct {
		const char *name;
		const TTest *fn;
		const char *mode; /* "" the plain suite, or the argument that runs it alone */
	} cases[] = {
	    {"in_order", test_in_order, ""},
	    {"shuffle_epochs", test_shuffle_epochs, ""},
	    {"rank_split", test_rank_split, ""},
	    {"rank_split_gzip_raw", test_rank_split_gzip_raw, ""},
	    {"rank_split_tiny", test_rank_split_tiny, ""},
	    {"seek_resume", test_seek_resume, ""},
	    {"resplit", test_resplit, ""},
	    {"truncate", test_truncate, ""},
	    {"env_split", test_env_split, ""},
	    {"mount_epochs", test_mount_epochs, ""},
	    {"mount_wait_data", test_mount_wait_data, ""},
	    {"drop_last", test_drop_last, ""},
	    {"gzip", test_gzip, ""},
	    {"raw", test_raw, ""},
	    {"err_missing_feature", test_err_missing_feature, ""},
	    {"err_wrong_type", test_err_wrong_type, ""},
	    {"err_corrupt", test_err_corrupt, ""},
	    {"count_framing", test_count_framing, ""},
	    {"err_open", test_err_open, ""},
	    {"threads_release", test_threads_release, ""},
	    {"epoch_abort_and_busy", test_epoch_abort_and_busy, ""},
	    {"steady_state_no_alloc", test_steady_state_no_alloc, ""},
	    {"control_advance", test_control_advance, ""},
	    {"big_records_glob", test_big_records_glob, ""},
	    {"real_testdata", test_real_testdata, "testdata"},
	    {"ragged_growth", test_ragged_growth, ""},
	    {"prefetch_epoch", test_prefetch_epoch, ""},
	    {"abandon_after_prefetch", test_abandon_after_prefetch, ""},
	    {"xattr_counts", test_xattr_counts, "xattr"},
	    {"vanished_file_message", test_vanished_file_message, "xattr"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		if (strcmp(cases[i].mode, mode) != 0)
			continue;
		TCase *tc = tcase_create(cases[i].name);
		tcase_add_checked_fixture(tc, setup, teardown);
		tcase_add_test(tc, cases[i].fn);
		suite_add_tcase(s, tc);
	}
	return s;
}

int main(int argc, char **argv)
{
	/*
	 * meson sets MALLOC_PERTURB_, which makes glibc fill every block at
	 * malloc and free: each feeder opened here allocates its ring of batch
	 * slots (tens of MB), and the filling turned this 2.6 s test into 49 s.
	 * The feeder's own reads of its slots are checked under the sanitizers.
	 */
	mallopt(M_PERTURB, 0);
	const char *mode = argc > 1 ? argv[1] : "";
	bool testdata = strcmp(mode, "testdata") == 0;
	if (strcmp(mode, "xattr") == 0) {
		/* the mount's record-count xattr, set on files of /tmp (user xattrs) */
		char probe[] = "/tmp/rc-feeder-xattr-XXXXXX";
		int fd = mkstemp(probe);
		if (fd < 0) {
			perror("mkstemp");
			return EXIT_FAILURE;
		}
		int rc = fsetxattr(fd, "user.rollcache.records", "1", 1, 0);
		int e = errno;
		close(fd);
		unlink(probe);
		if (rc && (e == ENOTSUP || e == EOPNOTSUPP)) {
			printf("SKIP: /tmp does not support user xattrs (setxattr: %s)\n",
			       strerror(e));
			return 77;
		}
	}
	if (testdata) {
		const char *td = getenv("RC_TESTDATA");
		char probe[4096];
		snprintf(probe, sizeof(probe), "%s/README.md", td ? td : "");
		if (!td || access(probe, R_OK) != 0) {
			printf("FAIL: $RC_TESTDATA (%s) has no README.md: the real TFRecord files "
			       "are missing (tests/data/tensorflow holds them)\n",
			       td ? td : "unset");
			return EXIT_FAILURE;
		}
	}
	SRunner *sr = srunner_create(feeder_suite(mode));
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
