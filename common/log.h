/*
 * log.h - the one logging function of rollcache.
 *
 * Library code never printf()s: it calls cmn_log().  The CLI sets the level
 * and may route lines to syslog once daemonized; libfuse's log is routed here
 * by cachefs.  Secrets (credentials, signatures) are never passed to it.
 */
#ifndef RC_COMMON_LOG_H
#define RC_COMMON_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum cmn_log_level {
	CMN_LOG_ERROR = 0,
	CMN_LOG_WARN = 1,
	CMN_LOG_INFO = 2,
	CMN_LOG_DEBUG = 3,
};

/* A sink receives one formatted line without the trailing newline. */
typedef void (*cmn_log_sink)(enum cmn_log_level level, const char *line, void *ctx);

/*
 * Logs one line at `level` if it is at or below the current level.  Safe to
 * call from any thread; lines from different threads never interleave.
 */
void cmn_log(enum cmn_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cmn_vlog(enum cmn_log_level level, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

/* Sets the threshold (default CMN_LOG_WARN, or $ROLLCACHE_LOG=error|warn|info|debug). */
void cmn_log_set_level(enum cmn_log_level level);
enum cmn_log_level cmn_log_get_level(void);

/* Replaces the sink (default: "rollcache: <level>: <line>" on stderr); NULL restores it. */
void cmn_log_set_sink(cmn_log_sink sink, void *ctx);

/*
 * Sends the log to `path` (opened for appending, created if absent), one
 * line each: "2026-11-25T19:40:00.123Z rollcache[PID]: warn: line"; with
 * tee_stderr the usual stderr line too.  It takes precedence over the
 * sink until cmn_log_close_file().  Returns 0, or -errno (the log is then
 * unchanged).  Any thread.
 */
int cmn_log_open_file(const char *path, bool tee_stderr);
void cmn_log_close_file(void);

/* How many distinct warnings and errors cmn_log_recent() keeps. */
#define CMN_LOG_RECENT	 8
#define CMN_LOG_LINE_MAX 1024 /* longer lines are cut and end in "..." */

/* One line logged at CMN_LOG_WARN or CMN_LOG_ERROR. */
struct cmn_log_entry {
	enum cmn_log_level level;
	uint64_t unix_ms; /* wall-clock time of its latest logging, ms since 1970 */
	uint64_t count;	  /* times it was logged in a row (the same level and text) */
	char line[CMN_LOG_LINE_MAX];
};

/*
 * The last lines logged at CMN_LOG_WARN or CMN_LOG_ERROR (whatever the
 * threshold), oldest first, into out[0..n): at most CMN_LOG_RECENT, the
 * newest when n is smaller.  A line logged again right after itself (same
 * level and text) is one entry whose count and time grow.  Returns how
 * many were written, 0 when none was logged.  Any thread.
 */
size_t cmn_log_recent(struct cmn_log_entry *out, size_t n);

/* "error", "warn", "info" or "debug". */
const char *cmn_log_level_name(enum cmn_log_level level);

/* Parses "error", "warn", "info", "debug"; returns 0 or -EINVAL. */
int cmn_log_parse_level(const char *s, enum cmn_log_level *out);

#endif
