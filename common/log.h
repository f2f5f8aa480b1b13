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

/*
 * The last line logged at CMN_LOG_WARN or CMN_LOG_ERROR (whatever the
 * threshold) and its wall-clock time in ms since 1970.  Returns false when
 * there was none (buf and the outputs untouched).  Any thread.
 */
bool cmn_log_last(char *buf, size_t len, enum cmn_log_level *level, uint64_t *unix_ms);

/* "error", "warn", "info" or "debug". */
const char *cmn_log_level_name(enum cmn_log_level level);

/* Parses "error", "warn", "info", "debug"; returns 0 or -EINVAL. */
int cmn_log_parse_level(const char *s, enum cmn_log_level *out);

#endif
