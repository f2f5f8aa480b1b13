/*
 * bench.h - the benchmarks of the `rollcache-bench` program (bench/meson.build),
 * one per part of rollcache, dispatched by main.c.
 *
 * Each takes argv with argv[0] = the benchmark's name and returns the exit
 * code: 0 ok, 1 runtime failure, 2 usage error.  Each prints a figure table
 * on stdout; none asserts a figure (docs/benchmarks.md).
 */
#ifndef RC_BENCH_ROLLCACHE_BENCH_H
#define RC_BENCH_ROLLCACHE_BENCH_H

int bench_sampler(int argc, char **argv);
int bench_feeder(int argc, char **argv);
int bench_fuse(int argc, char **argv);
int bench_catalog(int argc, char **argv);

#endif
