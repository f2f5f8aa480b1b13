/*
 * clock.h - the clocks of rollcache, one of each.
 *
 * Monotonic clocks time intervals (rates, timeouts, benchmarks); the wall
 * clock stamps what is stored or shown to people (catalog rows, last read
 * times).  Never mix them in one subtraction.
 */
#ifndef RC_COMMON_CLOCK_H
#define RC_COMMON_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC in nanoseconds, milliseconds and (fractional) seconds. */
uint64_t cmn_mono_ns(void);
uint64_t cmn_mono_ms(void);
double cmn_mono_s(void);

/* CLOCK_REALTIME in milliseconds since the Unix epoch. */
uint64_t cmn_wall_ms(void);

struct timespec;

/*
 * The CLOCK_MONOTONIC instant `ms` from now, for pthread_cond_timedwait on
 * a condition created with pthread_condattr_setclock(CLOCK_MONOTONIC).
 */
void cmn_mono_deadline(struct timespec *ts, uint32_t ms);

#endif
