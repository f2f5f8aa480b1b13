/*
 * feeder.c - `rollcache-bench feeder PATH --schema S --batch N ...`.
 *
 * Runs the native feeder over PATH for warm-up epochs (page cache, ring and
 * chunk growth) and then measured epochs, as a consumer that takes a batch,
 * optionally "computes" for --step-ms, and releases it.  Prints records/s,
 * MB/s, CPU seconds per GB (getrusage of the whole process: readers,
 * decoders and consumer), mean and p99 consumer wait per batch, allocations
 * during the measured epochs, and with --device the host-to-device rate
 * next to a plain pinned cudaMemcpy peak measured in the same run.
 * The peers (bench/feeder_*.py) print the same figures on the same files.
 */
#include "bench/rollcache_bench/bench.h"

#include "common/clock.h"
#include "rollcache/feeder.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static double cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void usage(FILE *out)
{
	fprintf(out, "usage: rollcache-bench feeder PATH --schema SPEC --batch N [options]\n"
		     "  PATH              directory, glob or file of TFRecord (or raw) files\n"
		     "  --schema SPEC     e.g. 'x:float32[1000000,3],y:int64[1]'\n"
		     "  --batch N         batch size\n"
		     "  --threads N       decoder threads (default 2; 1 with 2 CPUs)\n"
		     "  --readers N       reader threads (default 1)\n"
		     "  --slots N         ring slots (default 4)\n"
		     "  --shuffle         shuffle files and records (seed 1)\n"
		     "  --epochs N        measured epochs (default 1)\n"
		     "  --warmup N        epochs before measuring (default 1)\n"
		     "  --step-ms MS      consumer step per batch (default 0)\n"
		     "  --max-batches N   stop each epoch after N batches\n"
		     "  --device N        copy to CUDA device N (default host)\n"
		     "  --raw             raw fixed-size records\n"
		     "  --no-crc          skip payload CRC32C checks\n"
		     "  --read-size BYTES pread size (default 4 MiB)\n");
}

int bench_feeder(int argc, char **argv)
{
	static const struct option lo[] = {
	    {"schema", required_argument, NULL, 's'},
	    {"batch", required_argument, NULL, 'b'},
	    {"threads", required_argument, NULL, 't'},
	    {"readers", required_argument, NULL, 'r'},
	    {"slots", required_argument, NULL, 'S'},
	    {"shuffle", no_argument, NULL, 'x'},
	    {"epochs", required_argument, NULL, 'e'},
	    {"warmup", required_argument, NULL, 'w'},
	    {"step-ms", required_argument, NULL, 'p'},
	    {"max-batches", required_argument, NULL, 'm'},
	    {"device", required_argument, NULL, 'd'},
	    {"raw", no_argument, NULL, 'R'},
	    {"no-crc", no_argument, NULL, 'C'},
	    {"read-size", required_argument, NULL, 'z'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct rc_feeder_opts o;
	unsigned epochs = 1, warmup = 1;
	double step_ms = 0;
	uint64_t max_batches = UINT64_MAX;
	int c;

	rc_feeder_opts_init(&o);
	o.seed = 1;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 's':
			o.schema = optarg;
			break;
		case 'b':
			o.batch_size = strtoull(optarg, NULL, 10);
			break;
		case 't':
			o.threads = (uint32_t)atoi(optarg);
			break;
		case 'r':
			o.readers = (uint32_t)atoi(optarg);
			break;
		case 'S':
			o.ring_slots = (uint32_t)atoi(optarg);
			break;
		case 'x':
			o.shuffle = true;
			break;
		case 'e':
			epochs = (unsigned)atoi(optarg);
			break;
		case 'w':
			warmup = (unsigned)atoi(optarg);
			break;
		case 'p':
			step_ms = atof(optarg);
			break;
		case 'm':
			max_batches = strtoull(optarg, NULL, 10);
			break;
		case 'd':
			o.device = atoi(optarg);
			break;
		case 'R':
			o.format = RC_FORMAT_RAW;
			break;
		case 'C':
			o.verify_crc = false;
			break;
		case 'z':
			o.read_size = strtoull(optarg, NULL, 10);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1 || !o.schema || !o.batch_size || epochs == 0) {
		usage(stderr);
		return 2;
	}
	o.path = argv[optind];

	char err[1024] = "";
	struct rc_feeder *f = rc_feeder_open(&o, err, sizeof err);
	if (!f) {
		fprintf(stderr, "rollcache-bench feeder: %s\n", err);
		return 1;
	}
	size_t cap = 1024, nw = 0;
	double *waits = malloc(cap * sizeof *waits);
	uint64_t consumed = 0;	/* rows of the measured batches */
	double first_waits = 0; /* the first batch of each measured epoch (pipeline fill) */
	unsigned first_n = 0;
	struct rc_feeder_stats s0, s1;
	double t0 = 0, c0 = 0, t1, c1;
	int rc = 0;

	for (unsigned e = 0; e < warmup + epochs && rc >= 0; e++) {
		if (e == warmup) {
			rc_feeder_stats(f, &s0);
			t0 = cmn_mono_s();
			c0 = cpu_s();
		}
		if (e > 0 && rc_feeder_next_epoch(f) < 0) {
			rc = -1;
			break;
		}
		struct rc_batch *b;
		uint64_t n = 0;
		for (;;) {
			double w0 = cmn_mono_s();
			rc = rc_feeder_next(f, &b);
			double w = cmn_mono_s() - w0;
			if (rc <= 0)
				break;
			if (e >= warmup) {
				consumed += rc_batch_rows(b);
				if (n == 0) {
					first_waits += w;
					first_n++;
				}
				if (nw == cap) {
					cap *= 2;
					waits = realloc(waits, cap * sizeof *waits);
				}
				waits[nw++] = w;
			}
			if (step_ms > 0) {
				struct timespec ts = {
				    (time_t)(step_ms / 1000),
				    (long)((step_ms - (double)(long)(step_ms / 1000) * 1000) *
					   1e6)};
				nanosleep(&ts, NULL);
			}
			rc_batch_release(b);
			if (++n >= max_batches)
				break;
		}
	}
	t1 = cmn_mono_s();
	c1 = cpu_s();
	if (rc < 0) {
		fprintf(stderr, "rollcache-bench feeder: %s\n", rc_feeder_error(f));
		rc_feeder_close(f);
		free(waits);
		return 1;
	}
	rc_feeder_stats(f, &s1);

	double secs = t1 - t0, cpu = c1 - c0;
	/*
	 * Records handed to the consumer in the measured epochs.  The feeder
	 * decodes ahead (the ring, and the next epoch for plain directories),
	 * so its decode counters cross epoch boundaries: bytes are the
	 * consumed records times the mean payload size over the whole run.
	 */
	uint64_t recs = consumed;
	uint64_t bytes =
	    s1.records ? (uint64_t)((double)consumed * (double)s1.record_bytes / (double)s1.records)
		       : 0;
	uint64_t batches = nw;
	double mean = 0;
	for (size_t i = 0; i < nw; i++)
		mean += waits[i];
	mean = nw ? mean / (double)nw : 0;
	qsort(waits, nw, sizeof *waits, cmp_double);
	double p99 = nw ? waits[(size_t)((double)(nw - 1) * 0.99)] : 0;
	double gb = (double)bytes / 1e9;

	char thr[32];
	if (o.threads)
		snprintf(thr, sizeof thr, "%u", o.threads);
	else
		snprintf(thr, sizeof thr, "default (%s)",
			 sysconf(_SC_NPROCESSORS_ONLN) < (long)(o.readers ? o.readers : 1) + 2
			     ? "1"
			     : "2");
	printf("rollcache-bench feeder: %s\n", o.path);
	printf("  schema %s, batch %" PRIu64 ", threads %s, readers %u, slots %u, shuffle %s, "
	       "crc %s, device %s, step %.0f ms, %u warm-up + %u measured epoch(s)\n",
	       o.schema, o.batch_size, thr, o.readers ? o.readers : 1,
	       o.ring_slots ? o.ring_slots : 4, o.shuffle ? "yes" : "no",
	       o.verify_crc ? "yes" : "no", o.device >= 0 ? "cuda" : "host", step_ms, warmup,
	       epochs);
	printf("  %-28s %14s\n", "metric", "value");
	printf("  %-28s %14" PRIu64 "\n", "files (this rank)", (uint64_t)s1.files);
	printf("  %-28s %14" PRIu64 "\n", "batches", batches);
	printf("  %-28s %14" PRIu64 "\n", "records", recs);
	printf("  %-28s %14.3f\n", "seconds", secs);
	printf("  %-28s %14.0f\n", "records/s", secs > 0 ? (double)recs / secs : 0);
	printf("  %-28s %14.1f\n", "MB/s (record payload)",
	       secs > 0 ? (double)bytes / 1e6 / secs : 0);
	printf("  %-28s %14.1f\n", "MB/s (file reads, incl. ahead)",
	       secs > 0 ? (double)(s1.bytes_read - s0.bytes_read) / 1e6 / secs : 0);
	printf("  %-28s %14.3f\n", "CPU-s per GB", gb > 0 ? cpu / gb : 0);
	printf("  %-28s %14.3f\n", "wait mean ms/batch", mean * 1e3);
	printf("  %-28s %14.3f\n", "wait p99 ms/batch", p99 * 1e3);
	printf("  %-28s %14.3f\n", "wait 1st batch of epoch ms",
	       first_n ? first_waits / first_n * 1e3 : 0);
	printf("  %-28s %14.3f\n", "wait mean ms, later batches",
	       nw > first_n ? (mean * (double)nw - first_waits) / (double)(nw - first_n) * 1e3 : 0);
	printf("  %-28s %14" PRIu64 "\n", "allocations (measured)",
	       s1.allocations - s0.allocations);
	if (o.device >= 0) {
		double h2d = s1.h2d_ns > s0.h2d_ns
				 ? (double)(s1.h2d_bytes - s0.h2d_bytes) /
				       ((double)(s1.h2d_ns - s0.h2d_ns) / 1e9) / 1e9
				 : 0;
		double peak = 0;
		char perr[256] = "";
		/* a plain pinned cudaMemcpy of one batch's bytes, same process, same run */
		size_t len = batches ? (size_t)((s1.h2d_bytes - s0.h2d_bytes) / batches) : 0;
		if (len < ((size_t)1 << 20))
			len = (size_t)1 << 20;
		int prc = rc_feeder_h2d_peak(o.device, len, 20, &peak, perr, sizeof perr);
		printf("  %-28s %14.2f\n", "h2d GB/s (feeder, events)", h2d);
		if (prc == 0) {
			printf("  %-28s %14.2f\n", "h2d GB/s (pinned cudaMemcpy)", peak);
			printf("  %-28s %14.2f\n", "h2d feeder / peak", peak > 0 ? h2d / peak : 0);
		} else {
			printf("  %-28s %14s  (%s)\n", "h2d GB/s (pinned cudaMemcpy)", "-", perr);
		}
	}
	rc_feeder_close(f);
	free(waits);
	return 0;
}
