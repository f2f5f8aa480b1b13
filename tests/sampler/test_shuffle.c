/*
 * test_shuffle.c - the shuffle buffer (sampler/shuffle.c): every record
 * leaves once, a sink error keeps the record, and blocks a sink keeps
 * (SMP_REC_KEPT, as the shard writer's write-behind does) come back from
 * another thread into the reuse pool.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "sampler/shuffle.h"

enum { N = 400, LEN = 40000 };

struct kept {
	void *block;
	size_t cap;
};

struct sink_state {
	int seen[N];	   /* times record i left */
	struct kept *kept; /* blocks taken, to give back */
	size_t nkept;
	int fail_next; /* answer -EIO once */
};

static int sink(const struct smp_rec *r, void *ctx)
{
	struct sink_state *st = ctx;
	if (st->fail_next) {
		st->fail_next = 0;
		return -EIO;
	}
	ck_assert_uint_eq(r->len, LEN);
	ck_assert_ptr_nonnull(r->block);
	ck_assert((const uint8_t *)r->data >= (const uint8_t *)r->block &&
		  (const uint8_t *)r->data + r->len <= (const uint8_t *)r->block + r->block_cap);
	int i = (int)r->object_id;
	for (size_t j = 0; j < r->len; j += 997)
		ck_assert_uint_eq(r->data[j], (uint8_t)(i + j));
	st->seen[i]++;
	if (i % 2)
		return 0;
	st->kept[st->nkept++] = (struct kept){r->block, r->block_cap};
	return SMP_REC_KEPT;
}

struct giver {
	struct smp_shuffle *b;
	struct kept *v;
	size_t n;
};

static void *give_all(void *arg)
{
	struct giver *g = arg;
	for (size_t i = 0; i < g->n; i++)
		smp_shuffle_give_back(g->b, g->v[i].block, g->v[i].cap);
	return NULL;
}

START_TEST(kept_blocks_come_back)
{
	static struct sink_state st;
	st.kept = calloc(N, sizeof(*st.kept));
	struct smp_shuffle *b;
	ck_assert_int_eq(smp_shuffle_new(&b, 16 * LEN, 7), 0);
	uint8_t *rec = malloc(LEN);
	size_t given = 0;
	for (int i = 0; i < N; i++) {
		for (size_t j = 0; j < LEN; j++)
			rec[j] = (uint8_t)(i + j);
		struct smp_rec r = {.data = rec, .len = LEN, .object_id = i};
		if (i == 100)
			st.fail_next = 1; /* the record it would shed stays in */
		ck_assert_int_eq(smp_shuffle_add(b, &r, sink, &st), i == 100 ? -EIO : 0);
		if (i == 100)
			ck_assert_int_eq(smp_shuffle_shed(b, sink, &st), 0);
		if (i % 50 == 49) { /* the writer's thread gives back what it took so far */
			struct giver g = {b, st.kept + given, st.nkept - given};
			pthread_t t;
			ck_assert_int_eq(pthread_create(&t, NULL, give_all, &g), 0);
			pthread_join(t, NULL);
			given = st.nkept;
			/* back in the pool: a block of the size is there again */
			size_t cap;
			void *p = smp_shuffle_spare(b, LEN, &cap);
			ck_assert_ptr_nonnull(p);
			ck_assert_uint_ge(cap, LEN);
			smp_shuffle_unspare(b, p, cap);
		}
	}
	ck_assert_int_eq(smp_shuffle_drain(b, sink, &st), 0);
	ck_assert_uint_eq(smp_shuffle_count(b), 0);
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(st.seen[i], 1);
	ck_assert_uint_eq(st.nkept, N / 2);
	struct giver g = {b, st.kept + given, st.nkept - given};
	give_all(&g);
	smp_shuffle_free(b); /* asserts that every kept block came back */
	free(rec);
	free(st.kept);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sampler-shuffle");
	TCase *tc = tcase_create("shuffle");
	tcase_add_test(tc, kept_blocks_come_back);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
