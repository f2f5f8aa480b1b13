/*
 * stats.c - formats the stats JSON and the Prometheus metrics of a mount,
 * and decides what GET /healthz answers from the samplers' counters
 * (dmn_stats_health(), a pure function of them and the previous probe).
 *
 * Owns only the text formats (docs/mount.md lists every field).  Gathering
 * the figures is daemon.c's job; nothing here locks, reads the catalog or
 * touches FUSE.  JSON goes through jansson (strings escaped by it); the
 * metrics text through a buffer capped at `max`, so a huge catalog cannot
 * make a stats read allocate without bound.
 */
#include "daemon/stats.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A growing text buffer with a hard cap (metrics only). */
struct sbuf {
	char *p;
	size_t len, cap, max;
	int err; /* -EFBIG: an append did not fit under max; -ENOMEM */
};

static void sbuf_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sbuf_printf(struct sbuf *b, const char *fmt, ...)
{
	if (b->err)
		return;
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		size_t room = b->cap - b->len;
		int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? room : 0, fmt, ap);
		va_end(ap);
		if (n < 0 || b->len + (size_t)n + 1 > b->max) {
			b->err = -EFBIG;
			return;
		}
		if (b->p && (size_t)n < room) {
			b->len += (size_t)n;
			return;
		}
		size_t want = b->len + (size_t)n + 1;
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < want)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p) {
			b->err = -ENOMEM;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
}

static void set_u64(json_t *o, const char *k, uint64_t v)
{
	json_object_set_new(o, k, json_integer((json_int_t)v));
}

static void set_str(json_t *o, const char *k, const char *v)
{
	/* jansson wants UTF-8; a source URL or path that is not stays visible, escaped */
	json_t *s = json_string(v ? v : "");
	if (!s) {
		char buf[1024];
		size_t o2 = 0;
		for (const unsigned char *p = (const unsigned char *)v; *p && o2 + 5 < sizeof(buf);
		     p++) {
			if (*p < 0x80)
				buf[o2++] = (char)*p;
			else
				o2 += (size_t)snprintf(buf + o2, sizeof(buf) - o2, "\\x%02x", *p);
		}
		buf[o2] = '\0';
		s = json_string(buf);
	}
	json_object_set_new(o, k, s);
}

static json_t *obj_in(json_t *parent, const char *k)
{
	json_t *o = json_object();
	json_object_set_new(parent, k, o);
	return o;
}

int dmn_stats_json(const struct dmn_stats_view *v, size_t max, char **out, size_t *len)
{
	uint64_t used = v->reserved + v->sealed + v->draining;
	json_t *root = json_object(), *o;
	if (!root)
		return -ENOMEM;
	if (v->have_epoch)
		set_u64(root, "epoch", v->epoch);
	else
		json_object_set_new(root, "epoch", json_null());
	set_u64(root, "limit", v->limit);
	set_u64(root, "used", used);
	set_str(root, "advance", v->advance);
	set_str(root, "retire", v->retire);
	set_u64(root, "min_records", v->min_records);
	json_object_set_new(root, "pid", json_integer(v->pid));
	set_str(root, "source", v->source);
	set_str(root, "cache_dir", v->cache_dir);
	set_str(root, "mountpoint", v->mountpoint);
	json_object_set_new(root, "uptime_s",
			    json_real((double)(long long)(v->uptime_s * 10) / 10));

	o = obj_in(root, "resident");
	set_u64(o, "files", v->resident.files);
	set_u64(o, "bytes", v->resident.bytes);
	set_u64(o, "records", v->resident.records);
	o = obj_in(root, "disk");
	set_u64(o, "sealed", v->sealed);
	set_u64(o, "reserved", v->reserved);
	set_u64(o, "draining", v->draining);
	set_u64(o, "draining_files", v->draining_files);
	set_u64(o, "used", used);
	set_u64(o, "peak", v->peak);
	set_u64(o, "limit", v->limit);
	o = obj_in(root, "admission");
	set_u64(o, "admit", v->admit);
	set_u64(o, "admit_used", v->admit_used);
	set_u64(o, "waiting_limit", v->waiting_limit);
	set_u64(o, "waiting_admit", v->waiting_admit);
	o = obj_in(root, "current");
	set_u64(o, "files", v->current_files);
	set_u64(o, "bytes", v->current_bytes);
	set_u64(o, "records", v->current_records);
	set_u64(o, "read_bytes", v->current_read_bytes);
	set_u64(o, "files_read_full", v->current_files_read_full);
	o = obj_in(root, "view");
	set_u64(o, "epochs_listed", v->epochs_listed);
	set_u64(o, "open_handles", v->open_handles);
	json_object_set_new(o, "passthrough", json_boolean(v->passthrough));
	set_u64(o, "passthrough_opens", v->passthrough_opens);
	set_u64(o, "passthrough_refused", v->passthrough_refused);
	o = obj_in(root, "schedule");
	set_str(o, "entry", v->schedule);
	set_str(o, "policy", v->policy);
	set_u64(o, "limit", v->entry_limit);
	set_u64(o, "admit", v->entry_admit);
	set_u64(o, "min_uses", v->min_uses);
	o = obj_in(root, "last_boundary");
	set_u64(o, "victims", v->last_victims);
	set_u64(o, "evicted_bytes", v->last_evicted_bytes);
	set_u64(o, "admit", v->last_admit);
	set_str(o, "reason", v->last_reason);
	set_str(o, "why", v->last_why);
	set_str(o, "wait", v->last_wait);
	json_t *arr = json_array();
	json_object_set_new(root, "epochs", arr);
	for (size_t i = 0; i < v->n_epochs; i++) {
		const struct cfs_epoch_row *r = &v->epochs[i];
		json_t *e = json_object();
		json_array_append_new(arr, e);
		set_u64(e, "epoch", r->number);
		set_u64(e, "started_ms", r->started_ms);
		set_u64(e, "admitted_bytes", r->admitted_bytes);
		set_u64(e, "admitted_records", r->admitted_records);
		set_u64(e, "evicted_bytes", r->evicted_bytes);
		set_u64(e, "evicted_records", r->evicted_records);
		set_u64(e, "read_bytes", r->read_bytes);
		set_u64(e, "resident_files", r->resident_files);
		set_u64(e, "resident_bytes", r->resident_bytes);
		set_u64(e, "resident_records", r->resident_records);
		set_u64(e, "limit", r->limit);
		set_u64(e, "admit", r->admit);
		set_str(e, "policy", r->policy);
	}
	const struct dmn_sampler_stats *s = &v->sampler;
	o = obj_in(root, "sampler");
	json_object_set_new(o, "present", json_boolean(s->present));
	json_object_set_new(o, "idle", json_boolean(s->idle));
	set_u64(o, "ingest_bytes_per_s", (uint64_t)(s->ingest_bps > 0 ? s->ingest_bps + 0.5 : 0));
	set_u64(o, "fetch_bytes_per_s", (uint64_t)(s->fetch_bps > 0 ? s->fetch_bps + 0.5 : 0));
	set_u64(o, "bytes_admitted", s->bytes_admitted);
	set_u64(o, "records_admitted", s->records_admitted);
	set_u64(o, "bytes_fetched", s->bytes_fetched);
	set_u64(o, "objects_done", s->objects_done);
	set_u64(o, "requests", s->requests);
	set_u64(o, "retries", s->retries);
	set_u64(o, "budget_waits", s->budget_waits);
	set_u64(o, "partial_bytes", s->partial_bytes);
	set_u64(o, "records_recovered", s->records_recovered);
	set_u64(o, "records_resident_skipped", s->records_resident_skipped);
	set_u64(o, "resumed_bytes", s->resumed_bytes);
	json_object_set_new(o, "stopped", json_boolean(s->stopped));
	set_str(o, "error", s->error);
	set_str(o, "state", s->state);
	set_u64(o, "listed_objects", s->listed_objects);
	o = obj_in(root, "errors");
	set_u64(o, "http_4xx", s->http_4xx);
	set_u64(o, "http_408_429", s->http_408_429);
	set_u64(o, "http_5xx", s->http_5xx);
	set_u64(o, "timeouts", s->timeouts);
	set_u64(o, "net_errors", s->net_errors);
	set_u64(o, "truncated", s->truncated);
	set_u64(o, "records_lost", s->records_lost);
	set_u64(o, "failed_objects", s->failed_objects);
	set_u64(o, "enospc", s->enospc);
	set_u64(o, "stats_flush", v->errors_stats_flush);
	set_u64(o, "boundary", v->errors_boundary);
	set_u64(o, "read", v->errors_read);
	set_u64(o, "corrupt", v->errors_corrupt);
	o = obj_in(root, "integrity");
	set_u64(o, "scrub_rate", v->scrub_rate);
	set_u64(o, "scrub_passes", v->scrub_passes);
	set_u64(o, "scrub_bytes", v->scrub_bytes);
	set_u64(o, "scrub_files", v->scrub_files);
	set_u64(o, "scrub_last_pass_ms", v->scrub_last_pass_ms);
	set_u64(o, "verified_bytes", v->verified_bytes);
	set_u64(o, "verified_files", v->verified_files);
	/* the last warning or error logged, with its time: null when none */
	if (v->last_error_unix_ms) {
		o = obj_in(root, "last_error");
		set_str(o, "level", v->last_error_level);
		set_str(o, "message", v->last_error);
		set_u64(o, "unix_ms", v->last_error_unix_ms);
	} else {
		json_object_set_new(root, "last_error", json_null());
	}

	char *text =
	    json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));
	json_decref(root);
	if (!text)
		return -ENOMEM;
	size_t n = strlen(text);
	if (n + 2 > max) {
		free(text);
		return -EFBIG;
	}
	char *p = realloc(text, n + 2);
	if (!p) {
		free(text);
		return -ENOMEM;
	}
	p[n] = '\n';
	p[n + 1] = '\0';
	*out = p;
	*len = n + 1;
	return 0;
}

static void metric(struct sbuf *b, const char *name, const char *type, const char *help,
		   double value)
{
	sbuf_printf(b, "# HELP rollcache_%s %s\n# TYPE rollcache_%s %s\nrollcache_%s %.17g\n", name,
		    help, name, type, name, value);
}

int dmn_stats_metrics(const struct dmn_stats_view *v, size_t max, char **out, size_t *len)
{
	struct sbuf sb = {.max = max}, *b = &sb;
	const struct dmn_sampler_stats *s = &v->sampler;
	uint64_t admitted = 0, evicted = 0;
	for (size_t i = 0; i < v->n_epochs; i++) {
		if (v->have_epoch && v->epochs[i].number == v->epoch) {
			admitted = v->epochs[i].admitted_bytes;
			evicted = v->epochs[i].evicted_bytes;
		}
	}
	metric(b, "epoch", "gauge", "Current epoch number.", v->have_epoch ? v->epoch : 0);
	metric(b, "limit_bytes", "gauge", "Hard bound on bytes on disk.", (double)v->limit);
	metric(b, "used_bytes", "gauge", "Bytes on disk: sealed + reserved + draining.",
	       (double)(v->sealed + v->reserved + v->draining));
	metric(b, "sealed_bytes", "gauge", "Bytes of sealed resident files.", (double)v->sealed);
	metric(b, "reserved_bytes", "gauge", "Bytes reserved by writers.", (double)v->reserved);
	metric(b, "draining_bytes", "gauge", "Bytes of evicted files still open.",
	       (double)v->draining);
	metric(b, "resident_files", "gauge", "Sealed resident files.", (double)v->resident.files);
	metric(b, "resident_records", "gauge", "Records in sealed resident files.",
	       (double)v->resident.records);
	metric(b, "current_files", "gauge", "Files in the current epoch.",
	       (double)v->current_files);
	metric(b, "current_records", "gauge", "Records in the current epoch.",
	       (double)v->current_records);
	metric(b, "min_records", "gauge", "Records `epoch next --wait` waits for.",
	       (double)v->min_records);
	metric(b, "epoch_admitted_bytes", "gauge", "Bytes admitted during the current epoch.",
	       (double)admitted);
	metric(b, "epoch_evicted_bytes", "gauge", "Bytes evicted at the current epoch's start.",
	       (double)evicted);
	metric(b, "epoch_read_bytes", "gauge", "Bytes read through the mount this epoch.",
	       (double)v->current_read_bytes);
	metric(b, "admit_bytes", "gauge", "Admit budget of the current epoch.", (double)v->admit);
	metric(b, "admit_used_bytes", "gauge", "Admit budget used this epoch.",
	       (double)v->admit_used);
	metric(b, "open_handles", "gauge", "Open file handles on the mount.",
	       (double)v->open_handles);
	metric(b, "epochs_listed", "gauge", "Epoch directories still listed.",
	       (double)v->epochs_listed);
	metric(b, "passthrough", "gauge", "1 when the kernel serves reads of files served once.",
	       v->passthrough ? 1.0 : 0.0);
	metric(b, "passthrough_opens_total", "counter",
	       "Open handles passed through to the kernel.", (double)v->passthrough_opens);
	metric(b, "ingest_bytes_per_second", "gauge", "Admitted bytes per second, recent.",
	       s->ingest_bps);
	metric(b, "sampler_bytes_admitted_total", "counter", "Bytes admitted by the samplers.",
	       (double)s->bytes_admitted);
	metric(b, "sampler_records_admitted_total", "counter", "Records admitted.",
	       (double)s->records_admitted);
	metric(b, "sampler_bytes_fetched_total", "counter", "Body bytes received.",
	       (double)s->bytes_fetched);
	metric(b, "sampler_retries_total", "counter", "Transfer retries.", (double)s->retries);
	metric(b, "corrupt_files_total", "counter", "Sealed files found corrupt and dropped.",
	       (double)v->errors_corrupt);
	metric(b, "scrub_bytes_total", "counter", "File bytes the scrubber checked.",
	       (double)v->scrub_bytes);
	metric(b, "scrub_passes_total", "counter", "Whole scrub passes over the resident files.",
	       (double)v->scrub_passes);
	/* one series per kind: the keys of the stats JSON's "errors" */
	const struct {
		const char *kind;
		uint64_t n;
	} errs[] = {
	    {"http_4xx", s->http_4xx},
	    {"http_408_429", s->http_408_429},
	    {"http_5xx", s->http_5xx},
	    {"timeouts", s->timeouts},
	    {"net_errors", s->net_errors},
	    {"truncated", s->truncated},
	    {"records_lost", s->records_lost},
	    {"failed_objects", s->failed_objects},
	    {"enospc", s->enospc},
	    {"stats_flush", v->errors_stats_flush},
	    {"boundary", v->errors_boundary},
	    {"read", v->errors_read},
	    {"corrupt", v->errors_corrupt},
	};
	sbuf_printf(b, "# HELP rollcache_errors_total Errors by kind (the stats JSON's errors).\n"
		       "# TYPE rollcache_errors_total counter\n");
	for (size_t i = 0; i < sizeof(errs) / sizeof(errs[0]); i++)
		sbuf_printf(b, "rollcache_errors_total{kind=\"%s\"} %" PRIu64 "\n", errs[i].kind,
			    errs[i].n);
	metric(b, "sampler_records_recovered_total", "counter",
	       "Records with bad data that a retry read intact.", (double)s->records_recovered);
	metric(b, "sampler_records_lost_total", "counter",
	       "Records never admitted: bad on every attempt.", (double)s->records_lost);
	metric(b, "sampler_failed_objects_total", "counter",
	       "Objects given up, or read with a record lost.", (double)s->failed_objects);
	metric(b, "sampler_enospc_total", "counter", "Local writes that failed: disk full.",
	       (double)s->enospc);
	metric(b, "sampler_stopped", "gauge", "1 when the samplers stopped on a failure.",
	       s->stopped ? 1 : 0);
	metric(b, "sampler_idle", "gauge", "1 when the samplers have nothing more this epoch.",
	       s->idle ? 1 : 0);
	metric(b, "sampler_waiting", "gauge",
	       "1 while the samplers wait out a full disk or a source that cannot be listed.",
	       s->waiting ? 1 : 0);
	metric(b, "sampler_listed_objects", "gauge", "Objects in the source's last listing.",
	       (double)s->listed_objects);
	if (b->err) {
		free(b->p);
		return b->err;
	}
	*out = b->p;
	*len = b->len;
	return 0;
}

bool dmn_stats_health(struct dmn_health *h, const struct dmn_sampler_stats *s, uint64_t now_ms,
		      char *why, size_t len)
{
	uint64_t errors = s->http_4xx + s->http_408_429 + s->http_5xx + s->timeouts +
			  s->net_errors + s->truncated;
	/* an error answer's body counts in bytes_fetched: progress is what was admitted */
	uint64_t progress = s->records_admitted + s->objects_done;
	if (progress != h->progress) {
		h->failing = false;
	} else if (errors > h->errors && !h->failing) {
		h->failing = true;
		h->failing_since_ms = now_ms;
		h->failing_errors = h->errors;
	}
	h->errors = errors;
	h->progress = progress;
	if (s->present && s->stopped) {
		snprintf(why, len, "the samplers stopped: %s", s->error);
		for (char *p = why; *p; p++) /* one line */
			if (*p == '\n' || *p == '\r')
				*p = ' ';
		return false;
	}
	if (s->present && s->waiting) { /* a full disk, a source that cannot be listed */
		snprintf(why, len, "the samplers wait: %s", s->state);
		for (char *p = why; *p; p++)
			if (*p == '\n' || *p == '\r')
				*p = ' ';
		return false;
	}
	if (h->failing) {
		snprintf(why, len,
			 "the source fails: %" PRIu64 " transfer errors and nothing admitted "
			 "in %.0f s (see rollcache status)",
			 errors - h->failing_errors,
			 (double)(now_ms - h->failing_since_ms) / 1000.0);
		return false;
	}
	return true;
}
