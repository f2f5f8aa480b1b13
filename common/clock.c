/*
 * clock.c - the clocks of rollcache (see clock.h).
 *
 * Thin wrappers over clock_gettime(); they cannot fail on Linux for these
 * clock ids, so they return values, not errors.
 */
#include "common/clock.h"

#include <time.h>

static uint64_t ns_of(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t cmn_mono_ns(void)
{
	return ns_of(CLOCK_MONOTONIC);
}

uint64_t cmn_mono_ms(void)
{
	return ns_of(CLOCK_MONOTONIC) / 1000000u;
}

double cmn_mono_s(void)
{
	return (double)ns_of(CLOCK_MONOTONIC) / 1e9;
}

uint64_t cmn_wall_ms(void)
{
	return ns_of(CLOCK_REALTIME) / 1000000u;
}

void cmn_mono_deadline(struct timespec *ts, uint32_t ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000u;
	ts->tv_nsec += (long)(ms % 1000u) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}
