/*
 * cmd_synth.c - `rollcache synth`: writes a synthetic TFRecord dataset of
 * tf.train.Example records, the built-in demo data and the fixture of tests
 * and benchmarks.
 *
 *   rollcache synth DIR --records N [--record-size SIZE] [--shards K]
 *                   [--schema SPEC] [--gzip] [--seed S] [--threads T]
 *
 * Owns only the command: value generation, sizing and file writing.  The
 * Example encoding is common/example.c, the framing common/tfrecord.c.
 *
 * Files: DIR/part-%05d-of-%05d.tfrecord (".tfrecord.gz" with --gzip), each
 * written under a temporary name in DIR and renamed when complete.  Shard k
 * of K holds records [k*N/K, (k+1)*N/K) in order.  The same arguments give
 * byte-identical files, whatever --threads is.
 *
 * Values.  Record r (0-based over the whole dataset), feature i (0-based in
 * the schema), element j, with all arithmetic modulo 2^64:
 *
 *   mix(z)    = splitmix64's finalizer:
 *               z ^= z >> 30; z *= 0xbf58476d1ce4e5b9;
 *               z ^= z >> 27; z *= 0x94d049bb133111eb; z ^= z >> 31
 *   key(r, i) = mix(S + 0x9e3779b97f4a7c15 * (256 * r + i + 1))
 *   u(r,i,j)  = mix(key(r, i) + j)
 *   float32   = (u >> 40) / 2^24             (exact, in [0, 1))
 *   int64     = (u mod 2001) - 1000          (in [-1000, 1000])
 *   uint8     = u mod 256;  bytes: one string of bytes u mod 256
 *   ragged length L(r, i) = mix(key(r, i) ^ 0xffffffffffffffff) mod (2m + 1)
 *
 * where m, the mean length of a ragged feature, is chosen from the record
 * size (below).  Tests recompute these (tests/common/oracle_synth.py).
 *
 * Sizing.  Without --schema the schema is `x:float32[n],y:int64[1]` with the
 * largest n whose Example is at most --record-size bytes (the payload; the
 * file adds 16 bytes of framing per record).  With a schema of fixed shapes
 * only, --record-size may be left out; when given, it must be within 10% of
 * the schema's Example size, else it is an error (the two disagree).  With
 * ragged features, m is set so that the mean Example size is close to
 * --record-size (m = 8 elements when --record-size is not given).
 *
 * Speed: values are generated into per-feature buffers, encoded once into a
 * record buffer and appended through a buffered writer; shards are spread
 * over --threads worker threads (default: the number of CPUs, at most K).
 * --gzip uses zlib level 1 (the payload is random; higher levels cost time
 * for little gain).  A progress line (records, MB, MB/s) goes to stderr:
 * refreshed in place on a terminal, else one line a second for runs longer
 * than a second.
 *
 * Threads and locking: workers take shards from an atomic counter and add to
 * atomic record/byte counters; synth.mu protects the first error message
 * and the count of running workers, whose end is signalled on synth.cond
 * (the main thread waits there, waking to print progress).
 */
#include "cli/cmd.h"
#include "common/clock.h"
#include "common/crc32c.h"
#include "common/example.h"
#include "common/tfrecord.h"
#include "common/units.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#define SYNTH_MAX_RECORD ((uint64_t)1 << 30) /* 1 GiB per Example */

static void synth_usage(FILE *out)
{
	fprintf(out,
		"usage: rollcache synth DIR --records N [--record-size SIZE] [--shards K]\n"
		"                       [--schema SPEC] [--gzip] [--seed S] [--threads T]\n"
		"\n"
		"Writes K TFRecord files DIR/part-00000-of-0000K.tfrecord (.tfrecord.gz with\n"
		"--gzip) holding N tf.train.Example records in all, deterministic by seed.\n"
		"\n"
		"  --records N        number of records (required)\n"
		"  --record-size SIZE Example size in bytes (16K, 1M, ...; framing adds 16)\n"
		"  --shards K         number of files (default 1)\n"
		"  --schema SPEC      features, such as\n"
		"                     'x:float32[4000],y:int64[1],ids:int64[],img:bytes'\n"
		"                     (default: x:float32[n],y:int64[1] with n fitting SIZE)\n"
		"  --gzip             GZIP-compressed TFRecord (zlib level 1)\n"
		"  --seed S           seed of the values (default 0)\n"
		"  --threads T        worker threads (default: CPUs, at most K)\n"
		"\n"
		"A schema of fixed shapes sets the size: SIZE may be omitted, or must be within\n"
		"10%% of it.  Ragged features ([] or bytes) get a random length in [0, 2m] with\n"
		"m chosen so that the mean record is about SIZE (m = 8 without SIZE).\n"
		"\n"
		"Values of record r (over the whole dataset), feature i, element j (mod 2^64):\n"
		"  mix(z) = splitmix64 finalizer; key = mix(S + 0x9e3779b97f4a7c15*(256r+i+1))\n"
		"  u = mix(key + j); float32 = (u>>40)/2^24; int64 = u%%2001 - 1000;\n"
		"  uint8 and bytes = u%%256; ragged length = mix(key ^ ~0) %% (2m+1).\n");
}

/* ---- values ---------------------------------------------------------------- */

static inline uint64_t mix(uint64_t z)
{
	z ^= z >> 30;
	z *= 0xbf58476d1ce4e5b9ull;
	z ^= z >> 27;
	z *= 0x94d049bb133111ebull;
	z ^= z >> 31;
	return z;
}

static inline uint64_t feature_key(uint64_t seed, uint64_t r, size_t i)
{
	return mix(seed + 0x9e3779b97f4a7c15ull * (256 * r + i + 1));
}

/* Fills n elements of feature f for key k into dst. */
static void gen_values(const struct cmn_feature *f, uint64_t k, void *dst, size_t n)
{
	switch (f->dtype) {
	case CMN_DT_FLOAT32: {
		float *d = dst;
		for (size_t j = 0; j < n; j++)
			d[j] = (float)(mix(k + j) >> 40) * (1.0f / 16777216.0f);
		break;
	}
	case CMN_DT_INT64: {
		int64_t *d = dst;
		for (size_t j = 0; j < n; j++)
			d[j] = (int64_t)(mix(k + j) % 2001) - 1000;
		break;
	}
	case CMN_DT_UINT8:
	case CMN_DT_BYTES: {
		uint8_t *d = dst;
		for (size_t j = 0; j < n; j++)
			d[j] = (uint8_t)mix(k + j);
		break;
	}
	}
}

/* Mean encoded bytes of one element, for sizing ragged features. */
static double elem_wire_size(enum cmn_dtype t)
{
	switch (t) {
	case CMN_DT_FLOAT32:
		return 4;
	case CMN_DT_INT64:
		return 5.9; /* half negative (10 bytes), half 1-2 bytes */
	default:
		return 1;
	}
}

/* ---- the job --------------------------------------------------------------- */

struct synth {
	const char *dir;
	uint64_t records, seed;
	uint32_t shards;
	bool gzip;
	struct cmn_schema *schema;
	uint64_t ragged_mean; /* m */

	atomic_uint_fast32_t next_shard;
	atomic_uint_fast64_t done_records, done_bytes; /* bytes written, framing included */
	atomic_int failed;
	pthread_mutex_t mu;  /* protects err and running */
	pthread_cond_t cond; /* signalled when a worker ends */
	unsigned running;    /* workers not yet ended */
	char err[512];
};

static void fail(struct synth *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct synth *s, const char *fmt, ...)
{
	pthread_mutex_lock(&s->mu);
	if (!atomic_load(&s->failed)) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(s->err, sizeof(s->err), fmt, ap);
		va_end(ap);
		atomic_store(&s->failed, 1);
	}
	pthread_mutex_unlock(&s->mu);
}

/* Per-thread buffers: one per feature for values, one for the record. */
struct worker_bufs {
	void *vals[CMN_SCHEMA_MAX_FEATURES];
	size_t cap[CMN_SCHEMA_MAX_FEATURES];
	struct cmn_ex_values v[CMN_SCHEMA_MAX_FEATURES];
	uint8_t *rec;
	size_t rec_cap;
};

static int ensure(void **p, size_t *cap, size_t need)
{
	if (need <= *cap)
		return 0;
	void *q = realloc(*p, need);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = need;
	return 0;
}

/* Builds record r into b->rec; returns its length, or 0 on failure (s->err set). */
static size_t build_record(struct synth *s, struct worker_bufs *b, uint64_t r)
{
	const struct cmn_schema *sc = s->schema;
	for (size_t i = 0; i < sc->n; i++) {
		const struct cmn_feature *f = &sc->feature[i];
		uint64_t k = feature_key(s->seed, r, i);
		size_t n = f->ragged ? (size_t)(mix(k ^ ~0ull) % (2 * s->ragged_mean + 1))
				     : (size_t)f->count;
		if (ensure(&b->vals[i], &b->cap[i], n * f->elem_size + 1)) {
			fail(s, "out of memory for %zu values of feature '%s'", n, f->name);
			return 0;
		}
		gen_values(f, k, b->vals[i], n);
		b->v[i] = (struct cmn_ex_values){.data = b->vals[i], .n = n};
	}
	size_t need = cmn_ex_encoded_size(sc, b->v);
	if (ensure((void **)&b->rec, &b->rec_cap, need)) {
		fail(s, "out of memory for a record of %zu bytes", need);
		return 0;
	}
	size_t len;
	char err[256];
	if (cmn_ex_encode(sc, b->v, b->rec, b->rec_cap, &len, err, sizeof(err))) {
		fail(s, "encoding record %llu: %s", (unsigned long long)r, err);
		return 0;
	}
	return len;
}

static void shard_name(const struct synth *s, uint32_t k, char *buf, size_t len, bool tmp)
{
	snprintf(buf, len, "%s/%spart-%05u-of-%05u.tfrecord%s%s", s->dir, tmp ? "." : "", k,
		 s->shards, s->gzip ? ".gz" : "", tmp ? ".tmp" : "");
}

/* Writes shard k; returns 0 or -1 with s->err set (the temporary file removed). */
static int write_shard(struct synth *s, struct worker_bufs *b, uint32_t k)
{
	char tmp[PATH_MAX], final[PATH_MAX], err[256];
	shard_name(s, k, tmp, sizeof(tmp), true);
	shard_name(s, k, final, sizeof(final), false);
	uint64_t first = s->records * k / s->shards, last = s->records * (k + 1) / s->shards;
	int rc = -1;
	struct cmn_tfr_writer *w = NULL;
	gzFile gz = NULL;

	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		fail(s, "%s: %s", tmp, strerror(errno));
		return -1;
	}
	if (s->gzip) {
		int fd2 = dup(fd);
		gz = fd2 >= 0 ? gzdopen(fd2, "wb1") : NULL;
		if (!gz) {
			if (fd2 >= 0)
				close(fd2);
			fail(s, "%s: cannot start gzip stream", tmp);
			goto out;
		}
		gzbuffer(gz, 1 << 20);
	} else if (cmn_tfr_writer_open(&w, fd, 4 << 20, err, sizeof(err))) {
		fail(s, "%s: %s", tmp, err);
		goto out;
	}
	for (uint64_t r = first; r < last; r++) {
		if (atomic_load(&s->failed))
			goto out;
		size_t len = build_record(s, b, r);
		if (!len)
			goto out;
		if (s->gzip) {
			uint8_t hdr[CMN_TFR_HEADER_SIZE], ftr[CMN_TFR_FOOTER_SIZE];
			cmn_tfr_put_header(hdr, len);
			cmn_tfr_put_footer(ftr, cmn_crc32c(0, b->rec, len));
			if (gzwrite(gz, hdr, sizeof(hdr)) != (int)sizeof(hdr) ||
			    gzwrite(gz, b->rec, (unsigned)len) != (int)len ||
			    gzwrite(gz, ftr, sizeof(ftr)) != (int)sizeof(ftr)) {
				int zerr;
				fail(s, "%s: gzip write failed: %s", tmp, gzerror(gz, &zerr));
				goto out;
			}
		} else {
			int e = cmn_tfr_writer_append(w, b->rec, len, 0, false);
			if (e) {
				fail(s, "%s: %s", tmp, strerror(-e));
				goto out;
			}
		}
		atomic_fetch_add(&s->done_records, 1);
		atomic_fetch_add(&s->done_bytes, len + CMN_TFR_OVERHEAD);
	}
	if (s->gzip) {
		int e = gzclose(gz);
		gz = NULL;
		if (e != Z_OK) {
			fail(s, "%s: gzip close failed (%d)", tmp, e);
			goto out;
		}
	} else {
		int e = cmn_tfr_writer_flush(w);
		if (e) {
			fail(s, "%s: %s", tmp, strerror(-e));
			goto out;
		}
	}
	if (close(fd)) {
		fd = -1;
		fail(s, "%s: %s", tmp, strerror(errno));
		goto out;
	}
	fd = -1;
	if (rename(tmp, final)) {
		fail(s, "%s: %s", final, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (gz)
		gzclose(gz);
	cmn_tfr_writer_free(w);
	if (fd >= 0)
		close(fd);
	if (rc)
		unlink(tmp);
	return rc;
}

static void *worker(void *arg)
{
	struct synth *s = arg;
	struct worker_bufs *b = calloc(1, sizeof(*b));
	if (!b) {
		fail(s, "out of memory");
		pthread_mutex_lock(&s->mu);
		s->running--;
		pthread_cond_signal(&s->cond);
		pthread_mutex_unlock(&s->mu);
		return NULL;
	}
	for (;;) {
		uint32_t k = (uint32_t)atomic_fetch_add(&s->next_shard, 1);
		if (k >= s->shards || atomic_load(&s->failed))
			break;
		if (write_shard(s, b, k))
			break;
	}
	for (size_t i = 0; i < CMN_SCHEMA_MAX_FEATURES; i++)
		free(b->vals[i]);
	free(b->rec);
	free(b);
	pthread_mutex_lock(&s->mu);
	s->running--;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* ---- sizing ---------------------------------------------------------------- */

/*
 * Example size when every ragged feature holds m elements and int64 values
 * take `iv_size`-byte varints (1: small positives, 10: negatives).  Float,
 * uint8 and bytes sizes depend only on counts, so their data is not read.
 */
static size_t size_with(const struct cmn_schema *sc, uint64_t m, int64_t ival)
{
	struct cmn_ex_values v[CMN_SCHEMA_MAX_FEATURES];
	static const uint8_t dummy[8];
	int64_t *ints = NULL;
	size_t nints = 0;
	for (size_t i = 0; i < sc->n; i++) {
		const struct cmn_feature *f = &sc->feature[i];
		size_t n = f->ragged ? (size_t)m : (size_t)f->count;
		if (f->dtype == CMN_DT_INT64 && n > nints)
			nints = n;
	}
	if (nints) {
		ints = malloc(nints * sizeof(*ints));
		if (!ints)
			return 0;
		for (size_t k = 0; k < nints; k++)
			ints[k] = ival;
	}
	for (size_t i = 0; i < sc->n; i++) {
		const struct cmn_feature *f = &sc->feature[i];
		size_t n = f->ragged ? (size_t)m : (size_t)f->count;
		v[i] = (struct cmn_ex_values){
		    .data = f->dtype == CMN_DT_INT64 ? (const void *)ints : dummy, .n = n};
	}
	size_t sz = cmn_ex_encoded_size(sc, v);
	free(ints);
	return sz;
}

/* The default schema x:float32[n],y:int64[1] with the largest n fitting size. */
static int make_default_schema(uint64_t size, struct cmn_schema **out, char *err, size_t errlen)
{
	char spec[96];
	struct cmn_schema *sc;
	if (cmn_schema_parse("x:float32[],y:int64[1]", &sc, err, errlen))
		return -EINVAL;
	/* y may be negative: a 10-byte varint, the worst case. */
	uint64_t n = size > 64 ? (size - 64) / 4 : 1;
	while (n > 1 && size_with(sc, n, -1) > size)
		n--;
	while (size_with(sc, n + 1, -1) <= size)
		n++;
	size_t got = size_with(sc, n, -1);
	cmn_schema_free(sc);
	if (got > size) {
		snprintf(err, errlen,
			 "--record-size %llu is too small: the default schema "
			 "x:float32[n],y:int64[1] needs at least %zu bytes",
			 (unsigned long long)size, got);
		return -EINVAL;
	}
	snprintf(spec, sizeof(spec), "x:float32[%llu],y:int64[1]", (unsigned long long)n);
	return cmn_schema_parse(spec, out, err, errlen);
}

/*
 * Sets s->ragged_mean (m) for the record size, or checks a fixed schema
 * against it.  size 0: not given.  Returns 0 or -EINVAL with a message.
 */
static int fit_size(struct synth *s, uint64_t size, char *err, size_t errlen)
{
	const struct cmn_schema *sc = s->schema;
	char spec[256];
	cmn_schema_format(sc, spec, sizeof(spec));
	/* Typical int64 varint: 5.9 bytes on average; use 1 and 10 for the bounds. */
	size_t base = size_with(sc, 0, 1);
	if (!sc->n_ragged) {
		s->ragged_mean = 0;
		size_t lo = base, hi = size_with(sc, 0, -1);
		if (size && ((double)hi < 0.9 * (double)size || (double)lo > 1.1 * (double)size)) {
			char range[64];
			if (lo == hi)
				snprintf(range, sizeof(range), "%zu", lo);
			else
				snprintf(range, sizeof(range), "%zu..%zu", lo, hi);
			snprintf(
			    err, errlen,
			    "--record-size %llu disagrees with --schema '%s', whose records are "
			    "%s bytes: drop --record-size or change one of them",
			    (unsigned long long)size, spec, range);
			return -EINVAL;
		}
		return 0;
	}
	if (!size) {
		s->ragged_mean = 8;
	} else {
		if (base >= size) {
			snprintf(err, errlen,
				 "--record-size %llu is too small for --schema '%s': its fixed "
				 "features alone take %zu bytes",
				 (unsigned long long)size, spec, base);
			return -EINVAL;
		}
		double per = 0;
		for (size_t i = 0; i < sc->n; i++)
			if (sc->feature[i].ragged)
				per += elem_wire_size(sc->feature[i].dtype);
		s->ragged_mean = (uint64_t)((double)(size - base) / per);
		if (s->ragged_mean > SYNTH_MAX_RECORD / 16)
			s->ragged_mean = SYNTH_MAX_RECORD / 16;
	}
	return 0;
}

/* ---- progress ---------------------------------------------------------------- */

static void progress(struct synth *s, double t0, bool tty, bool final)
{
	double dt = cmn_mono_s() - t0;
	uint64_t r = atomic_load(&s->done_records), b = atomic_load(&s->done_bytes);
	double mb = (double)b / 1e6;
	fprintf(stderr, "%ssynth: %llu/%llu records, %.1f MB, %.1f MB/s%s", tty ? "\r" : "",
		(unsigned long long)r, (unsigned long long)s->records, mb, dt > 0 ? mb / dt : 0.0,
		tty && !final ? "   " : "\n");
	fflush(stderr);
}

/* ---- the command ------------------------------------------------------------- */

static int parse_u64(const char *opt, const char *v, uint64_t min, uint64_t max, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long x = strtoull(v, &end, 10);
	if (!*v || *end || errno || v[0] == '-' || x < min || x > max) {
		fprintf(stderr, "rollcache synth: %s %s: expected an integer in %llu..%llu\n", opt,
			v, (unsigned long long)min, (unsigned long long)max);
		return -1;
	}
	*out = x;
	return 0;
}

int cmd_synth(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"records", required_argument, NULL, 'n'},
	    {"record-size", required_argument, NULL, 's'},
	    {"shards", required_argument, NULL, 'k'},
	    {"schema", required_argument, NULL, 'S'},
	    {"gzip", no_argument, NULL, 'z'},
	    {"seed", required_argument, NULL, 'e'},
	    {"threads", required_argument, NULL, 't'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct synth s = {.shards = 1};
	uint64_t size = 0, shards = 1, threads = 0;
	const char *spec = NULL;
	bool have_records = false;
	char err[512];
	int c, rc = 2;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'n':
			if (parse_u64("--records", optarg, 1, UINT64_MAX / 512, &s.records))
				return 2;
			have_records = true;
			break;
		case 's':
			if (cmn_parse_size(optarg, &size, err, sizeof(err)) || size == 0 ||
			    size > SYNTH_MAX_RECORD) {
				fprintf(stderr,
					"rollcache synth: --record-size %s: expected a size from 1 "
					"to 1G, such as 16K\n",
					optarg);
				return 2;
			}
			break;
		case 'k':
			if (parse_u64("--shards", optarg, 1, 99999, &shards))
				return 2;
			break;
		case 'S':
			spec = optarg;
			break;
		case 'z':
			s.gzip = true;
			break;
		case 'e':
			if (parse_u64("--seed", optarg, 0, UINT64_MAX, &s.seed))
				return 2;
			break;
		case 't':
			if (parse_u64("--threads", optarg, 1, 256, &threads))
				return 2;
			break;
		case 'h':
			synth_usage(stdout);
			return 0;
		case ':':
			fprintf(stderr, "rollcache synth: %s needs a value (see --help)\n",
				argv[optind - 1]);
			return 2;
		default:
			fprintf(stderr, "rollcache synth: unknown option '%s' (see --help)\n",
				argv[optind - 1]);
			return 2;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "rollcache synth: %s\n",
			optind == argc ? "expected the output directory DIR (see --help)"
				       : "expected one output directory DIR, got more arguments");
		return 2;
	}
	s.dir = argv[optind];
	if (!have_records) {
		fprintf(stderr, "rollcache synth: --records N is required (see --help)\n");
		return 2;
	}
	if (!spec && !size) {
		fprintf(stderr, "rollcache synth: give --record-size SIZE, or a --schema of fixed "
				"shapes (see --help)\n");
		return 2;
	}
	s.shards = (uint32_t)shards;
	if (spec ? cmn_schema_parse(spec, &s.schema, err, sizeof(err))
		 : make_default_schema(size, &s.schema, err, sizeof(err))) {
		fprintf(stderr, "rollcache synth: %s%s\n", spec ? "--schema: " : "", err);
		return 2;
	}
	if (fit_size(&s, size, err, sizeof(err))) {
		fprintf(stderr, "rollcache synth: %s\n", err);
		goto out;
	}
	if (mkdir(s.dir, 0755) && errno != EEXIST) {
		fprintf(stderr, "rollcache synth: cannot create %s: %s\n", s.dir, strerror(errno));
		rc = 1;
		goto out;
	}
	struct stat st;
	if (stat(s.dir, &st) || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "rollcache synth: %s is not a directory\n", s.dir);
		rc = 1;
		goto out;
	}

	if (!threads) {
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);
		threads = cpus > 0 ? (uint64_t)cpus : 1;
	}
	if (threads > s.shards)
		threads = s.shards;
	pthread_mutex_init(&s.mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s.cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_t tids[256];
	size_t started = 0;
	double t0 = cmn_mono_s();
	pthread_mutex_lock(&s.mu);
	for (; started < threads; started++) {
		if (pthread_create(&tids[started], NULL, worker, &s)) {
			pthread_mutex_unlock(&s.mu);
			fail(&s, "cannot start a worker thread");
			pthread_mutex_lock(&s.mu);
			break;
		}
		s.running++;
	}
	/* Wait for the workers, printing progress now and then. */
	bool tty = isatty(STDERR_FILENO);
	double period = tty ? 0.25 : 1.0;
	double next = t0 + period;
	bool shown = false;
	while (s.running) {
		struct timespec until;
		until.tv_sec = (time_t)next;
		until.tv_nsec = (long)((next - (double)until.tv_sec) * 1e9);
		int e = pthread_cond_timedwait(&s.cond, &s.mu, &until);
		if (e == ETIMEDOUT && s.running) {
			progress(&s, t0, tty, false);
			shown = true;
			next += period;
		}
	}
	pthread_mutex_unlock(&s.mu);
	for (size_t i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	double dt = cmn_mono_s() - t0;
	if (shown && tty)
		progress(&s, t0, tty, true);
	pthread_cond_destroy(&s.cond);
	pthread_mutex_destroy(&s.mu);
	if (atomic_load(&s.failed)) {
		fprintf(stderr, "rollcache synth: %s\n", s.err);
		rc = 1;
		goto out;
	}
	uint64_t bytes = atomic_load(&s.done_bytes);
	char schema_str[256];
	cmn_schema_format(s.schema, schema_str, sizeof(schema_str));
	printf("synth: wrote %u file%s, %llu records, %.1f MB (uncompressed) to %s in %.2f s "
	       "(%.0f MB/s); schema %s",
	       s.shards, s.shards == 1 ? "" : "s", (unsigned long long)s.records,
	       (double)bytes / 1e6, s.dir, dt, dt > 0 ? (double)bytes / 1e6 / dt : 0.0, schema_str);
	if (s.schema->n_ragged)
		printf("; ragged mean m=%llu", (unsigned long long)s.ragged_mean);
	printf("\n");
	rc = 0;
out:
	cmn_schema_free(s.schema);
	return rc;
}
