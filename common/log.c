/*
 * log.c - levels, one sink, one mutex.
 *
 * Owns the process-wide log threshold and sink.  Formatting happens into a
 * bounded stack buffer (lines longer than 1 KiB are cut and end in "...").
 *
 * Locking: log_mu serialises sink calls and sink changes; the level is an
 * atomic read so that a disabled level costs one load.
 */
#include "common/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOG_LINE_MAX 1024

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static cmn_log_sink log_sink;	  /* protected by log_mu; NULL = stderr */
static void *log_sink_ctx;	  /* protected by log_mu */
static atomic_int log_level = -1; /* -1: not yet read from the environment */

static const char *const level_names[] = {"error", "warn", "info", "debug"};

int cmn_log_parse_level(const char *s, enum cmn_log_level *out)
{
	for (int i = 0; i < 4; i++) {
		if (strcmp(s, level_names[i]) == 0) {
			*out = (enum cmn_log_level)i;
			return 0;
		}
	}
	return -EINVAL;
}

enum cmn_log_level cmn_log_get_level(void)
{
	int lv = atomic_load_explicit(&log_level, memory_order_relaxed);
	if (lv < 0) {
		enum cmn_log_level parsed = CMN_LOG_WARN;
		const char *env = getenv("ROLLCACHE_LOG");
		if (env && cmn_log_parse_level(env, &parsed) != 0)
			parsed = CMN_LOG_WARN;
		lv = (int)parsed;
		atomic_store(&log_level, lv);
	}
	return (enum cmn_log_level)lv;
}

void cmn_log_set_level(enum cmn_log_level level)
{
	atomic_store(&log_level, (int)level);
}

void cmn_log_set_sink(cmn_log_sink sink, void *ctx)
{
	pthread_mutex_lock(&log_mu);
	log_sink = sink;
	log_sink_ctx = ctx;
	pthread_mutex_unlock(&log_mu);
}

void cmn_vlog(enum cmn_log_level level, const char *fmt, va_list ap)
{
	char line[LOG_LINE_MAX];
	int n;

	if ((int)level > (int)cmn_log_get_level())
		return;
	n = vsnprintf(line, sizeof(line), fmt, ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(line))
		memcpy(line + sizeof(line) - 4, "...", 4);

	pthread_mutex_lock(&log_mu);
	if (log_sink)
		log_sink(level, line, log_sink_ctx);
	else
		fprintf(stderr, "rollcache: %s: %s\n", level_names[level], line);
	pthread_mutex_unlock(&log_mu);
}

void cmn_log(enum cmn_log_level level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	cmn_vlog(level, fmt, ap);
	va_end(ap);
}
