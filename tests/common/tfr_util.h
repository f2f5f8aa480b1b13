/*
 * tfr_util.h - helpers shared by the TFRecord test programs: run a stream
 * through each front end (buffer reader, fd reader, push decoder) and collect
 * what comes out, so tests can compare the three and check each error class.
 */
#ifndef RC_TESTS_TFR_UTIL_H
#define RC_TESTS_TFR_UTIL_H

#include "common/tfrecord.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define RES_MAX 4096

struct tfr_result {
	size_t n;
	uint64_t off[RES_MAX];
	size_t len[RES_MAX];
	uint64_t hash[RES_MAX]; /* FNV-1a of the payload, independent of CRC code */
	int end_rc;		/* 0 clean end, else the error that stopped the stream */
	int n_badmsg;		/* -EBADMSG returns seen (pull readers) */
	uint64_t records, bad;	/* the front end's own counters */
	char msg[512];		/* message of end_rc, or of the first -EBADMSG */
};

static inline uint64_t fnv1a(const uint8_t *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	while (n--)
		h = (h ^ *p++) * 0x100000001b3ull;
	return h;
}

static inline void res_add(struct tfr_result *r, const struct cmn_tfr_record *rec)
{
	ck_assert_uint_lt(r->n, RES_MAX);
	r->off[r->n] = rec->offset;
	r->len[r->n] = rec->len;
	r->hash[r->n] = fnv1a(rec->data, rec->len);
	r->n++;
}

static inline void collect_reader(struct cmn_tfr_reader *rd, struct tfr_result *res)
{
	struct cmn_tfr_record rec;
	int rc;

	for (;;) {
		rc = cmn_tfr_next(rd, &rec);
		if (rc == 1) {
			res_add(res, &rec);
			continue;
		}
		if (rc == -EBADMSG) {
			if (res->n_badmsg++ == 0)
				snprintf(res->msg, sizeof(res->msg), "%s",
					 cmn_tfr_reader_error(rd));
			continue;
		}
		res->end_rc = rc;
		if (rc)
			snprintf(res->msg, sizeof(res->msg), "%s", cmn_tfr_reader_error(rd));
		/* errors are sticky: a second call says the same */
		if (rc)
			ck_assert_int_eq(cmn_tfr_next(rd, &rec), rc);
		break;
	}
	res->records = cmn_tfr_reader_records(rd);
	res->bad = cmn_tfr_reader_bad_records(rd);
}

static inline void collect_buf(const void *data, size_t len, const struct cmn_tfr_opts *o,
			       struct tfr_result *res)
{
	struct cmn_tfr_reader *rd = NULL;
	char err[256];

	memset(res, 0, sizeof(*res));
	ck_assert_int_eq(cmn_tfr_reader_open_buf(&rd, data, len, o, err, sizeof(err)), 0);
	collect_reader(rd, res);
	cmn_tfr_reader_free(rd);
}

static inline int memfd_with(const void *data, size_t len)
{
	int fd = memfd_create("tfr-test", MFD_CLOEXEC);
	const uint8_t *p = data;

	ck_assert_int_ge(fd, 0);
	while (len) {
		ssize_t n = write(fd, p, len);
		ck_assert_int_gt(n, 0);
		p += n;
		len -= (size_t)n;
	}
	ck_assert_int_eq(lseek(fd, 0, SEEK_SET), 0);
	return fd;
}

static inline void collect_fd(const void *data, size_t len, const struct cmn_tfr_opts *o,
			      struct tfr_result *res)
{
	struct cmn_tfr_reader *rd = NULL;
	char err[256];
	int fd = memfd_with(data, len);

	memset(res, 0, sizeof(*res));
	ck_assert_int_eq(cmn_tfr_reader_open_fd(&rd, fd, o, err, sizeof(err)), 0);
	collect_reader(rd, res);
	cmn_tfr_reader_free(rd);
	close(fd);
}

static inline int push_cb(const struct cmn_tfr_record *rec, void *ctx)
{
	res_add(ctx, rec);
	return 0;
}

static uint64_t chunk_rng = 88172645463325252ull;

/* chunk == 0: random chunk sizes from 1 to 3000; else fixed size. */
static inline void collect_push(const void *data, size_t len, const struct cmn_tfr_opts *o,
				size_t chunk, struct tfr_result *res)
{
	struct cmn_tfr_push *p = NULL;
	const uint8_t *d = data;
	char err[256];
	int rc = 0;

	memset(res, 0, sizeof(*res));
	ck_assert_int_eq(cmn_tfr_push_new(&p, o, push_cb, res, err, sizeof(err)), 0);
	while (len > 0) {
		size_t k = chunk;
		if (!k) {
			chunk_rng ^= chunk_rng << 13;
			chunk_rng ^= chunk_rng >> 7;
			chunk_rng ^= chunk_rng << 17;
			k = 1 + chunk_rng % 3000;
		}
		if (k > len)
			k = len;
		rc = cmn_tfr_push_feed(p, d, k);
		if (rc)
			break;
		d += k;
		len -= k;
	}
	if (rc == 0)
		rc = cmn_tfr_push_finish(p);
	res->end_rc = rc;
	if (rc)
		snprintf(res->msg, sizeof(res->msg), "%s", cmn_tfr_push_error(p));
	res->records = cmn_tfr_push_records(p);
	res->bad = cmn_tfr_push_bad_records(p);
	cmn_tfr_push_free(p);
}

static inline void assert_same(const struct tfr_result *a, const struct tfr_result *b,
			       const char *what)
{
	ck_assert_msg(a->n == b->n, "%s: %zu records vs %zu", what, a->n, b->n);
	for (size_t i = 0; i < a->n; i++) {
		ck_assert_msg(a->off[i] == b->off[i], "%s: record %zu offset", what, i);
		ck_assert_msg(a->len[i] == b->len[i], "%s: record %zu length", what, i);
		ck_assert_msg(a->hash[i] == b->hash[i], "%s: record %zu payload", what, i);
	}
	ck_assert_msg(a->end_rc == b->end_rc, "%s: end %d vs %d", what, a->end_rc, b->end_rc);
	ck_assert_msg(a->bad == b->bad, "%s: bad %llu vs %llu", what, (unsigned long long)a->bad,
		      (unsigned long long)b->bad);
}

#endif
