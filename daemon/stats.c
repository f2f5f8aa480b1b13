/*
 * stats.c - formats the stats JSON and the Prometheus metrics of a mount,
 * and decides what GET /healthz answers from the samplers' counters
 * (dmn_stats_health(), a pure function of them and the previous probe).
 *
 * Owns only the text formats (docs/counters.md lists every field and what
 * moves it; docs/mount.md shows `status`).  fields[]
 * names each figure once: where it sits in the JSON, where its value is in
 * struct dmn_stats_view, its metric, help and unit, and whether it is a
 * kind of error.  The JSON writer, the metrics writer (the error series
 * included) and the health check's sum of transfer errors walk it; a row
 * added there appears in each text it names.  Gathering the figures is
 * control.c's job (dmn__render); nothing here locks, reads the catalog or
 * touches FUSE.  JSON goes through jansson (strings escaped by it); the
 * metrics text through a buffer capped at `max`, so a huge catalog cannot
 * make a stats read allocate without bound.
 */
#include "daemon/stats.h"

#include <assert.h>
#include <errno.h>
#include <stddef.h>
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

/* v as a JSON string ("" for NULL); NULL only when out of memory */
static json_t *str_json(const char *v)
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
	return s;
}

static void set_str(json_t *o, const char *k, const char *v)
{
	json_object_set_new(o, k, str_json(v));
}

/* ---- the table ---------------------------------------------------------------- */

#define V(m) offsetof(struct dmn_stats_view, m)
#define S(m) offsetof(struct dmn_stats_view, sampler.m)
/* a figure read at an offset: path, type, offset, metric, help, unit, flags */
#define F(path, type, off, metric, help, unit, flags)                                              \
	{                                                                                          \
		path, DMN_STATS_##type, off, NULL, metric, help, unit, flags                       \
	}
/* a figure computed by get() */
#define G(path, get, metric, help, unit, flags)                                                    \
	{                                                                                          \
		path, DMN_STATS_GET, 0, get, metric, help, unit, flags                             \
	}
#define CNT  DMN_STATS_COUNTER
#define ERR  (DMN_STATS_ERROR | DMN_STATS_COUNTER)
#define XFER (DMN_STATS_ERROR | DMN_STATS_COUNTER | DMN_STATS_TRANSFER)

static bool get_epoch(const struct dmn_stats_view *v, uint64_t *out)
{
	*out = v->have_epoch ? v->epoch : 0;
	return v->have_epoch;
}

static bool get_used(const struct dmn_stats_view *v, uint64_t *out)
{
	*out = v->sealed + v->reserved + v->draining;
	return true;
}

/* The current epoch's row of epochs[], or NULL. */
static const struct cfs_epoch_row *current_row(const struct dmn_stats_view *v)
{
	for (size_t i = 0; v->have_epoch && i < v->n_epochs; i++)
		if (v->epochs[i].number == v->epoch)
			return &v->epochs[i];
	return NULL;
}

static bool get_epoch_admitted(const struct dmn_stats_view *v, uint64_t *out)
{
	const struct cfs_epoch_row *r = current_row(v);
	*out = r ? r->admitted_bytes : 0;
	return true;
}

static bool get_epoch_evicted(const struct dmn_stats_view *v, uint64_t *out)
{
	const struct cfs_epoch_row *r = current_row(v);
	*out = r ? r->evicted_bytes : 0;
	return true;
}

static const struct dmn_stats_field fields[] = {
    G("epoch", get_epoch, "epoch", "Current epoch number.", "", 0),
    F("limit", U64, V(limit), "limit_bytes", "Hard bound on bytes on disk.", "bytes", 0),
    G("used", get_used, "used_bytes", "Bytes on disk: sealed + reserved + draining.", "bytes", 0),
    F("advance", STR, V(advance), NULL, "How epochs advance: manual or auto.", "", 0),
    F("retire", STR, V(retire), NULL, "Retire mode from the next boundary on.", "", 0),
    F("min_records", U64, V(min_records), "min_records", "Records `epoch next --wait` waits for.",
      "records", 0),
    F("pid", INT, V(pid), NULL, "Process id of the daemon.", "", 0),
    F("source", STR, V(source), NULL, "The remote source.", "", 0),
    F("cache_dir", STR, V(cache_dir), NULL, "The cache directory.", "", 0),
    F("mountpoint", STR, V(mountpoint), NULL, "The mount point.", "", 0),
    F("uptime_s", TENTHS, V(uptime_s), NULL, "Time since the daemon started.", "s", 0),
    F("resident.files", U64, V(resident.files), "resident_files", "Sealed resident files.", "files",
      0),
    F("resident.bytes", U64, V(resident.bytes), NULL, "Bytes of sealed resident files.", "bytes",
      0),
    F("resident.records", U64, V(resident.records), "resident_records",
      "Records in sealed resident files.", "records", 0),
    F("disk.sealed", U64, V(sealed), "sealed_bytes", "Bytes of sealed resident files.", "bytes", 0),
    F("disk.reserved", U64, V(reserved), "reserved_bytes", "Bytes reserved by writers.", "bytes",
      0),
    F("disk.draining", U64, V(draining), "draining_bytes",
      "Bytes of evicted or withdrawn files not deleted yet.", "bytes", 0),
    F("disk.draining_files", U64, V(draining_files), NULL,
      "Evicted files a view or a handle still holds.", "files", 0),
    F("disk.retiring", U64, V(retiring), NULL,
      "Bytes of evicted files the current epoch still lists: on disk until the next snapshot "
      "(or, under retire = read, until read).",
      "bytes", 0),
    G("disk.used", get_used, NULL, "Bytes on disk: sealed + reserved + draining.", "bytes", 0),
    F("disk.peak", U64, V(peak), NULL, "The highest used seen.", "bytes", 0),
    F("disk.limit", U64, V(limit), NULL, "Hard bound on bytes on disk.", "bytes", 0),
    F("disk.catalog", U64, V(catalog_bytes), "catalog_bytes",
      "Bytes of the catalog (catalog.db and its WAL), beside the limit, not in it: a row per "
      "listed object, per resident file and record, per plan object (docs/scale.md).",
      "bytes", 0),
    F("admission.admit", U64, V(admit), "admit_bytes", "Admit budget of the current epoch.",
      "bytes", 0),
    F("admission.admit_used", U64, V(admit_used), "admit_used_bytes",
      "Admit budget used this epoch.", "bytes", 0),
    F("admission.waiting_limit", U32, V(waiting_limit), NULL, "Samplers waiting for the limit.",
      "samplers", 0),
    F("admission.waiting_admit", U32, V(waiting_admit), NULL,
      "Samplers waiting for the admit budget.", "samplers", 0),
    F("current.files", U64, V(current_files), "current_files", "Files in the current epoch.",
      "files", 0),
    F("current.bytes", U64, V(current_bytes), NULL, "Bytes of the files in the current epoch.",
      "bytes", 0),
    F("current.records", U64, V(current_records), "current_records",
      "Records in the current epoch.", "records", 0),
    F("current.read_bytes", U64, V(current_read_bytes), "epoch_read_bytes",
      "Bytes read through the mount this epoch.", "bytes", 0),
    F("current.files_read_full", U64, V(current_files_read_full), NULL,
      "Files read to the end this epoch.", "files", 0),
    F("view.epochs_listed", U32, V(epochs_listed), "epochs_listed",
      "Epoch directories still listed.", "epochs", 0),
    F("view.open_handles", U64, V(open_handles), "open_handles", "Open file handles on the mount.",
      "handles", 0),
    F("view.passthrough", BOOL, V(passthrough), "passthrough",
      "1 when the kernel serves reads of files served once.", "", 0),
    F("view.passthrough_opens", U64, V(passthrough_opens), "passthrough_opens_total",
      "Open handles passed through to the kernel.", "handles", CNT),
    F("view.passthrough_refused", U64, V(passthrough_refused), NULL,
      "Backing files the kernel refused to pass through.", "files", CNT),
    F("schedule.entry", STR, V(schedule), NULL, "The schedule entry in force.", "", 0),
    F("schedule.policy", STR, V(policy), NULL, "Its eviction policy.", "", 0),
    F("schedule.limit", U64, V(entry_limit), NULL, "Its limit.", "bytes", 0),
    F("schedule.admit", U64, V(entry_admit), NULL, "Its admit budget.", "bytes", 0),
    F("schedule.min_uses", U32, V(min_uses), NULL, "Its min_uses.", "reads", 0),
    F("last_boundary.victims", U64, V(last_victims), NULL, "Files the last boundary evicted.",
      "files", 0),
    F("last_boundary.evicted_bytes", U64, V(last_evicted_bytes), NULL,
      "Bytes the last boundary evicted.", "bytes", 0),
    F("last_boundary.admit", U64, V(last_admit), NULL, "Admit budget the last boundary granted.",
      "bytes", 0),
    F("last_boundary.reason", STR, V(last_reason), NULL, "Why its plan is what it is.", "", 0),
    F("last_boundary.why", STR, V(last_why), NULL, "The plan's reason, for people.", "", 0),
    F("last_boundary.wait", STR, V(last_wait), NULL, "Why the last `next --wait` went ahead early.",
      "", 0),
    F("epochs", EPOCHS, 0, NULL, "One row per epoch from the catalog.", "", 0),
    F("sampler.present", BOOL, S(present), NULL, "Samplers are configured and run.", "", 0),
    F("sampler.idle", BOOL, S(idle), "sampler_idle",
      "1 when the samplers have nothing more this epoch.", "", 0),
    F("sampler.ingest_bytes_per_s", RATE, S(ingest_bps), "ingest_bytes_per_second",
      "Admitted bytes per second, recent.", "bytes/s", 0),
    F("sampler.fetch_bytes_per_s", RATE, S(fetch_bps), NULL, "Received bytes per second, recent.",
      "bytes/s", 0),
    F("sampler.bytes_admitted", U64, S(bytes_admitted), "sampler_bytes_admitted_total",
      "Bytes admitted by the samplers.", "bytes", CNT),
    F("sampler.records_admitted", U64, S(records_admitted), "sampler_records_admitted_total",
      "Records admitted.", "records", CNT),
    F("sampler.bytes_fetched", U64, S(bytes_fetched), "sampler_bytes_fetched_total",
      "Body bytes received.", "bytes", CNT),
    F("sampler.objects_done", U64, S(objects_done), NULL, "Objects read to the end and admitted.",
      "objects", CNT),
    F("sampler.requests", U64, S(requests), NULL, "Requests started, retries included.", "requests",
      CNT),
    F("sampler.retries", U64, S(retries), "sampler_retries_total", "Transfer retries.", "requests",
      CNT),
    F("sampler.budget_waits", U64, S(budget_waits), NULL, "Waits for room in the byte budget.",
      "waits", CNT),
    F("sampler.partial_bytes", U64, S(partial_bytes), NULL,
      "Bytes received of records not yet whole.", "bytes", 0),
    F("sampler.records_recovered", U64, S(records_recovered), "sampler_records_recovered_total",
      "Records with bad data that a retry read intact.", "records", CNT),
    F("sampler.records_resident_skipped", U64, S(records_resident_skipped), NULL,
      "Records fetched again that were resident already.", "records", CNT),
    F("sampler.resumed_bytes", U64, S(resumed_bytes), NULL,
      "Bytes of partial objects not fetched again.", "bytes", CNT),
    F("sampler.objects_partial", U64, S(objects_partial), "sampler_objects_partial_total",
      "Failed objects left partial: a later transfer resumes them.", "objects", CNT),
    F("sampler.stopped", BOOL, S(stopped), "sampler_stopped",
      "1 when the samplers stopped on a failure.", "", 0),
    F("sampler.error", CHARS, S(error), NULL, "Why the samplers stopped.", "", 0),
    F("sampler.state", CHARS, S(state), NULL, "running, idle, waiting: ... or stopped: ...", "", 0),
    F("sampler.listed_objects", U64, S(listed_objects), "sampler_listed_objects",
      "Objects in the source's last listing.", "objects", 0),
    F(NULL, BOOL, S(waiting), "sampler_waiting",
      "1 while the samplers wait out a full disk or a source that cannot be listed.", "", 0),
    F("errors.http_4xx", U64, S(http_4xx), NULL, "4xx answers.", "answers", XFER),
    F("errors.http_408_429", U64, S(http_408_429), NULL, "408 and 429 answers.", "answers", XFER),
    F("errors.http_5xx", U64, S(http_5xx), NULL, "5xx answers.", "answers", XFER),
    F("errors.timeouts", U64, S(timeouts), NULL, "Connect timeouts and stalled transfers.",
      "attempts", XFER),
    F("errors.net_errors", U64, S(net_errors), NULL, "Other transport failures.", "attempts", XFER),
    F("errors.truncated", U64, S(truncated), NULL, "Bodies shorter than their object.", "attempts",
      XFER),
    F("errors.records_lost", U64, S(records_lost), "sampler_records_lost_total",
      "Records no resume will deliver: bad on every attempt.", "records", ERR),
    F("errors.failed_objects", U64, S(failed_objects), "sampler_failed_objects_total",
      "Objects given up, or read with a record lost.", "objects", ERR),
    F("errors.enospc", U64, S(enospc), "sampler_enospc_total",
      "Local writes that failed: disk full.", "writes", ERR),
    F("errors.stats_flush", U64, V(errors_stats_flush), NULL,
      "Flushes of read statistics that failed.", "flushes", ERR),
    F("errors.boundary", U64, V(errors_boundary), NULL, "Epoch boundaries that failed.",
      "boundaries", ERR),
    F("errors.read", U64, V(errors_read), NULL, "Reserved for failed reads; always 0.", "reads",
      ERR),
    F("errors.corrupt", U64, V(errors_corrupt), "corrupt_files_total",
      "Sealed files found corrupt and dropped.", "files", ERR),
    F("integrity.verity", STR, V(verity), NULL,
      "fs-verity on the files this mount seals: on, off (verity = off), or unavailable: why.", "",
      0),
    F("integrity.scrub_rate", U64, V(scrub_rate), NULL, "The scrubber's rate; 0: off.", "bytes/s",
      0),
    F("integrity.scrub_passes", U64, V(scrub_passes), "scrub_passes_total",
      "Whole scrub passes over the resident files.", "passes", CNT),
    F("integrity.scrub_bytes", U64, V(scrub_bytes), "scrub_bytes_total",
      "File bytes the scrubber checked.", "bytes", CNT),
    F("integrity.scrub_files", U64, V(scrub_files), NULL,
      "Files the scrubber checked to the end and found good.", "files", CNT),
    F("integrity.scrub_period_s", U64, V(scrub_period_s), NULL,
      "One scrub pass over a full cache at scrub_rate (limit / scrub_rate, + 1 s); 0: off.", "s",
      0),
    F("integrity.scrub_last_pass_ms", U64, V(scrub_last_pass_ms), NULL,
      "Duration of the last whole scrub pass; 0: none yet.", "ms", 0),
    F("integrity.verified_bytes", U64, V(verified_bytes), NULL,
      "File bytes checked by first-pass reads.", "bytes", CNT),
    F("integrity.verified_files", U64, V(verified_files), NULL,
      "Files whose first pass checked every record.", "files", CNT),
    F("integrity.rechecked_files", U64, V(rechecked_files), NULL,
      "Files checked again from their start: changed on disk after a check.", "files", CNT),
    F("integrity.stale_files", U64, V(stale_files), "stale_files_total",
      "Files withdrawn because they held records of an object changed at the source.", "files",
      CNT),
    F("integrity.stale_moved_records", U64, V(stale_moved), NULL,
      "Records of current objects copied out of those files into new ones.", "records", CNT),
    F("last_error", LAST, 0, NULL, "The last warning or error logged, or null.", "", 0),
    F("recent", RECENT, 0, NULL, "The last warnings and errors logged, oldest first.", "", 0),
    G(NULL, get_epoch_admitted, "epoch_admitted_bytes", "Bytes admitted during the current epoch.",
      "bytes", 0),
    G(NULL, get_epoch_evicted, "epoch_evicted_bytes", "Bytes evicted at the current epoch's start.",
      "bytes", 0),
};

#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

const struct dmn_stats_field *dmn_stats_fields(size_t *n)
{
	*n = NFIELDS;
	return fields;
}

/* The columns of a row of the JSON's epochs[], in order. */
static const struct {
	const char *key;
	enum dmn_stats_type type; /* U64, U32 or CHARS */
	size_t off;
} epoch_cols[] = {
#define E(key, type, m)                                                                            \
	{                                                                                          \
		key, DMN_STATS_##type, offsetof(struct cfs_epoch_row, m)                           \
	}
    E("epoch", U32, number),
    E("started_ms", U64, started_ms),
    E("admitted_bytes", U64, admitted_bytes),
    E("admitted_records", U64, admitted_records),
    E("evicted_bytes", U64, evicted_bytes),
    E("evicted_records", U64, evicted_records),
    E("read_bytes", U64, read_bytes),
    E("resident_files", U64, resident_files),
    E("resident_bytes", U64, resident_bytes),
    E("resident_records", U64, resident_records),
    E("limit", U64, limit),
    E("admit", U64, admit),
    E("policy", CHARS, policy),
#undef E
};

/* ---- reading a figure ------------------------------------------------------------- */

#define AT(base, off, type) (*(const type *)((const char *)(base) + (off)))

/* A numeric figure as a number (BOOL 1/0); *none when a GET has none. */
static double number_of(const struct dmn_stats_field *f, const struct dmn_stats_view *v, bool *none)
{
	uint64_t u = 0;
	*none = false;
	switch (f->type) {
	case DMN_STATS_U64:
		return (double)AT(v, f->off, uint64_t);
	case DMN_STATS_U32:
		return AT(v, f->off, uint32_t);
	case DMN_STATS_INT:
		return AT(v, f->off, int);
	case DMN_STATS_BOOL:
		return AT(v, f->off, bool) ? 1.0 : 0.0;
	case DMN_STATS_RATE:
	case DMN_STATS_TENTHS:
		return AT(v, f->off, double);
	case DMN_STATS_GET:
		*none = !f->get(v, &u);
		return (double)u;
	default:
		return 0; /* strings and arrays have no number */
	}
}

/* ---- the JSON --------------------------------------------------------------------- */

/* The object that holds path's key (root, or the object named by its prefix, created). */
static json_t *holder(json_t *root, const char *path, const char **key)
{
	const char *dot = strchr(path, '.');
	if (!dot) {
		*key = path;
		return root;
	}
	char name[64];
	snprintf(name, sizeof(name), "%.*s", (int)(dot - path), path);
	*key = dot + 1;
	json_t *o = json_object_get(root, name);
	if (!o) {
		o = json_object();
		json_object_set_new(root, name, o);
	}
	return o;
}

static json_t *epochs_json(const struct dmn_stats_view *v)
{
	json_t *arr = json_array();
	for (size_t i = 0; i < v->n_epochs; i++) {
		json_t *e = json_object();
		json_array_append_new(arr, e);
		for (size_t c = 0; c < sizeof(epoch_cols) / sizeof(epoch_cols[0]); c++) {
			const void *r = &v->epochs[i];
			size_t off = epoch_cols[c].off;
			if (epoch_cols[c].type == DMN_STATS_U32)
				set_u64(e, epoch_cols[c].key, AT(r, off, uint32_t));
			else if (epoch_cols[c].type == DMN_STATS_U64)
				set_u64(e, epoch_cols[c].key, AT(r, off, uint64_t));
			else
				set_str(e, epoch_cols[c].key, (const char *)r + off);
		}
	}
	return arr;
}

/* One logged line: {level, message, unix_ms} and, with count, its count. */
static json_t *entry_json(const struct cmn_log_entry *e, bool count)
{
	json_t *o = json_object();
	set_str(o, "level", cmn_log_level_name(e->level));
	set_str(o, "message", e->line);
	set_u64(o, "unix_ms", e->unix_ms);
	if (count)
		set_u64(o, "count", e->count);
	return o;
}

/* The JSON value of one row. */
static json_t *value_json(const struct dmn_stats_field *f, const struct dmn_stats_view *v)
{
	uint64_t u;
	switch (f->type) {
	case DMN_STATS_STR:
	case DMN_STATS_CHARS:
		return str_json(f->type == DMN_STATS_STR ? AT(v, f->off, char *)
							 : (const char *)v + f->off);
	case DMN_STATS_BOOL:
		return json_boolean(AT(v, f->off, bool));
	case DMN_STATS_RATE: {
		double x = AT(v, f->off, double);
		return json_integer(x > 0 ? (json_int_t)(x + 0.5) : 0);
	}
	case DMN_STATS_TENTHS:
		return json_real((double)(long long)(AT(v, f->off, double) * 10) / 10);
	case DMN_STATS_INT:
		return json_integer(AT(v, f->off, int));
	case DMN_STATS_EPOCHS:
		return epochs_json(v);
	case DMN_STATS_LAST:
		return v->n_recent ? entry_json(&v->recent[v->n_recent - 1], false) : json_null();
	case DMN_STATS_RECENT: {
		json_t *arr = json_array();
		for (size_t i = 0; i < v->n_recent; i++)
			json_array_append_new(arr, entry_json(&v->recent[i], true));
		return arr;
	}
	case DMN_STATS_GET:
		return f->get(v, &u) ? json_integer((json_int_t)u) : json_null();
	case DMN_STATS_U32:
		return json_integer((json_int_t)AT(v, f->off, uint32_t));
	case DMN_STATS_U64:
		return json_integer((json_int_t)AT(v, f->off, uint64_t));
	}
	return json_null();
}

/* json_dumps() of root plus a newline, under max bytes. Returns 0, -ENOMEM or -EFBIG. */
static int dump_json(json_t *root, size_t max, char **out, size_t *len)
{
	char *text =
	    json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));
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

int dmn_stats_json(const struct dmn_stats_view *v, size_t max, char **out, size_t *len)
{
	json_t *root = json_object();
	if (!root)
		return -ENOMEM;
	for (size_t i = 0; i < NFIELDS; i++) {
		const char *key;
		if (!fields[i].path)
			continue; /* metrics only */
		json_t *o = holder(root, fields[i].path, &key);
		json_object_set_new(o, key, value_json(&fields[i], v));
	}
	int rc = dump_json(root, max, out, len);
	json_decref(root);
	return rc;
}

/* ---- the Prometheus text ------------------------------------------------------------ */

int dmn_stats_metrics(const struct dmn_stats_view *v, size_t max, char **out, size_t *len)
{
	struct sbuf sb = {.max = max}, *b = &sb;
	bool none;
	for (size_t i = 0; i < NFIELDS; i++) {
		const struct dmn_stats_field *f = &fields[i];
		if (!f->metric)
			continue;
		sbuf_printf(b,
			    "# HELP rollcache_%s %s\n# TYPE rollcache_%s %s\nrollcache_%s %.17g\n",
			    f->metric, f->help, f->metric,
			    f->flags & DMN_STATS_COUNTER ? "counter" : "gauge", f->metric,
			    number_of(f, v, &none));
	}
	/* one series per kind: the keys of the stats JSON's "errors" */
	sbuf_printf(b, "# HELP rollcache_errors_total Errors by kind (the stats JSON's errors).\n"
		       "# TYPE rollcache_errors_total counter\n");
	for (size_t i = 0; i < NFIELDS; i++) {
		const struct dmn_stats_field *f = &fields[i];
		assert(!(f->flags & DMN_STATS_ERROR) || f->type == DMN_STATS_U64);
		if (f->flags & DMN_STATS_ERROR)
			sbuf_printf(b, "rollcache_errors_total{kind=\"%s\"} %" PRIu64 "\n",
				    strchr(f->path, '.') + 1, AT(v, f->off, uint64_t));
	}
	if (b->err) {
		free(b->p);
		return b->err;
	}
	*out = b->p;
	*len = b->len;
	return 0;
}

/* The sum of the transfer errors in s: the rows flagged DMN_STATS_TRANSFER. */
static uint64_t transfer_errors(const struct dmn_sampler_stats *s)
{
	uint64_t n = 0;
	for (size_t i = 0; i < NFIELDS; i++) {
		const struct dmn_stats_field *f = &fields[i];
		if (f->flags & DMN_STATS_TRANSFER) {
			assert(f->type == DMN_STATS_U64 && f->off >= V(sampler) &&
			       f->off + sizeof(uint64_t) <= V(sampler) + sizeof(*s));
			n += AT(s, f->off - V(sampler), uint64_t);
		}
	}
	return n;
}

bool dmn_stats_health(struct dmn_health *h, const struct dmn_sampler_stats *s, uint64_t now_ms,
		      char *why, size_t len)
{
	uint64_t errors = transfer_errors(s);
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
