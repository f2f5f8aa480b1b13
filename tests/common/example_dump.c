/*
 * example_dump.c - the C side of the oracle tests, and a decode benchmark.
 *
 * Reads records and prints them in a canonical text form that
 * oracle_random.py also produces from python3-protobuf's parse, so the two
 * can be compared line by line:
 *
 *   example_dump iter FILE           every feature (last entry wins), sorted
 *                                    by name bytes: "NAMEHEX KIND N V..."
 *   example_dump schema SPEC FILE    cmn_ex_decode() with SPEC: per feature
 *                                    "NAME N V...", or "ERR <errno name>"
 *   example_dump bench SPEC FILE.tfrecord SECONDS
 *                                    decodes the records of a TFRecord file
 *                                    (held in memory) again and again for
 *                                    SECONDS; prints records/s, MB/s and
 *                                    CPU seconds per GB of payload, rows
 *                                    going to a [B, ...] batch (B <= 256,
 *                                    at most 64 MiB), and the
 *                                    same for plain memcpy of the payloads
 *
 * FILE holds records as a u32 little-endian length and the payload,
 * repeated.  Values print as: float32 its bit pattern (%08x), int64 decimal,
 * bytes lowercase hex ("-" for an empty string).  Each record starts with a
 * line "R <index>".  Test tool: exits 1 with a message on usage or I/O errors.
 */
#include "common/example.h"
#include "common/tfrecord.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what)
{
	fprintf(stderr, "example_dump: %s\n", what);
	exit(1);
}

static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		die(strerror(errno));
	struct stat st;
	if (fstat(fileno(f), &st))
		die(strerror(errno));
	uint8_t *buf = malloc((size_t)st.st_size + 1);
	if (!buf || fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size)
		die("read failed");
	fclose(f);
	*len = (size_t)st.st_size;
	return buf;
}

/* Steps through the length-prefixed records of buf. */
static int next_record(const uint8_t *buf, size_t len, size_t *off, const uint8_t **rec,
		       size_t *rlen)
{
	if (*off == len)
		return 0;
	if (len - *off < 4)
		die("truncated length prefix");
	uint32_t n;
	memcpy(&n, buf + *off, 4);
	if (n > len - *off - 4)
		die("truncated record");
	*rec = buf + *off + 4;
	*rlen = n;
	*off += 4 + (size_t)n;
	return 1;
}

static void put_hex(const uint8_t *p, size_t n)
{
	if (n == 0) {
		fputs("-", stdout);
		return;
	}
	for (size_t i = 0; i < n; i++)
		printf("%02x", p[i]);
}

static const char *errname(int rc)
{
	switch (rc) {
	case -EBADMSG:
		return "EBADMSG";
	case -ENOENT:
		return "ENOENT";
	case -EINVAL:
		return "EINVAL";
	case -ERANGE:
		return "ERANGE";
	case -ENOBUFS:
		return "ENOBUFS";
	}
	return "OTHER";
}

/* ---- iter -------------------------------------------------------------- */

static int cmp_feature(const void *a, const void *b)
{
	const struct cmn_ex_feature *x = a, *y = b;
	size_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
	int c = n ? memcmp(x->name, y->name, n) : 0;
	if (c)
		return c;
	return (x->name_len > y->name_len) - (x->name_len < y->name_len);
}

static void print_feature(const struct cmn_ex_feature *f)
{
	put_hex(f->name, f->name_len);
	printf(" %s %zu", cmn_ex_kind_name(f->kind), f->n_values);
	size_t need = f->n_values * 8 + f->n_bytes + 1;
	uint8_t *vals = malloc(need);
	size_t *lens = malloc((f->n_values + 1) * sizeof(size_t));
	cmn_ex_feature_read(f, vals, lens);
	const uint8_t *p = vals;
	for (size_t i = 0; i < f->n_values; i++) {
		putchar(' ');
		if (f->kind == CMN_EX_FLOAT_LIST) {
			uint32_t u;
			memcpy(&u, p + 4 * i, 4);
			printf("%08x", u);
		} else if (f->kind == CMN_EX_INT64_LIST) {
			int64_t v;
			memcpy(&v, p + 8 * i, 8);
			printf("%lld", (long long)v);
		} else {
			put_hex(p, lens[i]);
			p += lens[i];
		}
	}
	putchar('\n');
	free(vals);
	free(lens);
}

static void do_iter(const uint8_t *buf, size_t len)
{
	size_t off = 0, idx = 0, cap = 64;
	const uint8_t *rec;
	size_t rlen;
	struct cmn_ex_feature *fs = malloc(cap * sizeof(*fs));
	while (next_record(buf, len, &off, &rec, &rlen)) {
		printf("R %zu\n", idx++);
		struct cmn_ex_iter it;
		char err[256];
		size_t n = 0;
		int rc;
		cmn_ex_iter_init(&it, rec, rlen);
		struct cmn_ex_feature f;
		while ((rc = cmn_ex_iter_next(&it, &f, err, sizeof(err))) == 1) {
			size_t k;
			for (k = 0; k < n; k++)
				if (cmp_feature(&fs[k], &f) == 0)
					break;
			if (k == n) {
				if (n == cap)
					fs = realloc(fs, (cap *= 2) * sizeof(*fs));
				n++;
			}
			fs[k] = f; /* last entry wins */
		}
		if (rc < 0) {
			printf("ERR %s\n", errname(rc));
			continue;
		}
		qsort(fs, n, sizeof(*fs), cmp_feature);
		for (size_t k = 0; k < n; k++)
			print_feature(&fs[k]);
	}
	free(fs);
}

/* ---- schema ------------------------------------------------------------ */

struct rag {
	uint8_t *buf[CMN_SCHEMA_MAX_FEATURES];
	size_t cap[CMN_SCHEMA_MAX_FEATURES], n[CMN_SCHEMA_MAX_FEATURES],
	    items[CMN_SCHEMA_MAX_FEATURES];
	const struct cmn_schema *s;
};

static void *rag_reserve(void *ctx, size_t i, size_t n, size_t items)
{
	struct rag *r = ctx;
	size_t need = n * r->s->feature[i].elem_size + 1;
	if (need > r->cap[i]) {
		r->buf[i] = realloc(r->buf[i], need);
		r->cap[i] = need;
	}
	r->n[i] = n;
	r->items[i] = items;
	return r->buf[i];
}

static void print_values(const struct cmn_feature *sf, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		putchar(' ');
		if (sf->dtype == CMN_DT_FLOAT32) {
			uint32_t u;
			memcpy(&u, p + 4 * i, 4);
			printf("%08x", u);
		} else if (sf->dtype == CMN_DT_INT64) {
			int64_t v;
			memcpy(&v, p + 8 * i, 8);
			printf("%lld", (long long)v);
		} else {
			printf("%u", p[i]);
		}
	}
}

static void do_schema(const char *spec, const uint8_t *buf, size_t len)
{
	struct cmn_schema *s;
	char err[512];
	if (cmn_schema_parse(spec, &s, err, sizeof(err)))
		die(err);
	void **fixed = calloc(s->n, sizeof(void *));
	for (size_t i = 0; i < s->n; i++)
		if (!s->feature[i].ragged)
			fixed[i] = malloc(s->feature[i].row_bytes);
	struct rag r = {.s = s};
	struct cmn_ex_sink sink = {fixed, rag_reserve, &r};
	size_t off = 0, idx = 0, rlen;
	const uint8_t *rec;
	while (next_record(buf, len, &off, &rec, &rlen)) {
		printf("R %zu\n", idx++);
		int rc = cmn_ex_decode(s, rec, rlen, &sink, err, sizeof(err));
		if (rc) {
			printf("ERR %s\n", errname(rc));
			fprintf(stderr, "record %zu: %s\n", idx - 1, err);
			continue;
		}
		for (size_t i = 0; i < s->n; i++) {
			const struct cmn_feature *sf = &s->feature[i];
			printf("%s", sf->name);
			if (sf->dtype == CMN_DT_BYTES) {
				printf(" %zu ", r.items[i]);
				put_hex(r.buf[i], r.n[i]);
			} else if (sf->ragged) {
				printf(" %zu", r.n[i]);
				print_values(sf, r.buf[i], r.n[i]);
			} else {
				printf(" %llu", (unsigned long long)sf->count);
				print_values(sf, fixed[i], sf->count);
			}
			putchar('\n');
		}
	}
	for (size_t i = 0; i < s->n; i++) {
		free(fixed[i]);
		free(r.buf[i]);
	}
	free(fixed);
	cmn_schema_free(s);
}

/* ---- bench ------------------------------------------------------------- */

static double now(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void do_bench(const char *spec, const char *path, double seconds)
{
	struct cmn_schema *s;
	char err[512];
	if (cmn_schema_parse(spec, &s, err, sizeof(err)))
		die(err);
	size_t flen;
	uint8_t *file = slurp(path, &flen);
	struct cmn_tfr_reader *rd;
	struct cmn_tfr_opts o = {.compression = CMN_TFR_NONE, .name = path};
	if (cmn_tfr_reader_open_buf(&rd, file, flen, &o, err, sizeof(err)))
		die(err);
	size_t n = 0, cap = 1024, payload = 0;
	struct cmn_tfr_record *recs = malloc(cap * sizeof(*recs));
	int rc;
	while ((rc = cmn_tfr_next(rd, &recs[n])) == 1) {
		payload += recs[n].len;
		if (++n == cap)
			recs = realloc(recs, (cap *= 2) * sizeof(*recs));
	}
	if (rc < 0 || n == 0)
		die("cannot read the TFRecord file");
	/*
	 * Rows go to a [BATCH, ...] tensor per feature, as into a feeder's
	 * slot: up to 256 rows, at most 64 MiB, touched before timing.
	 */
	size_t BATCH = s->fixed_row_bytes ? ((size_t)64 << 20) / s->fixed_row_bytes : 256;
	BATCH = BATCH < 1 ? 1 : BATCH > 256 ? 256 : BATCH;
	uint8_t **base = calloc(s->n, sizeof(*base));
	void **fixed = calloc(s->n, sizeof(void *));
	for (size_t i = 0; i < s->n; i++) {
		if (!s->feature[i].ragged) {
			base[i] = malloc(BATCH * s->feature[i].row_bytes);
			memset(base[i], 1, BATCH * s->feature[i].row_bytes);
		}
	}
	struct rag r = {.s = s};
	struct cmn_ex_sink sink = {fixed, rag_reserve, &r};
	double w0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_PROCESS_CPUTIME_ID), w1;
	size_t decoded = 0, bytes = 0;
	do {
		for (size_t k = 0; k < n; k++) {
			for (size_t i = 0; i < s->n; i++)
				if (base[i])
					fixed[i] = base[i] +
						   (decoded + k) % BATCH * s->feature[i].row_bytes;
			if (cmn_ex_decode(s, recs[k].data, recs[k].len, &sink, err, sizeof(err)))
				die(err);
		}
		decoded += n;
		bytes += payload;
		w1 = now(CLOCK_MONOTONIC);
	} while (w1 - w0 < seconds);
	double cpu = now(CLOCK_PROCESS_CPUTIME_ID) - c0;
	printf("decode: records %zu  MB %.1f  wall_s %.3f  records/s %.0f  MB/s %.1f  "
	       "cpu_s/GB %.4f\n",
	       decoded, (double)bytes / 1e6, w1 - w0, (double)decoded / (w1 - w0),
	       (double)bytes / 1e6 / (w1 - w0), cpu / ((double)bytes / 1e9));

	/* The same bytes moved by plain memcpy of whole payloads, for scale. */
	size_t stride = payload / n + 1;
	uint8_t *sinkbuf = malloc(BATCH * stride);
	memset(sinkbuf, 1, BATCH * stride);
	w0 = now(CLOCK_MONOTONIC);
	c0 = now(CLOCK_PROCESS_CPUTIME_ID);
	size_t copied = 0, bytes2 = 0;
	do {
		for (size_t k = 0; k < n; k++) {
			size_t l = recs[k].len < stride ? recs[k].len : stride;
			memcpy(sinkbuf + (copied + k) % BATCH * stride, recs[k].data, l);
		}
		copied += n;
		bytes2 += payload;
		w1 = now(CLOCK_MONOTONIC);
	} while (w1 - w0 < seconds);
	cpu = now(CLOCK_PROCESS_CPUTIME_ID) - c0;
	printf("memcpy: records %zu  MB %.1f  wall_s %.3f  records/s %.0f  MB/s %.1f  "
	       "cpu_s/GB %.4f\n",
	       copied, (double)bytes2 / 1e6, w1 - w0, (double)copied / (w1 - w0),
	       (double)bytes2 / 1e6 / (w1 - w0), cpu / ((double)bytes2 / 1e9));
	free(sinkbuf);
	for (size_t i = 0; i < s->n; i++)
		free(base[i]);
	free(base);
	for (size_t i = 0; i < s->n; i++)
		free(r.buf[i]);
	free(fixed);
	free(recs);
	cmn_tfr_reader_free(rd);
	free(file);
	cmn_schema_free(s);
}

int main(int argc, char **argv)
{
	size_t len;
	if (argc == 3 && strcmp(argv[1], "iter") == 0) {
		uint8_t *buf = slurp(argv[2], &len);
		do_iter(buf, len);
		free(buf);
	} else if (argc == 4 && strcmp(argv[1], "schema") == 0) {
		uint8_t *buf = slurp(argv[3], &len);
		do_schema(argv[2], buf, len);
		free(buf);
	} else if (argc == 5 && strcmp(argv[1], "bench") == 0) {
		do_bench(argv[2], argv[3], atof(argv[4]));
	} else {
		die("usage: example_dump iter FILE | schema SPEC FILE | bench SPEC FILE.tfrecord "
		    "SECONDS");
	}
	return fflush(stdout) == 0 ? 0 : 1;
}
