/*
 * test_verify.c - cachefs/verify.c: record checks after admission.
 *
 * Inputs: two files framed here (three short records, and 40 records of
 * 0-600 random bytes, empty ones included) and the uncompressed TFRecord
 * files TensorFlow wrote ($RC_TESTDATA: ../shared/testdata, or its copy in
 * tests/data/tensorflow; the test fails without them); their records found
 * by this test's own framing parse (for the real files the oracle is
 * TensorFlow's stored CRCs).
 * Behaviours, one TCase each:
 *   all_pass       every record of every input passes, against the
 *                  catalog's rows and on the read path;
 *   every_flip     every single-bit flip anywhere in the inputs (every bit
 *                  of a byte below 1 KiB of file, one bit of each byte
 *                  above) is found, at the record that holds it, by the
 *                  catalog check; the read path checks the whole file at
 *                  its first read and answers EIO to every range, and
 *                  queues the file once (verify.c V1, V2, V4);
 *   catalog        (TensorFlow's three-record file) a record rewritten with
 *                  valid framing but other bytes passes its own CRC, fails
 *                  against the catalog's rows, and fails the read path's
 *                  first read when the snapshot has the records' digest;
 *                  records must tile the file; a truncated file fails;
 *   threads        4 threads reading random ranges of a 2000-record file
 *                  check it once, all of it, and all pass;
 *   raw_object     a raw object is checked whole (CRC-32C against the
 *                  catalog's) at its first read: a flipped byte anywhere
 *                  makes every read EIO and queues the file once.
 */
#include "tests/cachefs/cfs_test.h"

#include "cachefs/epoch.h"
#include "cachefs/verify.h"
#include "common/log.h"
#include "common/tfrecord.h"

#include <pthread.h>
#include <stdatomic.h>

static const char *testdata;

/* The log lines of the read path, counted instead of printed. */
static int corrupt_lines;

static void count_sink(enum cmn_log_level level, const char *line, void *ctx)
{
	(void)ctx;
	if (level == CMN_LOG_ERROR && strstr(line, ": corrupt: ") != NULL)
		corrupt_lines++;
}

static const char *const real_files[] = {
    "example__pytorch_data__example.tfrecord",
    "seqex__pytorch_data__sequence_example.tfrecord",
    "raw__magenta__tfrecord_iterator_test.tfrecord",
};

/* The files every case runs on (see the header). */
struct input {
	char name[96];
	uint8_t *d;
	size_t len;
};
static struct input inputs[8];
static size_t n_inputs;

/* Frames n records (TFRecord: length, its CRC, payload, its CRC). */
static uint8_t *frame(const uint8_t *const *recs, const size_t *lens, size_t n, size_t *len)
{
	size_t total = 0;
	for (size_t i = 0; i < n; i++)
		total += lens[i] + 16;
	uint8_t *d = malloc(total ? total : 1), *p = d;
	for (size_t i = 0; i < n; i++) {
		cmn_tfr_put_header(p, lens[i]);
		memcpy(p + 12, recs[i], lens[i]);
		cmn_tfr_put_footer(p + 12 + lens[i], cmn_crc32c(0, p + 12, lens[i]));
		p += lens[i] + 16;
	}
	*len = total;
	return d;
}

/* "hello world", "12345", "success": the records of TensorFlow's test file. */
static uint8_t *three_records(size_t *len)
{
	static const char *const r[] = {"hello world", "12345", "success"};
	const uint8_t *recs[3];
	size_t lens[3];
	for (int i = 0; i < 3; i++) {
		recs[i] = (const uint8_t *)r[i];
		lens[i] = strlen(r[i]);
	}
	return frame(recs, lens, 3, len);
}

static void add_input(const char *name, uint8_t *d, size_t len)
{
	if (n_inputs == sizeof(inputs) / sizeof(inputs[0]))
		abort();
	snprintf(inputs[n_inputs].name, sizeof(inputs[n_inputs].name), "%s", name);
	inputs[n_inputs].d = d;
	inputs[n_inputs].len = len;
	n_inputs++;
}

/* The whole file (called outside the tests too: no Check asserts). */
static uint8_t *slurp(const char *path, size_t *len)
{
	struct stat st;
	int fd = open(path, O_RDONLY);
	uint8_t *buf = NULL;
	if (fd < 0 || fstat(fd, &st) != 0 || !(buf = malloc((size_t)st.st_size + 1)) ||
	    read(fd, buf, (size_t)st.st_size) != st.st_size) {
		fprintf(stderr, "%s: cannot read: %s\n", path, strerror(errno));
		exit(1);
	}
	close(fd);
	*len = (size_t)st.st_size;
	return buf;
}

static uint64_t le64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The catalog rows of a good file, by this test's own parse. */
static size_t parse(const uint8_t *d, size_t len, struct cfs_sample *out, size_t max)
{
	size_t n = 0, off = 0;
	while (off < len) {
		ck_assert_msg(off + 16 <= len && n < max, "parse: header at %zu", off);
		uint64_t l = le64(d + off);
		ck_assert_msg(off + 16 + l <= len, "parse: record at %zu", off);
		out[n] = (struct cfs_sample){
		    .offset = off, .length = l, .crc = cmn_crc32c_unmask(le32(d + off + 12 + l))};
		n++;
		off += 16 + l;
	}
	return n;
}

static int write_tmp(const char *dir, const char *name, const uint8_t *d, size_t len)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	ck_assert_msg(fd >= 0, "%s: %s", path, strerror(errno));
	ck_assert_int_eq(pwrite(fd, d, len, 0), (ssize_t)len);
	return fd;
}

static int vcheck_all(int fd, uint64_t size, const struct cfs_sample *s, size_t n, uint64_t budget,
		      struct cfs_vcheck *v)
{
	static uint8_t buf[64 << 10];
	int rc;
	cfs_vcheck_init(v, fd, size, s, n);
	while ((rc = cfs_vcheck_step(v, budget, buf, sizeof(buf))) == 1)
		;
	return rc;
}

static struct cfs_efile *efile_new(int64_t id, uint64_t bytes)
{
	struct cfs_efile *f = calloc(1, sizeof(*f));
	ck_assert_ptr_nonnull(f);
	f->node_type = CFS_NODE_FILE;
	f->id = id;
	f->kind = CFS_KIND_TFRECORD;
	f->bytes = bytes;
	return f;
}

START_TEST(test_all_pass)
{
	char dir[256];
	cfs_test_mkscratch(dir, sizeof(dir));
	for (size_t k = 0; k < n_inputs; k++) {
		size_t len = inputs[k].len;
		struct cfs_sample s[256];
		const uint8_t *d = inputs[k].d;
		size_t n = parse(d, len, s, 256);
		ck_assert_uint_ge(n, 3);
		int fd = write_tmp(dir, "f", d, len);
		struct cfs_vcheck v;
		/* budget 1: one record per step, as the scrubber's pacing may do */
		int rc = vcheck_all(fd, len, s, n, 1, &v);
		ck_assert_msg(rc == 0, "%s: %d %s", inputs[k].name, rc, v.why);
		ck_assert_uint_eq(v.i, n);
		ck_assert_uint_ge(v.bytes_read, len);

		struct cfs_verifier *ver;
		ck_assert_int_eq(cfs_verifier_new(&ver, NULL, 0), 0);
		struct cfs_efile *f = efile_new(7, len);
		ck_assert(!cfs_verify_done(f));
		for (uint64_t off = 0; off < len; off += 5)
			ck_assert_int_eq(cfs_verify_read(ver, f, fd, off, 5), 0);
		ck_assert_uint_eq(atomic_load(&f->v_ok), len);
		ck_assert(cfs_verify_done(f));
		struct cfs_verifier_stat st;
		cfs_verifier_stat(ver, &st);
		ck_assert_uint_eq(st.files, 1);
		ck_assert_uint_eq(st.corrupt, 0);
		free(f);
		cfs_verifier_free(ver);
		close(fd);
	}
	cfs_test_rmrf(dir);
}
END_TEST

START_TEST(test_every_flip)
{
	char dir[256];
	cfs_test_mkscratch(dir, sizeof(dir));
	for (size_t k = 0; k < n_inputs; k++) {
		size_t len = inputs[k].len;
		struct cfs_sample s[256];
		const uint8_t *d = inputs[k].d;
		size_t n = parse(d, len, s, 256);
		int fd = write_tmp(dir, "f", d, len);
		size_t flips = 0;
		for (size_t pos = 0; pos < len; pos++) {
			size_t r = 0; /* the record holding pos */
			while (r + 1 < n && s[r + 1].offset <= pos)
				r++;
			/* every bit of files under 1 KiB; one bit a byte (rotating) above */
			int b0 = len < 1024 ? 0 : (int)(pos % 8), b1 = len < 1024 ? 8 : b0 + 1;
			for (int bit = b0; bit < b1; bit++) {
				uint8_t b = d[pos] ^ (uint8_t)(1u << bit);
				ck_assert_int_eq(pwrite(fd, &b, 1, (off_t)pos), 1);
				struct cfs_vcheck v;
				int rc = vcheck_all(fd, len, s, n, UINT64_MAX, &v);
				ck_assert_msg(rc == -EBADMSG && v.bad_off == s[r].offset,
					      "%s: flip of bit %d at %zu: rc %d, bad_off %llu, "
					      "expected -EBADMSG at %llu",
					      inputs[k].name, bit, pos, rc,
					      (unsigned long long)v.bad_off,
					      (unsigned long long)s[r].offset);

				struct cfs_verifier *ver;
				ck_assert_int_eq(cfs_verifier_new(&ver, NULL, 0), 0);
				struct cfs_efile *f = efile_new(9, len);
				/* the first read checks the whole file: even a range
				 * before the flipped record gets nothing (V2) */
				rc = cfs_verify_read(ver, f, fd, 0, s[r].offset ? s[r].offset : 1);
				ck_assert_msg(rc == -EIO, "%s: first read, flip at %zu: %d",
					      inputs[k].name, pos, rc);
				ck_assert_uint_eq(atomic_load(&f->v_ok), 0); /* V2 */
				ck_assert_uint_eq(atomic_load(&f->v_bad1), s[r].offset + 1);
				ck_assert(cfs_verify_corrupt(f) && !cfs_verify_done(f));
				/* any later range reaching it: EIO; the file is queued once */
				ck_assert_int_eq(cfs_verify_read(ver, f, fd, 0, len), -EIO);
				int64_t ids[4];
				ck_assert_uint_eq(cfs_verifier_take(ver, ids, 4), 1);
				ck_assert_int_eq(ids[0], 9);
				ck_assert_uint_eq(cfs_verifier_take(ver, ids, 4), 0);
				ck_assert_int_eq(corrupt_lines, 1); /* one line per corrupt file */
				corrupt_lines = 0;
				free(f);
				cfs_verifier_free(ver);
				flips++;
			}
			ck_assert_int_eq(pwrite(fd, &d[pos], 1, (off_t)pos), 1);
		}
		ck_assert_uint_eq(flips, len < 1024 ? 8 * len : len);
		close(fd);
	}
	cfs_test_rmrf(dir);
}
END_TEST

START_TEST(test_catalog)
{
	char dir[256], path[4096];
	size_t len;
	struct cfs_sample s[16];
	cfs_test_mkscratch(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/raw__magenta__tfrecord_iterator_test.tfrecord", testdata);
	uint8_t *d = slurp(path, &len);
	size_t n = parse(d, len, s, 16);
	ck_assert_uint_eq(n, 3); /* "hello world", "12345", "success" */

	/* record 1 rewritten with valid framing: "54321" and its own CRC */
	uint8_t *e = malloc(len);
	memcpy(e, d, len);
	memcpy(e + s[1].offset + 12, "54321", 5);
	cmn_tfr_put_footer(e + s[1].offset + 12 + 5, cmn_crc32c(0, "54321", 5));
	int fd = write_tmp(dir, "f", e, len);
	struct cfs_vcheck v;
	ck_assert_int_eq(vcheck_all(fd, len, s, n, UINT64_MAX, &v), -EBADMSG);
	ck_assert_uint_eq(v.bad_off, s[1].offset);
	ck_assert_msg(strstr(v.why, "the catalog says") != NULL, "%s", v.why);
	struct cfs_verifier *ver;
	ck_assert_int_eq(cfs_verifier_new(&ver, NULL, 0), 0);
	struct cfs_efile *f = efile_new(3, len);
	ck_assert_int_eq(cfs_verify_read(ver, f, fd, 0, len), 0); /* framing alone: passes */
	free(f);
	/* with the catalog's digest of the records' CRCs (the snapshot has it) the
	 * first read finds it before serving a byte, even of record 0 */
	uint32_t digest = 0;
	for (size_t i = 0; i < n; i++)
		digest = cfs_digest_add(digest, s[i].crc);
	f = efile_new(5, len);
	f->crc = digest;
	f->has_crc = true;
	ck_assert_int_eq(cfs_verify_read(ver, f, fd, 0, 1), -EIO);
	ck_assert(cfs_verify_corrupt(f) && atomic_load(&f->v_ok) == 0);
	int64_t ids[2];
	ck_assert_uint_eq(cfs_verifier_take(ver, ids, 2), 1);
	ck_assert_int_eq(ids[0], 5);
	free(f);
	close(fd);
	fd = write_tmp(dir, "h", d, len); /* the file as written: its digest passes */
	f = efile_new(6, len);
	f->crc = digest;
	f->has_crc = true;
	ck_assert_int_eq(cfs_verify_read(ver, f, fd, 0, 1), 0);
	ck_assert(cfs_verify_done(f));
	free(f);
	close(fd);

	/* the catalog's rows must tile the file: a row left out is bytes of no record */
	fd = write_tmp(dir, "g", d, len);
	struct cfs_sample gap[2] = {s[0], s[2]};
	ck_assert_int_eq(vcheck_all(fd, len, gap, 2, UINT64_MAX, &v), -EBADMSG);
	ck_assert_uint_eq(v.bad_off, s[1].offset);
	ck_assert_int_eq(vcheck_all(fd, len, s, 2, UINT64_MAX, &v), -EBADMSG); /* tail */
	ck_assert_uint_eq(v.bad_off, s[2].offset);

	/* truncated by 1 byte (the catalog's size stays): the last record fails */
	ck_assert_int_eq(ftruncate(fd, (off_t)len - 1), 0);
	ck_assert_int_eq(vcheck_all(fd, len, s, n, UINT64_MAX, &v), -EBADMSG);
	ck_assert_uint_eq(v.bad_off, s[2].offset);
	f = efile_new(4, len);
	ck_assert_int_eq(cfs_verify_read(ver, f, fd, 0, s[2].offset), -EIO); /* whole file first */
	ck_assert_int_eq(cfs_verify_read(ver, f, fd, s[2].offset, 1), -EIO);
	free(f);
	cfs_verifier_free(ver);
	close(fd);
	free(d);
	free(e);
	cfs_test_rmrf(dir);
}
END_TEST

/*
 * A record larger than the checker's buffer (64 KiB here): its CRC is taken
 * in pieces; a flipped bit in its payload or footer, a flipped length bit
 * and a length past the end are each named at that record.
 */
START_TEST(test_big_record)
{
	char dir[256];
	size_t len, lens[3] = {100, 150000, 50};
	uint8_t *recs[3];
	for (int i = 0; i < 3; i++) {
		recs[i] = malloc(lens[i]);
		for (size_t j = 0; j < lens[i]; j++)
			recs[i][j] = (uint8_t)(j * 7 + (size_t)i);
	}
	uint8_t *d = frame((const uint8_t *const *)recs, lens, 3, &len);
	struct cfs_sample s[3];
	ck_assert_uint_eq(parse(d, len, s, 3), 3);
	cfs_test_mkscratch(dir, sizeof(dir));
	int fd = write_tmp(dir, "f", d, len);
	struct cfs_vcheck v;
	ck_assert_msg(vcheck_all(fd, len, s, 3, UINT64_MAX, &v) == 0, "%s", v.why);
	ck_assert_uint_eq(v.bytes_read, len); /* every byte read once */

	static const struct {
		size_t at; /* byte flipped, from record 1's header */
		const char *why;
	} flips[] = {
	    {12 + 70000, "payload crc 0x"},
	    {12 + 150000 + 1, "payload crc 0x"},
	    {2, "length crc mismatch"},
	};
	for (size_t k = 0; k < sizeof(flips) / sizeof(flips[0]); k++) {
		uint8_t b = d[s[1].offset + flips[k].at] ^ 0x10;
		ck_assert_int_eq(pwrite(fd, &b, 1, (off_t)(s[1].offset + flips[k].at)), 1);
		ck_assert_int_eq(vcheck_all(fd, len, s, 3, UINT64_MAX, &v), -EBADMSG);
		ck_assert_uint_eq(v.bad_off, s[1].offset);
		ck_assert_msg(strstr(v.why, flips[k].why), "flip %zu: %s", k, v.why);
		ck_assert_int_eq(pwrite(fd, &d[s[1].offset + flips[k].at], 1,
					(off_t)(s[1].offset + flips[k].at)),
				 1);
	}
	/* a valid header whose length runs past the end of the file */
	uint8_t hdr[CMN_TFR_HEADER_SIZE];
	cmn_tfr_put_header(hdr, 1ull << 40);
	ck_assert_int_eq(pwrite(fd, hdr, sizeof(hdr), (off_t)s[1].offset), (ssize_t)sizeof(hdr));
	ck_assert_int_eq(vcheck_all(fd, len, s, 3, UINT64_MAX, &v), -EBADMSG);
	ck_assert_uint_eq(v.bad_off, s[1].offset);
	ck_assert_msg(strstr(v.why, "runs past the end"), "%s", v.why);
	close(fd);
	for (int i = 0; i < 3; i++)
		free(recs[i]);
	free(d);
	cfs_test_rmrf(dir);
}
END_TEST

/* ---- threads -------------------------------------------------------------- */

struct reader_arg {
	struct cfs_verifier *ver;
	struct cfs_efile *f;
	int fd;
	unsigned seed;
	int bad;
};

/*
 * A raw object: its first read checks the CRC-32C of the whole file against
 * crc before any byte (v_ok 0 -> size at once); a flipped byte anywhere
 * answers EIO for every read, queues the file once; cfs_verify_raw_fd says
 * the same offline.
 */
START_TEST(test_raw_object)
{
	char dir[256];
	cfs_test_mkscratch(dir, sizeof(dir));
	size_t len = 300000; /* more than one read buffer */
	uint8_t *d = malloc(len);
	unsigned seed = 3;
	for (size_t i = 0; i < len; i++)
		d[i] = (uint8_t)rand_r(&seed);
	uint32_t crc = cmn_crc32c(0, d, len);
	int fd = write_tmp(dir, "raw", d, len);
	uint8_t buf[4096];
	char why[256];
	uint64_t got = 0;
	ck_assert_int_eq(cfs_verify_raw_fd(fd, len, crc, buf, sizeof(buf), &got, why, sizeof(why)),
			 0);
	ck_assert_uint_eq(got, len);

	struct cfs_verifier *ver;
	ck_assert_int_eq(cfs_verifier_new(&ver, NULL, 0), 0);
	struct cfs_efile *f = efile_new(21, len);
	f->kind = CFS_KIND_RAW;
	f->crc = crc;
	f->has_crc = true;
	ck_assert(!cfs_verify_done(f));
	ck_assert_int_eq(cfs_verify_read(ver, f, fd, 100, 10), 0); /* checks it all */
	ck_assert_uint_eq(atomic_load(&f->v_ok), len);
	ck_assert(cfs_verify_done(f));
	free(f);

	for (size_t pos = 0; pos < len; pos += len / 7) {
		uint8_t b = d[pos] ^ 0x10;
		ck_assert_int_eq(pwrite(fd, &b, 1, (off_t)pos), 1);
		got = 0;
		ck_assert_int_eq(
		    cfs_verify_raw_fd(fd, len, crc, buf, sizeof(buf), &got, why, sizeof(why)),
		    -EBADMSG);
		f = efile_new(22, len);
		f->kind = CFS_KIND_RAW;
		f->crc = crc;
		/* a read far from the flip fails too: the object is checked whole */
		uint64_t at = pos < len / 2 ? len - 10 : 0;
		ck_assert_int_eq(cfs_verify_read(ver, f, fd, at, 10), -EIO);
		ck_assert(cfs_verify_corrupt(f) && !cfs_verify_done(f));
		ck_assert_int_eq(cfs_verify_read(ver, f, fd, 0, len), -EIO);
		int64_t ids[4];
		ck_assert_uint_eq(cfs_verifier_take(ver, ids, 4), 1);
		ck_assert_int_eq(ids[0], 22);
		ck_assert_int_eq(corrupt_lines, 1);
		corrupt_lines = 0;
		free(f);
		ck_assert_int_eq(pwrite(fd, &d[pos], 1, (off_t)pos), 1);
	}
	/* a file shorter than its row */
	ck_assert_int_eq(ftruncate(fd, (off_t)len - 1), 0);
	got = 0;
	ck_assert_int_eq(cfs_verify_raw_fd(fd, len, crc, buf, sizeof(buf), &got, why, sizeof(why)),
			 -EBADMSG);
	cfs_verifier_free(ver);
	close(fd);
	free(d);
	cfs_test_rmrf(dir);
}
END_TEST

static void *reader(void *p)
{
	struct reader_arg *a = p;
	for (int i = 0; i < 2000; i++) {
		uint64_t off = (uint64_t)rand_r(&a->seed) % a->f->bytes;
		uint64_t len = 1 + (uint64_t)rand_r(&a->seed) % 131072;
		if (cfs_verify_read(a->ver, a->f, a->fd, off, len) != 0)
			a->bad++;
	}
	return NULL;
}

START_TEST(test_threads)
{
	char dir[256];
	cfs_test_mkscratch(dir, sizeof(dir));
	size_t cap = 8u << 20, len = 0;
	uint8_t *d = malloc(cap);
	unsigned seed = 42;
	for (int i = 0; i < 2000; i++) {
		size_t l = (size_t)rand_r(&seed) % 3000;
		ck_assert_uint_le(len + l + 16, cap);
		cmn_tfr_put_header(d + len, l);
		for (size_t j = 0; j < l; j++)
			d[len + 12 + j] = (uint8_t)rand_r(&seed);
		cmn_tfr_put_footer(d + len + 12 + l, cmn_crc32c(0, d + len + 12, l));
		len += l + 16;
	}
	int fd = write_tmp(dir, "big", d, len);
	struct cfs_verifier *ver;
	ck_assert_int_eq(cfs_verifier_new(&ver, NULL, 0), 0);
	struct cfs_efile *f = efile_new(11, len);
	pthread_t th[4];
	struct reader_arg args[4];
	for (int i = 0; i < 4; i++) {
		args[i] =
		    (struct reader_arg){.ver = ver, .f = f, .fd = fd, .seed = (unsigned)i + 1};
		ck_assert_int_eq(pthread_create(&th[i], NULL, reader, &args[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(args[i].bad, 0);
	}
	ck_assert_int_eq(cfs_verify_read(ver, f, fd, 0, len), 0);
	ck_assert_uint_eq(atomic_load(&f->v_ok), len);
	struct cfs_verifier_stat st;
	cfs_verifier_stat(ver, &st);
	ck_assert_uint_eq(st.files, 1); /* checked to the end once */
	ck_assert_uint_ge(st.bytes, len);
	free(f);
	cfs_verifier_free(ver);
	close(fd);
	free(d);
	cfs_test_rmrf(dir);
}
END_TEST

int main(void)
{
	testdata = getenv("RC_TESTDATA");
	struct stat st;
	size_t len;
	uint8_t *three = three_records(&len);
	add_input("framed here: three short records", three, len);
	{
		uint8_t *recs[40];
		size_t lens[40];
		unsigned seed = 7;
		for (int i = 0; i < 40; i++) {
			lens[i] = i % 9 == 0 ? 0 : (size_t)rand_r(&seed) % 601;
			recs[i] = malloc(lens[i] ? lens[i] : 1);
			for (size_t j = 0; j < lens[i]; j++)
				recs[i][j] = (uint8_t)rand_r(&seed);
		}
		uint8_t *forty = frame((const uint8_t *const *)recs, lens, 40, &len);
		add_input("framed here: 40 records of 0-600 random bytes", forty, len);
		for (int i = 0; i < 40; i++)
			free(recs[i]);
	}
	if (testdata && stat(testdata, &st) == 0 && S_ISDIR(st.st_mode)) {
		for (size_t k = 0; k < sizeof(real_files) / sizeof(real_files[0]); k++) {
			char path[4096];
			snprintf(path, sizeof(path), "%s/%s", testdata, real_files[k]);
			uint8_t *d = slurp(path, &len);
			add_input(real_files[k], d, len);
		}
	} else {
		printf("FAIL: RC_TESTDATA (%s) is not a directory of real TFRecord files\n",
		       testdata ? testdata : "unset");
		return 1;
	}
	cmn_log_set_sink(count_sink, NULL);
	Suite *s = suite_create("cachefs-verify");
	struct {
		const char *name;
		const TTest *t;
	} cases[] = {
	    {"all_pass", test_all_pass},     {"every_flip", test_every_flip},
	    {"catalog", test_catalog},	     {"threads", test_threads},
	    {"raw_object", test_raw_object}, {"big_record", test_big_record},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		TCase *tc = tcase_create(cases[i].name);
		tcase_add_test(tc, cases[i].t);
		tcase_set_timeout(tc, 120);
		suite_add_tcase(s, tc);
	}
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	for (size_t k = 0; k < n_inputs; k++)
		free(inputs[k].d);
	return failed ? 1 : 0;
}
