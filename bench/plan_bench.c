/*
 * plan_bench.c - what planning costs: walks whole passes of the sampling
 * plan (common/plan.c) over N units and prints the time per pass, the
 * units per second and the plan's memory.  Prints, never asserts.
 *
 *   build/bench/plan_bench [UNITS] [RESIDENT_PERCENT]   # default 100000000 0
 *
 * One pass takes every unit through cmn_plan_next() and cmn_plan_done()
 * (what a sampler does, without the fetching); a second pass runs after
 * cmn_plan_roll() with RESIDENT_PERCENT of the units marked resident; the
 * settled state is then exported (the catalog's blob) and restored.
 */
#include "common/plan.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t pass(struct cmn_plan *p)
{
	uint64_t u, got = 0, sum = 0;
	while (cmn_plan_next(p, &u) == CMN_PLAN_UNIT) {
		sum += u;
		got++;
		cmn_plan_done(p, u);
	}
	if (sum == 1)
		printf(" ");
	return got;
}

int main(int argc, char **argv)
{
	uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 0) : 100000000ull;
	unsigned res_pct = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 0) : 0;
	struct cmn_plan *p;
	if (cmn_plan_new(&p, n, 1) != 0) {
		fprintf(stderr, "plan_bench: cannot make a plan of %" PRIu64 " units\n", n);
		return 1;
	}
	printf("units %" PRIu64 ", plan memory %.1f MiB (%.2f bits/unit)\n", n,
	       (double)cmn_plan_memory(p) / 1048576.0,
	       8.0 * (double)cmn_plan_memory(p) / (double)n);
	double t = now_s();
	uint64_t got = pass(p);
	double d = now_s() - t;
	printf("pass 0: %" PRIu64 " units in %.2f s (%.1f M units/s)\n", got, d,
	       (double)got / d / 1e6);

	cmn_plan_roll(p);
	for (uint64_t u = 0; u < n; u++)
		if (u % 100 < res_pct)
			cmn_plan_set_resident(p, u, true);
	t = now_s();
	got = pass(p);
	d = now_s() - t;
	printf("pass 1 (%u%% resident): %" PRIu64 " units fetched in %.2f s\n", res_pct, got, d);

	uint8_t *bits = malloc((size_t)((n + 7) / 8));
	struct cmn_plan_state st;
	struct cmn_plan *q;
	t = now_s();
	cmn_plan_get_state(p, &st);
	cmn_plan_export_taken(p, bits);
	int rc = cmn_plan_restore(&q, &st, bits, (size_t)((n + 7) / 8), NULL, 0);
	d = now_s() - t;
	printf("export + restore of the state (%.1f MiB blob): %.2f s%s\n",
	       (double)((n + 7) / 8) / 1048576.0, d, rc ? " FAILED" : "");
	if (!rc)
		cmn_plan_free(q);
	free(bits);
	cmn_plan_free(p);
	return 0;
}
