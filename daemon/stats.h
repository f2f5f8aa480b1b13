/*
 * stats.h - the texts of MOUNTPOINT/.rollcache/stats (JSON) and
 * .rollcache/metrics (Prometheus text format 0.0.4).
 *
 * The daemon gathers one struct dmn_stats_view (catalog rows, budget, view
 * counters, sampler counters; control.c's dmn__render) and these
 * functions only format it, so the formats are unit-testable without a
 * mount.  One table (dmn_stats_fields()) names every figure once: its
 * place in the JSON, its metric, its meaning; both texts are written from
 * it.  Field meanings: docs/mount.md, docs/counters.md.
 */
#ifndef RC_DAEMON_STATS_H
#define RC_DAEMON_STATS_H

#include "cachefs/catalog.h"
#include "common/log.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Sampler counters as the stats texts show them (sums of smp_stats). */
struct dmn_sampler_stats {
	bool present; /* samplers configured and running */
	bool idle;    /* the current pass ended: no more data is coming this epoch */
	uint64_t requests, retries, http_4xx, http_408_429, http_5xx, timeouts, net_errors;
	uint64_t truncated, failed_objects, objects_partial, objects_done;
	uint64_t records_recovered, records_lost, records_resident_skipped, resumed_bytes,
	    enospc; /* docs/counters.md */
	uint64_t bytes_fetched, records_admitted, bytes_admitted, budget_waits;
	uint64_t partial_bytes; /* gauge (sampler/stats.h) */
	double ingest_bps;	/* admitted bytes/s over the last few seconds */
	double fetch_bps;
	bool stopped;		 /* the sampler run ended on a failure (error says why) */
	char error[512];	 /* that failure, or "" */
	bool waiting;		 /* the sampler waits out a failure that heals (a full disk,
				    a source that cannot be listed; sampler/sampler.h) */
	char state[800];	 /* "running", "idle", "waiting: <cause>, retry in N s" or
				    "stopped: <error>" */
	uint64_t listed_objects; /* objects in the source's last listing (gauge) */
};

struct dmn_stats_view {
	int pid;
	const char *source;
	const char *cache_dir;
	const char *mountpoint;
	uint32_t epoch;
	bool have_epoch;
	const char *advance; /* "manual" | "auto" */
	const char *retire;  /* "boundary" | "read": from the next boundary on */
	uint64_t min_records;

	/* budget */
	uint64_t limit, admit, admit_used, reserved, sealed, draining, peak;
	uint32_t waiting_limit, waiting_admit;

	/* catalog: SEALED totals and the epochs rows */
	struct cfs_resident resident;
	uint64_t catalog_bytes; /* catalog.db + catalog.db-wal: two stat(2)s */
	const struct cfs_epoch_row *epochs;
	size_t n_epochs;

	/* view */
	uint32_t epochs_listed;
	uint64_t open_handles, draining_files;
	uint64_t retiring; /* bytes of evicted files `current` still lists */
	bool passthrough;  /* FUSE passthrough accepted by the kernel */
	uint64_t passthrough_opens, passthrough_refused; /* handles passed through; files refused */
	uint64_t current_files, current_bytes, current_records;
	uint64_t current_read_bytes; /* this epoch, including what is not flushed yet */
	uint64_t current_files_read_full;

	/* schedule entry in force and the last boundary */
	const char *schedule; /* evc_entry_describe() line */
	const char *policy;
	uint32_t min_uses;
	uint64_t entry_limit, entry_admit;
	uint64_t last_victims, last_evicted_bytes, last_admit;
	const char *last_reason; /* evc_reason_name() or "" */
	const char *last_why;
	const char *last_wait; /* why the last `next wait` went ahead, or "" */

	struct dmn_sampler_stats sampler;
	uint64_t errors_stats_flush, errors_boundary, errors_read;
	/* the last warnings and errors logged, oldest first (cmn_log_recent()) */
	const struct cmn_log_entry *recent;
	size_t n_recent;
	/* integrity (daemon/scrub.c; docs/reliability.md, "Integrity") */
	uint64_t errors_corrupt;     /* sealed files found corrupt and dropped, each once */
	const char *verity;	     /* "on", or why not (cfs_store_verity) */
	uint64_t scrub_rate;	     /* bytes/s; 0: the scrubber is off */
	uint64_t scrub_passes;	     /* whole scrub passes over the resident files */
	uint64_t scrub_bytes;	     /* file bytes the scrubber checked */
	uint64_t scrub_files;	     /* files the scrubber checked to the end and found good */
	uint64_t scrub_last_pass_ms; /* duration of the last whole pass; 0: none yet */
	uint64_t scrub_period_s;     /* a pass over a full cache at scrub_rate: limit/rate, +1 s */
	uint64_t verified_bytes;     /* file bytes checked by first-pass reads */
	uint64_t verified_files;     /* files whose first pass checked every record */
	uint64_t rechecked_files;    /* files checked again: their ctime changed after a check */
	uint64_t stale_files;	     /* files withdrawn: they held records of a changed object */
	uint64_t stale_moved;	     /* records of current objects copied out of those files */
	double uptime_s;
};

/* Cap on one stats text (JSON or metrics); the CLI reads the JSON with it. */
#define DMN_STATS_TEXT_MAX ((size_t)16 << 20)

/* How a figure is stored in struct dmn_stats_view, and written. */
enum dmn_stats_type {
	DMN_STATS_U64,	  /* uint64_t */
	DMN_STATS_U32,	  /* uint32_t */
	DMN_STATS_INT,	  /* int */
	DMN_STATS_BOOL,	  /* bool: JSON true/false, metric 1/0 */
	DMN_STATS_STR,	  /* const char *, NULL read as "" (JSON only) */
	DMN_STATS_CHARS,  /* char[], NUL-terminated (JSON only) */
	DMN_STATS_RATE,	  /* double: the JSON rounds it to an integer, the metric does not */
	DMN_STATS_TENTHS, /* double: the JSON keeps one decimal */
	DMN_STATS_GET,	  /* computed by get(); JSON null when get() says there is none */
	DMN_STATS_EPOCHS, /* the epochs[] array of catalog rows (JSON only) */
	DMN_STATS_LAST,	  /* the newest entry of recent[] as an object, or null (JSON only) */
	DMN_STATS_RECENT, /* recent[] as an array, oldest first (JSON only) */
};

/* Flags of a figure. */
enum {
	DMN_STATS_COUNTER = 1,	/* only grows: metric TYPE counter (else gauge) */
	DMN_STATS_ERROR = 2,	/* a kind of error: errors.<key>, rollcache_errors_total{kind} */
	DMN_STATS_TRANSFER = 4, /* a failed transfer (what /healthz counts); in sampler */
};

/*
 * One figure of the stats texts.  path is its place in the JSON: "key" at
 * the top level or "object.key" one level down, in the JSON's order; NULL
 * when only the metrics show it.  metric is its Prometheus name without
 * the "rollcache_" prefix, NULL when only the JSON shows it.
 */
struct dmn_stats_field {
	const char *path;
	enum dmn_stats_type type;
	size_t off; /* offsetof(struct dmn_stats_view, ...) of the value */
	bool (*get)(const struct dmn_stats_view *v, uint64_t *out); /* DMN_STATS_GET */
	const char *metric;
	const char *help; /* what it means, in one line (the metric's HELP) */
	const char *unit; /* "bytes", "files", "records", ...; "" when none */
	unsigned flags;
};

/* The table, in the JSON's order; *n rows.  Static: never freed. */
const struct dmn_stats_field *dmn_stats_fields(size_t *n);

/*
 * Renders the JSON text (jansson, keys in a fixed order, one trailing
 * newline) into a malloc'd NUL-terminated buffer *out (*len without the
 * NUL).  Returns 0, or -ENOMEM (nothing allocated); -EFBIG past max bytes.
 */
int dmn_stats_json(const struct dmn_stats_view *v, size_t max, char **out, size_t *len);

/*
 * Renders the Prometheus text likewise.  Same returns.  The rows flagged
 * DMN_STATS_ERROR (the stats JSON's "errors" object) are one series each,
 * rollcache_errors_total{kind="http_5xx"} and so on.
 */
int dmn_stats_metrics(const struct dmn_stats_view *v, size_t max, char **out, size_t *len);

/*
 * What GET /healthz answers (daemon/metrics_http.c), from the samplers'
 * counters at successive probes.  The source "fails" from a probe that
 * finds more transfer errors (the rows flagged DMN_STATS_TRANSFER: HTTP
 * 4xx/5xx/408/429, timeouts, network errors, truncated bodies) than the one before and nothing new
 * admitted (records, objects done), until a probe finds something admitted.  Owned by one thread;
 * zeroed = no probe yet.
 */
struct dmn_health {
	uint64_t errors, progress; /* at the last probe; progress: records + objects done */
	bool failing;
	uint64_t failing_since_ms, failing_errors; /* errors when it began */
};

/*
 * One probe at now_ms.  Returns true (healthy) or false with a one-line
 * reason in why[len]: the samplers stopped (and their error), or the
 * source fails.  Updates *h.
 */
bool dmn_stats_health(struct dmn_health *h, const struct dmn_sampler_stats *s, uint64_t now_ms,
		      char *why, size_t len);

#endif
