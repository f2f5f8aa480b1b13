/*
 * main.c - `rollcache-bench KIND ...`: dispatch to the benchmark of one
 * part.  Each benchmark prints a figure table that compares rollcache with a
 * peer measured in the same run (see docs/benchmarks.md).
 *
 * A program of its own, built in bench/ and not installed, so that the
 * `rollcache` users run links no measuring code.  A kind whose source is
 * not built in this configuration is still listed and says so.
 */
#include "bench/rollcache_bench/bench.h"

#include <stdio.h>
#include <string.h>

typedef int (*bench_fn)(int argc, char **argv);

struct bench_kind {
	const char *name;
	bench_fn fn; /* NULL when not built in this configuration */
	const char *what;
};

#ifdef HAVE_BENCH_SAMPLER
#define BENCH_SAMPLER bench_sampler
#else
#define BENCH_SAMPLER NULL
#endif
#ifdef HAVE_BENCH_FEEDER
#define BENCH_FEEDER bench_feeder
#else
#define BENCH_FEEDER NULL
#endif
#ifdef HAVE_BENCH_FUSE
#define BENCH_FUSE bench_fuse
#else
#define BENCH_FUSE NULL
#endif
#ifdef HAVE_BENCH_CATALOG
#define BENCH_CATALOG bench_catalog
#else
#define BENCH_CATALOG NULL
#endif

static const struct bench_kind kinds[] = {
    {"fuse", BENCH_FUSE, "reads through a mount against direct reads of the same files"},
    {"sampler", BENCH_SAMPLER, "ingest throughput against curl --parallel on the same objects"},
    {"feeder", BENCH_FEEDER, "records/s, MB/s, CPU-s/GB and consumer wait of the native feeder"},
    {"catalog", BENCH_CATALOG, "SQLite catalog insert and snapshot rates"},
};

static void usage(FILE *out)
{
	fprintf(out, "usage: rollcache-bench KIND [ARGS...]\n\nkinds:\n");
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		fprintf(out, "  %-8s %s%s\n", kinds[i].name, kinds[i].what,
			kinds[i].fn ? "" : " (not built)");
	fprintf(out, "\n`rollcache-bench KIND --help` describes its arguments.\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage(stdout);
		return 0;
	}
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		if (strcmp(argv[1], kinds[i].name) != 0)
			continue;
		if (!kinds[i].fn) {
			fprintf(stderr, "rollcache-bench %s: not built in this configuration\n",
				kinds[i].name);
			return 1;
		}
		return kinds[i].fn(argc - 1, argv + 1);
	}
	fprintf(stderr,
		"rollcache-bench: unknown kind '%s': expected fuse, sampler, feeder or catalog\n",
		argv[1]);
	return 2;
}
