/*
 * log.c - levels, one sink, one mutex; the log file; the last problem.
 *
 * Owns the process-wide log threshold and sink, the log file
 * (cmn_log_open_file: appended, one timestamped line each, optionally also
 * on stderr), and the last CMN_LOG_RECENT warnings and errors logged with
 * their wall-clock time (cmn_log_recent), which `rollcache status` shows so
 * that a failure after start-up is visible without reading syslog.
 * Formatting happens into a bounded stack buffer (lines longer than 1 KiB
 * are cut and end in "...").
 *
 * Locking: log_mu serialises sink calls and sink changes and protects the
 * file and the recent problems; the level is an atomic read so that a
 * disabled level costs one load.
 */
#include "common/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LOG_LINE_MAX CMN_LOG_LINE_MAX

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static cmn_log_sink log_sink;	  /* protected by log_mu; NULL = stderr */
static void *log_sink_ctx;	  /* protected by log_mu */
static atomic_int log_level = -1; /* -1: not yet read from the environment */
static FILE *log_file;		  /* protected by log_mu; cmn_log_open_file's sink */
static bool log_file_tee;	  /* protected by log_mu; also stderr */
/* the last WARN/ERROR lines, a ring: recent[(recent_next - 1) % CMN_LOG_RECENT] is the newest */
static struct cmn_log_entry recent[CMN_LOG_RECENT]; /* protected by log_mu */
static uint64_t recent_next;			    /* protected by log_mu; entries ever added */

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

/* One line of the log file: "2026-11-25T19:40:00.123Z rollcache[PID]: level: line". */
static void file_line(enum cmn_log_level level, const char *line, const struct timespec *now)
{
	struct tm tm;
	char stamp[32];
	gmtime_r(&now->tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	fprintf(log_file, "%s.%03ldZ rollcache[%ld]: %s: %s\n", stamp, now->tv_nsec / 1000000L,
		(long)getpid(), level_names[level], line);
	fflush(log_file);
}

/* Adds line to the ring, or counts it again when it repeats the newest. Under log_mu. */
static void recent_add(enum cmn_log_level level, const char *line, const struct timespec *now)
{
	struct cmn_log_entry *e = &recent[(recent_next + CMN_LOG_RECENT - 1) % CMN_LOG_RECENT];
	if (recent_next == 0 || e->level != level || strcmp(e->line, line) != 0) {
		e = &recent[recent_next++ % CMN_LOG_RECENT];
		e->level = level;
		e->count = 0;
		snprintf(e->line, sizeof(e->line), "%s", line);
	}
	e->count++;
	e->unix_ms = (uint64_t)now->tv_sec * 1000u + (uint64_t)now->tv_nsec / 1000000u;
}

void cmn_vlog(enum cmn_log_level level, const char *fmt, va_list ap)
{
	char line[LOG_LINE_MAX];
	int n;
	bool shown = (int)level <= (int)cmn_log_get_level();

	if (!shown && level > CMN_LOG_WARN)
		return;
	n = vsnprintf(line, sizeof(line), fmt, ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(line))
		memcpy(line + sizeof(line) - 4, "...", 4);

	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	pthread_mutex_lock(&log_mu);
	if (level <= CMN_LOG_WARN) /* kept for status even below the threshold */
		recent_add(level, line, &now);
	if (!shown) {
		pthread_mutex_unlock(&log_mu);
		return;
	}
	if (log_file) {
		file_line(level, line, &now);
		if (log_file_tee)
			fprintf(stderr, "rollcache: %s: %s\n", level_names[level], line);
	} else if (log_sink) {
		log_sink(level, line, log_sink_ctx);
	} else {
		fprintf(stderr, "rollcache: %s: %s\n", level_names[level], line);
	}
	pthread_mutex_unlock(&log_mu);
}

int cmn_log_open_file(const char *path, bool tee_stderr)
{
	FILE *f = fopen(path, "ae"); /* O_APPEND | O_CLOEXEC, created 0666 & ~umask */
	if (!f)
		return -errno;
	pthread_mutex_lock(&log_mu);
	FILE *old = log_file;
	log_file = f;
	log_file_tee = tee_stderr;
	pthread_mutex_unlock(&log_mu);
	if (old)
		fclose(old);
	return 0;
}

void cmn_log_close_file(void)
{
	pthread_mutex_lock(&log_mu);
	FILE *old = log_file;
	log_file = NULL;
	pthread_mutex_unlock(&log_mu);
	if (old)
		fclose(old);
}

size_t cmn_log_recent(struct cmn_log_entry *out, size_t n)
{
	pthread_mutex_lock(&log_mu);
	size_t have = recent_next < CMN_LOG_RECENT ? (size_t)recent_next : CMN_LOG_RECENT;
	if (n > have)
		n = have;
	for (size_t i = 0; i < n; i++) /* the newest n, oldest first */
		out[i] = recent[(recent_next - n + i) % CMN_LOG_RECENT];
	pthread_mutex_unlock(&log_mu);
	return n;
}

const char *cmn_log_level_name(enum cmn_log_level level)
{
	return level_names[level];
}

void cmn_log(enum cmn_log_level level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	cmn_vlog(level, fmt, ap);
	va_end(ap);
}
