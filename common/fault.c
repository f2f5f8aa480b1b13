/*
 * fault.c - named crash points (fault.h): RC_FAULT=point:n ends the process
 * at the n-th pass through cmn_fault("point").
 *
 * Owns the parsed RC_FAULT value and one pass counter per point.  Does not
 * decide where the points are (their callers do; the list below is only
 * there to refuse a misspelt name) and does not log through cmn_log: the
 * line it writes before exiting goes straight to fd 2 with write(2), which
 * is safe in any state the caller is in (locks held, inside a transaction).
 *
 * Grammar: RC_FAULT = point ":" n, n a decimal >= 1 (one point per process:
 * a crash ends it).  Unset or empty: every call returns at once.
 *
 * Locking: the value is parsed once under pthread_once; `armed` and the
 * counters are atomics, so any thread may pass a point.
 */
#include "common/fault.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const points[] = {
    "before_rename", "before_commit", "in_commit",   "evict",
    "reconcile",     "plan_partial",  "before_sync",
};
#define NPOINTS (sizeof(points) / sizeof(points[0]))

enum { UNPARSED, OFF, ON };

static atomic_int armed = UNPARSED;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static size_t target;		  /* index in points[] of RC_FAULT's point */
static unsigned long target_pass; /* RC_FAULT's n */
static atomic_ulong passes;	  /* passes through the target point so far */

static void say(const char *a, const char *b, const char *c)
{
	char line[512];
	int n = snprintf(line, sizeof(line), "rollcache: RC_FAULT: %s%s%s\n", a, b, c);
	if (n > 0)
		(void)!write(2, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

static size_t point_index(const char *name, size_t len)
{
	for (size_t i = 0; i < NPOINTS; i++)
		if (strlen(points[i]) == len && !memcmp(points[i], name, len))
			return i;
	return NPOINTS;
}

static void parse(void)
{
	const char *v = getenv("RC_FAULT");
	const char *colon;
	char *end;

	if (!v || !*v) {
		atomic_store(&armed, OFF);
		return;
	}
	colon = strchr(v, ':');
	if (colon)
		target = point_index(v, (size_t)(colon - v));
	if (!colon || target == NPOINTS) {
		say("`", v,
		    "`: expected point:n with point one of before_rename, before_commit, "
		    "in_commit, evict, reconcile, plan_partial, before_sync");
		_exit(2);
	}
	target_pass = strtoul(colon + 1, &end, 10);
	if (*end || end == colon + 1 || colon[1] == '-' || target_pass == 0) {
		say("`", v, "`: n must be a whole number >= 1 (the pass that crashes)");
		_exit(2);
	}
	atomic_store(&passes, 0);
	atomic_store(&armed, ON);
}

void cmn_fault(const char *name)
{
	int a = atomic_load_explicit(&armed, memory_order_acquire);
	if (a == UNPARSED) {
		pthread_once(&once, parse);
		a = atomic_load_explicit(&armed, memory_order_acquire);
	}
	if (a != ON)
		return;
	size_t i = point_index(name, strlen(name));
	if (i == NPOINTS) {
		say("cmn_fault(\"", name, "\"): not a crash point of fault.c");
		abort();
	}
	if (i != target)
		return;
	if (atomic_fetch_add(&passes, 1) + 1 == target_pass) {
		say("crash at ", name, " (as kill -9 would)");
		_exit(CMN_FAULT_EXIT);
	}
}
