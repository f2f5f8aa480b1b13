/*
 * stats.c - formats the stats JSON and the Prometheus metrics of a mount.
 *
 * Owns only the text formats (docs/mount.md lists every field).  Gathering
 * the figures is daemon.c's job; nothing here locks, reads the catalog or
 * touches FUSE.  Buffers are capped (struct cfs_sbuf.max) so a huge catalog
 * cannot make a stats read allocate without bound.
 */
#include "cachefs/stats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SBUF_DEFAULT_MAX ((size_t)16 << 20)

void cfs_sbuf_printf(struct cfs_sbuf *b, const char *fmt, ...)
{
	if (b->failed)
		return;
	size_t max = b->max ? b->max : SBUF_DEFAULT_MAX;
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		size_t room = b->cap - b->len;
		int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? room : 0, fmt, ap);
		va_end(ap);
		if (n < 0 || b->len + (size_t)n + 1 > max) {
			b->failed = true;
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
			b->failed = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
}

void cfs_sbuf_json_str(struct cfs_sbuf *b, const char *s)
{
	cfs_sbuf_printf(b, "\"");
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
		if (*p == '"' || *p == '\\')
			cfs_sbuf_printf(b, "\\%c", *p);
		else if (*p < 0x20 || *p == 0x7f)
			cfs_sbuf_printf(b, "\\u%04x", *p);
		else
			cfs_sbuf_printf(b, "%c", *p);
	}
	cfs_sbuf_printf(b, "\"");
}

void cfs_sbuf_free(struct cfs_sbuf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

static void kv_u64(struct cfs_sbuf *b, const char *k, uint64_t v, bool comma)
{
	cfs_sbuf_printf(b, "\"%s\": %llu%s", k, (unsigned long long)v, comma ? ", " : "");
}

static void kv_bool(struct cfs_sbuf *b, const char *k, bool v, bool comma)
{
	cfs_sbuf_printf(b, "\"%s\": %s%s", k, v ? "true" : "false", comma ? ", " : "");
}

static void kv_str(struct cfs_sbuf *b, const char *k, const char *v, bool comma)
{
	cfs_sbuf_printf(b, "\"%s\": ", k);
	cfs_sbuf_json_str(b, v);
	cfs_sbuf_printf(b, "%s", comma ? ", " : "");
}

void cfs_stats_json(const struct cfs_stats_view *v, struct cfs_sbuf *b)
{
	uint64_t used = v->reserved + v->sealed + v->draining;
	cfs_sbuf_printf(b, "{\n  ");
	if (v->have_epoch)
		kv_u64(b, "epoch", v->epoch, true);
	else
		cfs_sbuf_printf(b, "\"epoch\": null, ");
	kv_u64(b, "limit", v->limit, true);
	kv_u64(b, "used", used, true);
	kv_str(b, "advance", v->advance, true);
	kv_u64(b, "min_records", v->min_records, true);
	cfs_sbuf_printf(b, "\"pid\": %d,\n  ", v->pid);
	kv_str(b, "source", v->source, true);
	kv_str(b, "cache_dir", v->cache_dir, true);
	kv_str(b, "mountpoint", v->mountpoint, false);
	cfs_sbuf_printf(b, ",\n  \"uptime_s\": %.1f,\n", v->uptime_s);

	cfs_sbuf_printf(b, "  \"resident\": {");
	kv_u64(b, "files", v->resident.files, true);
	kv_u64(b, "bytes", v->resident.bytes, true);
	kv_u64(b, "records", v->resident.records, false);
	cfs_sbuf_printf(b, "},\n  \"disk\": {");
	kv_u64(b, "sealed", v->sealed, true);
	kv_u64(b, "reserved", v->reserved, true);
	kv_u64(b, "draining", v->draining, true);
	kv_u64(b, "draining_files", v->draining_files, true);
	kv_u64(b, "used", used, true);
	kv_u64(b, "peak", v->peak, true);
	kv_u64(b, "limit", v->limit, false);
	cfs_sbuf_printf(b, "},\n  \"admission\": {");
	kv_u64(b, "admit", v->admit, true);
	kv_u64(b, "admit_used", v->admit_used, true);
	kv_u64(b, "waiting_limit", v->waiting_limit, true);
	kv_u64(b, "waiting_admit", v->waiting_admit, false);
	cfs_sbuf_printf(b, "},\n  \"current\": {");
	kv_u64(b, "files", v->current_files, true);
	kv_u64(b, "bytes", v->current_bytes, true);
	kv_u64(b, "records", v->current_records, true);
	kv_u64(b, "read_bytes", v->current_read_bytes, true);
	kv_u64(b, "files_read_full", v->current_files_read_full, false);
	cfs_sbuf_printf(b, "},\n  \"view\": {");
	kv_u64(b, "epochs_listed", v->epochs_listed, true);
	kv_u64(b, "open_handles", v->open_handles, true);
	kv_bool(b, "passthrough", v->passthrough, true);
	kv_u64(b, "passthrough_opens", v->passthrough_opens, true);
	kv_u64(b, "passthrough_refused", v->passthrough_refused, false);
	cfs_sbuf_printf(b, "},\n  \"schedule\": {");
	kv_str(b, "entry", v->schedule, true);
	kv_str(b, "policy", v->policy, true);
	kv_u64(b, "limit", v->entry_limit, true);
	kv_u64(b, "admit", v->entry_admit, true);
	kv_u64(b, "min_uses", v->min_uses, false);
	cfs_sbuf_printf(b, "},\n  \"last_boundary\": {");
	kv_u64(b, "victims", v->last_victims, true);
	kv_u64(b, "evicted_bytes", v->last_evicted_bytes, true);
	kv_u64(b, "admit", v->last_admit, true);
	kv_str(b, "reason", v->last_reason, true);
	kv_str(b, "why", v->last_why, false);
	cfs_sbuf_printf(b, "},\n  \"epochs\": [");
	for (size_t i = 0; i < v->n_epochs; i++) {
		const struct cfs_epoch_row *r = &v->epochs[i];
		cfs_sbuf_printf(b, "%s\n    {", i ? "," : "");
		kv_u64(b, "epoch", r->number, true);
		kv_u64(b, "started_ms", r->started_ms, true);
		kv_u64(b, "admitted_bytes", r->admitted_bytes, true);
		kv_u64(b, "admitted_records", r->admitted_records, true);
		kv_u64(b, "evicted_bytes", r->evicted_bytes, true);
		kv_u64(b, "evicted_records", r->evicted_records, true);
		kv_u64(b, "read_bytes", r->read_bytes, true);
		kv_u64(b, "resident_files", r->resident_files, true);
		kv_u64(b, "resident_bytes", r->resident_bytes, true);
		kv_u64(b, "resident_records", r->resident_records, true);
		kv_u64(b, "limit", r->limit, true);
		kv_u64(b, "admit", r->admit, true);
		kv_str(b, "policy", r->policy, false);
		cfs_sbuf_printf(b, "}");
	}
	const struct cfs_worker_stats *s = &v->sampler;
	cfs_sbuf_printf(b, "\n  ],\n  \"sampler\": {");
	cfs_sbuf_printf(b, "\"present\": %s, \"idle\": %s, ", s->present ? "true" : "false",
			s->idle ? "true" : "false");
	cfs_sbuf_printf(b, "\"ingest_bytes_per_s\": %.0f, \"fetch_bytes_per_s\": %.0f, ",
			s->ingest_bps, s->fetch_bps);
	kv_u64(b, "bytes_admitted", s->bytes_admitted, true);
	kv_u64(b, "records_admitted", s->records_admitted, true);
	kv_u64(b, "bytes_fetched", s->bytes_fetched, true);
	kv_u64(b, "objects_done", s->objects_done, true);
	kv_u64(b, "requests", s->requests, true);
	kv_u64(b, "retries", s->retries, true);
	kv_u64(b, "budget_waits", s->budget_waits, false);
	cfs_sbuf_printf(b, "},\n  \"errors\": {");
	kv_u64(b, "http_4xx", s->http_4xx, true);
	kv_u64(b, "http_408_429", s->http_408_429, true);
	kv_u64(b, "http_5xx", s->http_5xx, true);
	kv_u64(b, "timeouts", s->timeouts, true);
	kv_u64(b, "net_errors", s->net_errors, true);
	kv_u64(b, "truncated", s->truncated, true);
	kv_u64(b, "bad_records", s->bad_records, true);
	kv_u64(b, "failed_objects", s->failed_objects, true);
	kv_u64(b, "stats_flush", v->errors_stats_flush, true);
	kv_u64(b, "boundary", v->errors_boundary, true);
	kv_u64(b, "read", v->errors_read, false);
	cfs_sbuf_printf(b, "}\n}\n");
}

static void metric(struct cfs_sbuf *b, const char *name, const char *type, const char *help,
		   double value)
{
	cfs_sbuf_printf(b, "# HELP rollcache_%s %s\n# TYPE rollcache_%s %s\nrollcache_%s %.17g\n",
			name, help, name, type, name, value);
}

void cfs_stats_metrics(const struct cfs_stats_view *v, struct cfs_sbuf *b)
{
	const struct cfs_worker_stats *s = &v->sampler;
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
	uint64_t errors = s->http_4xx + s->http_408_429 + s->http_5xx + s->timeouts +
			  s->net_errors + s->truncated + s->bad_records + s->failed_objects +
			  v->errors_stats_flush + v->errors_boundary + v->errors_read;
	metric(b, "errors_total", "counter", "Errors of every kind (see stats JSON).",
	       (double)errors);
	metric(b, "sampler_idle", "gauge", "1 when the samplers have nothing more this epoch.",
	       s->idle ? 1 : 0);
}
