/*
 * cmd_report.c - `rollcache report`: the per-epoch table of a real run, read
 * from the catalog of a cache directory.
 *
 *   rollcache report MOUNTPOINT|CACHE_DIR [--svg FILE] [--json] [--wide]
 *
 * Given a mount point, the cache directory is taken from its
 * .rollcache/stats ("cache_dir", read by cli/stats_read.c); given a cache
 * directory, its catalog.db is read directly.  The catalog is opened read-only
 * (CFS_CATALOG_READONLY), so the report runs beside a live daemon: its three queries run in one
 * read transaction (cfs_catalog_read_begin), so under WAL they see one state of the catalog without
 * blocking the daemon's writes.
 *
 * What each figure is, and where it comes from (docs/eviction.md, "rollcache
 * report"):
 *   the `epochs` rows (written by the daemon at each boundary and counted
 *   into by admissions, evictions, deletions and read statistics): the
 *   schedule entry in force (limit, the admit budget granted at the
 *   boundary, policy), resident files/records/bytes at the epoch's start
 *   (after the boundary's evictions), admitted and evicted
 *   files/records/bytes, bytes read, the victims deleted before anyone
 *   read them to the end (unread_files/bytes, counted when their rows
 *   went) and the files admitted in it read to the end (full_files);
 *   the `shards` rows of the files resident or leaving (a GONE file has no
 *   row): the victims still EVICTING that nobody read to the end, which
 *   `unread` adds to those deleted.
 *   `seen` at epoch E: the distinct records (a raw object is one) served by
 *   the end of E - a record is served when a file holding it is read to
 *   the end, and counted once however many files or passes brought it
 *   again (the epochs rows' served_records, counted by the mount's read
 *   statistics against table `served`, cfs_catalog_shards_add_stats).  A catalog written before
 * those existed (schema 2) has none: then `seen` falls back to the records of the files admitted up
 * to E that were read to the end, which counts a record admitted twice twice. Resident at the end
 * of E is what the boundary into E+1 found (its resident at start plus what it evicted); for the
 * current epoch, the resident files now.
 *
 * Owns only reading and presentation; the catalog is cachefs/catalog.c's,
 * the chart eviction/chart.c's.  Exit codes: 0 ok, 1 runtime failure
 * (catalog unreadable, SVG not written), 2 usage (not a mount nor a cache).
 */
#include "cli/cmd.h"

#include <stdio.h>

#if defined(RC_HAVE_CACHEFS) && RC_HAVE_CACHEFS
#include "cachefs/catalog.h"
#include "cli/stats_read.h"
#include "common/units.h"
#include "eviction/chart.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* One line of the report (one epochs row). */
struct rep_epoch {
	uint32_t number;
	bool started;
	uint64_t limit, admit, min_uses;
	char policy[16];
	uint64_t start_files, start_records, start_bytes;
	bool have_end;
	uint64_t end_files, end_records, end_bytes;
	uint64_t adm_files, adm_records, adm_bytes;
	uint64_t ev_files, ev_records, ev_bytes;
	uint64_t unread_files, unread_bytes; /* evicted with full_reads == 0 */
	uint64_t seen_files, seen_records;   /* cumulative, see the file comment */
	uint64_t served_records;	     /* first served during this epoch */
	uint64_t read_bytes, read_files;
};

struct report {
	char cache_dir[PATH_MAX];
	struct rep_epoch *e;
	size_t n;
	struct cfs_resident now;
	uint64_t files_total, files_read_full;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: rollcache report MOUNTPOINT|CACHE_DIR [--svg FILE] [--json] [--wide]\n\n"
		"Prints the per-epoch table of a run from the catalog of its cache directory\n"
		"(opened read-only: safe beside a running mount), in 80 columns; --wide adds\n"
		"start, end, +records and unread, and the exact sizes.  Columns:\n"
		"  epoch, policy, limit, admit  the schedule entry in force; admit is the budget\n"
		"                               granted at the boundary\n"
		"  files, start|records, end    resident files at the epoch's start, resident\n"
		"                               records at its start and at its end (the current\n"
		"                               epoch: now)\n"
		"  +files +records +bytes       admitted during the epoch\n"
		"  -files -bytes                evicted at the boundary into the epoch\n"
		"  unread                       of those, files nobody had read to the end\n"
		"  seen                         distinct records served by the end of the epoch\n"
		"                               (cumulative): a record is served when a file\n"
		"                               holding it is read to the end, and counts once\n"
		"                               however many times it was fetched again\n"
		"  read                         files read during the epoch: every open that\n"
		"                               read, the page cache's and passthrough's too (an\n"
		"                               open the daemon served no read for counts when\n"
		"                               it is closed)\n"
		"  bytes (--wide)               bytes the daemon itself served in the epoch\n"
		"                               (not those of the page cache or passthrough)\n"
		"--json prints the same figures, exact, as one JSON object; --svg FILE draws\n"
		"resident records, admitted records and seen records per epoch.\n"
		"See docs/eviction.md.\n");
}

/* ---- finding the cache directory --------------------------------------- */

/*
 * Reads the "cache_dir" string of MP/.rollcache/stats into out[outlen].
 * Returns 0; the read's -errno when MP has no readable stats; -EBADMSG when
 * they are not a JSON object naming a cache_dir that fits out (the reason in
 * why[whylen]).  out is unchanged on failure.
 */
static int stats_cache_dir(const char *mp, char *out, size_t outlen, char *why, size_t whylen)
{
	json_t *root = NULL;
	int rc = cli_stats_read(mp, &root, NULL, why, whylen);
	if (rc != 0)
		return rc;
	const char *dir = cli_stats_str(root, "cache_dir");
	rc = -EBADMSG;
	if (!dir[0])
		snprintf(why, whylen, "no cache_dir");
	else if (strlen(dir) >= outlen)
		snprintf(why, whylen, "cache_dir too long");
	else
		rc = 0;
	if (rc == 0)
		memcpy(out, dir, strlen(dir) + 1);
	json_decref(root);
	return rc;
}

static bool is_file(const char *dir, const char *name)
{
	char path[PATH_MAX];
	struct stat st;
	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
		return false;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* MOUNTPOINT (its stats name the cache) or CACHE_DIR (has catalog.db).  Exit code. */
static int find_cache_dir(const char *arg, char *out, size_t outlen)
{
	char why[256];
	int rc = stats_cache_dir(arg, out, outlen, why, sizeof(why));
	if (rc == -EBADMSG) {
		fprintf(stderr,
			"rollcache report: %s/.rollcache/stats names no cache_dir (%s): give the "
			"cache directory instead\n",
			arg, why);
		return 2;
	}
	if (rc == 0)
		return 0;
	if (is_file(arg, "catalog.db")) {
		if (snprintf(out, outlen, "%s", arg) >= (int)outlen) {
			fprintf(stderr, "rollcache report: %s: path too long\n", arg);
			return 2;
		}
		return 0;
	}
	fprintf(stderr,
		"rollcache report: %s is neither a rollcache mount (no .rollcache/stats) nor a "
		"cache directory (no catalog.db): give a mount point or its cache_dir\n",
		arg);
	return 2;
}

/* ---- gathering ----------------------------------------------------------- */

/* The line of epoch `number`, or NULL; r->e is ordered by number. */
static struct rep_epoch *find_epoch(struct report *r, int64_t number)
{
	size_t lo = 0, hi = r->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if ((int64_t)r->e[mid].number == number)
			return &r->e[mid];
		if ((int64_t)r->e[mid].number < number)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/*
 * Fills r from the catalog: one line per epochs row, the victims not yet
 * deleted from the SEALED and EVICTING rows.  Returns 0 or -errno (r->e
 * freed by the caller).
 */
static int gather(struct cfs_catalog *c, struct report *r)
{
	struct cfs_epoch_row *rows = NULL;
	struct cfs_shard_info *sh = NULL;
	size_t nrows = 0, nsh = 0;
	int rc = cfs_catalog_read_begin(c); /* one state, even while a boundary commits */
	if (rc != 0)
		return rc;
	rc = cfs_catalog_epochs_list(c, &rows, &nrows);
	if (rc == 0)
		rc = cfs_catalog_shards_list(
		    c, (1u << CFS_SHARD_SEALED) | (1u << CFS_SHARD_EVICTING), &sh, &nsh);
	if (rc == 0)
		rc = cfs_catalog_resident(c, &r->now);
	cfs_catalog_read_end(c);
	if (rc != 0)
		goto out;
	r->e = calloc(nrows ? nrows : 1, sizeof(*r->e));
	if (!r->e) {
		rc = -ENOMEM;
		goto out;
	}
	r->n = nrows;
	int64_t last_started = -1;
	for (size_t i = 0; i < nrows; i++) {
		const struct cfs_epoch_row *w = &rows[i];
		struct rep_epoch *e = &r->e[i];
		e->number = w->number;
		e->started = w->started_ms != 0;
		e->limit = w->limit;
		e->admit = w->admit;
		e->min_uses = w->min_uses;
		snprintf(e->policy, sizeof(e->policy), "%s", w->policy);
		e->start_files = w->resident_files;
		e->start_records = w->resident_records;
		e->start_bytes = w->resident_bytes;
		e->adm_records = w->admitted_records;
		e->adm_bytes = w->admitted_bytes;
		e->ev_records = w->evicted_records;
		e->ev_bytes = w->evicted_bytes;
		e->read_bytes = w->read_bytes;
		e->read_files = w->read_files;
		e->served_records = w->served_records;
		e->adm_files = w->admitted_files;
		e->ev_files = w->evicted_files;
		e->unread_files = w->unread_files; /* the victims deleted unread */
		e->unread_bytes = w->unread_bytes;
		/* seen(E) counts a file from its admission epoch on: summed below */
		e->seen_files = w->full_files;
		e->seen_records = w->full_records;
		r->files_total += w->admitted_files;
		r->files_read_full += w->full_files;
		if (e->started)
			last_started = e->number;
	}
	for (size_t i = 0; i < nsh; i++) { /* the victims not deleted yet */
		const struct cfs_shard_info *s = &sh[i];
		struct rep_epoch *e = s->evicted_epoch >= 0 && s->full_reads == 0
					  ? find_epoch(r, s->evicted_epoch)
					  : NULL;
		if (e) {
			e->unread_files++;
			e->unread_bytes += s->bytes;
		}
	}
	uint64_t served = 0;
	for (size_t i = 0; i < r->n; i++)
		served += r->e[i].served_records;
	if (served) /* distinct units served (schema 3); else the file-granular count */
		for (size_t i = 0; i < r->n; i++)
			r->e[i].seen_records = r->e[i].served_records;
	for (size_t i = 1; i < r->n; i++) { /* rows are ordered by number */
		r->e[i].seen_files += r->e[i - 1].seen_files;
		r->e[i].seen_records += r->e[i - 1].seen_records;
	}
	/* end of E = what the boundary into E+1 found; the current epoch: now */
	for (size_t i = 0; i < r->n; i++) {
		struct rep_epoch *e = &r->e[i];
		if (!e->started)
			continue;
		if ((int64_t)e->number == last_started) {
			e->have_end = true;
			e->end_files = r->now.files;
			e->end_records = r->now.records;
			e->end_bytes = r->now.bytes;
			continue;
		}
		const struct rep_epoch *x = find_epoch(r, (int64_t)e->number + 1);
		if (x && x->started) {
			e->have_end = true;
			e->end_files = x->start_files + x->ev_files;
			e->end_records = x->start_records + x->ev_records;
			e->end_bytes = x->start_bytes + x->ev_bytes;
		}
	}
out:
	free(rows);
	cfs_shard_info_free(sh, nsh);
	return rc;
}

/* ---- output ---------------------------------------------------------------- */

static const char *sz(uint64_t v, char *buf, size_t len)
{
	return cmn_format_size(v, buf, len);
}

/* A size in at most 5 characters: "512B", "9.5K", "1023M", "12G". */
static const char *csz(uint64_t v, char *buf, size_t len)
{
	static const char units[] = "BKMGTPE";
	double x = (double)v;
	int i = 0;
	while (x >= 1023.5 && i < 6) {
		x /= 1024.0;
		i++;
	}
	if (i > 0 && x < 9.95)
		snprintf(buf, len, "%.1f%c", x, units[i]);
	else
		snprintf(buf, len, "%.0f%c", x, units[i]);
	return buf;
}

/* The table in 80 columns: the columns that say what each epoch did. */
static void print_narrow(const struct report *r)
{
	char b[6][16];
	printf("cache ");
	if (strlen(r->cache_dir) > 73)
		printf("...%s\n", r->cache_dir + strlen(r->cache_dir) - 70);
	else
		printf("%s\n", r->cache_dir);
	printf("%5s %-6s %5s %5s %5s %7s %6s %6s %6s %6s %6s %5s\n", "epoch", "policy", "limit",
	       "admit", "files", "records", "+files", "+bytes", "-files", "-bytes", "seen", "read");
	for (size_t i = 0; i < r->n; i++) {
		const struct rep_epoch *e = &r->e[i];
		if (e->started)
			printf("%5u %-6.6s %5s %5s %5llu %7llu", e->number,
			       e->policy[0] ? e->policy : "-", csz(e->limit, b[0], 16),
			       csz(e->admit, b[1], 16), (unsigned long long)e->start_files,
			       (unsigned long long)e->start_records);
		else
			printf("%5u %-6s %5s %5s %5s %7s", e->number, "-", "-", "-", "-", "-");
		printf(" %6llu %6s %6llu %6s %6llu %5llu\n", (unsigned long long)e->adm_files,
		       csz(e->adm_bytes, b[2], 16), (unsigned long long)e->ev_files,
		       csz(e->ev_bytes, b[3], 16), (unsigned long long)e->seen_records,
		       (unsigned long long)e->read_files);
	}
}

static void print_wide(const struct report *r)
{
	char b[8][32];
	printf("cache %s\n", r->cache_dir);
	printf("%5s %-6s %10s %10s | %6s %9s %9s | %6s %9s %10s | %6s %10s %6s | %9s %6s %10s\n",
	       "epoch", "policy", "limit", "admit", "files", "start", "end", "+files", "+records",
	       "+bytes", "-files", "-bytes", "unread", "seen", "read", "bytes");
	for (size_t i = 0; i < r->n; i++) {
		const struct rep_epoch *e = &r->e[i];
		char end[32];
		if (e->have_end)
			snprintf(end, sizeof(end), "%llu", (unsigned long long)e->end_records);
		else
			snprintf(end, sizeof(end), "-");
		if (e->started)
			printf("%5u %-6s %10s %10s | %6llu %9llu %9s", e->number,
			       e->policy[0] ? e->policy : "-", sz(e->limit, b[0], 32),
			       sz(e->admit, b[1], 32), (unsigned long long)e->start_files,
			       (unsigned long long)e->start_records, end);
		else
			printf("%5u %-6s %10s %10s | %6s %9s %9s", e->number, "-", "-", "-", "-",
			       "-", "-");
		printf(" | %6llu %9llu %10s | %6llu %10s %6llu | %9llu %6llu %10s%s\n",
		       (unsigned long long)e->adm_files, (unsigned long long)e->adm_records,
		       sz(e->adm_bytes, b[2], 32), (unsigned long long)e->ev_files,
		       sz(e->ev_bytes, b[3], 32), (unsigned long long)e->unread_files,
		       (unsigned long long)e->seen_records, (unsigned long long)e->read_files,
		       sz(e->read_bytes, b[4], 32), e->started ? "" : "  (not begun)");
	}
}

/* The totals: one line with --wide, else lines of at most 80 columns. */
static void print_totals(const struct report *r, bool wide)
{
	char b[8][32];
	uint64_t adm = 0, admb = 0, ev = 0, evb = 0, unread = 0, rd = 0, rdf = 0;
	for (size_t i = 0; i < r->n; i++) {
		adm += r->e[i].adm_records;
		admb += r->e[i].adm_bytes;
		ev += r->e[i].ev_records;
		evb += r->e[i].ev_bytes;
		unread += r->e[i].unread_files;
		rd += r->e[i].read_bytes;
		rdf += r->e[i].read_files;
	}
	uint64_t seen = r->n ? r->e[r->n - 1].seen_records : 0;
	/* "; " between the parts with --wide, else a new line indented under the first */
	const char *sep = wide ? "; " : "\n       ";
	printf("total: admitted %llu records (%s)%sevicted %llu records (%s), %llu files unread%s"
	       "resident now %llu files, %llu records (%s)%sread %llu files (%s through the "
	       "daemon)%sseen %llu records, %llu of %llu files read to the end%sseen/admitted "
	       "%.2f\n",
	       (unsigned long long)adm, sz(admb, b[5], 32), sep, (unsigned long long)ev,
	       sz(evb, b[6], 32), (unsigned long long)unread, sep, (unsigned long long)r->now.files,
	       (unsigned long long)r->now.records, sz(r->now.bytes, b[7], 32), sep,
	       (unsigned long long)rdf, sz(rd, b[0], 32), sep, (unsigned long long)seen,
	       (unsigned long long)r->files_read_full, (unsigned long long)r->files_total, sep,
	       adm ? (double)seen / (double)adm : 0.0);
}

/* Sets o[k] to the count v.  0 or -1 (out of memory). */
static int set_u64(json_t *o, const char *k, uint64_t v)
{
	return json_object_set_new(o, k, json_integer((json_int_t)v));
}

/*
 * One epochs[] object of --json, keys in the order of the table.  Returns the
 * new object (json_decref() by the caller) or NULL when out of memory.
 */
static json_t *epoch_json(const struct rep_epoch *e)
{
	json_t *o = json_object();
	int bad = !o;
	bad |= set_u64(o, "epoch", e->number);
	bad |= json_object_set_new(o, "started", json_boolean(e->started));
	bad |= json_object_set_new(o, "policy", json_string(e->policy));
	bad |= set_u64(o, "limit", e->limit);
	bad |= set_u64(o, "admit", e->admit);
	bad |= set_u64(o, "min_uses", e->min_uses);
	bad |= set_u64(o, "start_files", e->start_files);
	bad |= set_u64(o, "start_records", e->start_records);
	bad |= set_u64(o, "start_bytes", e->start_bytes);
	/* no end yet (an epoch not begun, or a row after a gap): null */
	bad |= json_object_set_new(
	    o, "end_files", e->have_end ? json_integer((json_int_t)e->end_files) : json_null());
	bad |= json_object_set_new(
	    o, "end_records", e->have_end ? json_integer((json_int_t)e->end_records) : json_null());
	bad |= json_object_set_new(
	    o, "end_bytes", e->have_end ? json_integer((json_int_t)e->end_bytes) : json_null());
	bad |= set_u64(o, "admitted_files", e->adm_files);
	bad |= set_u64(o, "admitted_records", e->adm_records);
	bad |= set_u64(o, "admitted_bytes", e->adm_bytes);
	bad |= set_u64(o, "evicted_files", e->ev_files);
	bad |= set_u64(o, "evicted_records", e->ev_records);
	bad |= set_u64(o, "evicted_bytes", e->ev_bytes);
	bad |= set_u64(o, "evicted_unread_files", e->unread_files);
	bad |= set_u64(o, "evicted_unread_bytes", e->unread_bytes);
	bad |= set_u64(o, "seen_files", e->seen_files);
	bad |= set_u64(o, "seen_records", e->seen_records);
	bad |= set_u64(o, "read_bytes", e->read_bytes);
	bad |= set_u64(o, "read_files", e->read_files);
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/*
 * Builds the --json object of the report into *out (json_decref() by the
 * caller), keys in a fixed order (docs/eviction.md).  Returns 0, -EINVAL
 * when cache_dir is not UTF-8 (JSON cannot carry it), or -ENOMEM; *out is
 * unchanged on failure.
 */
static int report_json(const struct report *r, json_t **out)
{
	json_t *dir = json_string(r->cache_dir); /* NULL: not UTF-8 */
	if (!dir)
		return -EINVAL;
	json_t *root = json_object();
	json_t *res = json_object();
	json_t *eps = json_array();
	int bad = !root || !res || !eps;
	bad |= json_object_set_new(root, "cache_dir", dir);
	bad |= set_u64(res, "files", r->now.files);
	bad |= set_u64(res, "bytes", r->now.bytes);
	bad |= set_u64(res, "records", r->now.records);
	bad |= json_object_set(root, "resident", res);
	bad |= set_u64(root, "files_total", r->files_total);
	bad |= set_u64(root, "files_read_full", r->files_read_full);
	for (size_t i = 0; i < r->n && !bad; i++)
		bad |= json_array_append_new(eps, epoch_json(&r->e[i]));
	bad |= json_object_set(root, "epochs", eps);
	json_decref(res);
	json_decref(eps);
	if (bad) {
		json_decref(root);
		return -ENOMEM;
	}
	*out = root;
	return 0;
}

/* Prints the report as JSON on stdout.  Returns 0, report_json()'s error or -EIO. */
static int print_json(const struct report *r)
{
	json_t *root = NULL;
	int rc = report_json(r, &root);
	if (rc != 0)
		return rc;
	rc = json_dumpf(root, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(root);
	if (rc != 0 || fputc('\n', stdout) == EOF || fflush(stdout) != 0)
		return -EIO;
	return 0;
}

/* Resident records at start, cumulative admitted records and seen records. */
static int write_svg(const struct report *r, const char *path)
{
	int rc = -ENOMEM;
	double *x = calloc(r->n ? r->n : 1, sizeof(double));
	double *res = calloc(r->n ? r->n : 1, sizeof(double));
	double *adm = calloc(r->n ? r->n : 1, sizeof(double));
	double *seen = calloc(r->n ? r->n : 1, sizeof(double));
	double *rd = calloc(r->n ? r->n : 1, sizeof(double));
	FILE *f = NULL;
	if (!x || !res || !adm || !seen || !rd) {
		fprintf(stderr, "rollcache report: --svg %s: out of memory\n", path);
		goto out;
	}
	double cum = 0;
	for (size_t i = 0; i < r->n; i++) {
		const struct rep_epoch *e = &r->e[i];
		cum += (double)e->adm_records;
		x[i] = e->number;
		res[i] = (double)e->start_records;
		adm[i] = cum;
		seen[i] = (double)e->seen_records;
		rd[i] = (double)e->read_bytes / (1024.0 * 1024.0);
	}
	struct evc_series s[] = {
	    {"resident records at the epoch's start", x, res, r->n, 0, EVC_SOLID, NULL},
	    {"records admitted so far", x, adm, r->n, 0, EVC_DASHED, NULL},
	    {"records seen (admitted by then, read to the end by now)", x, seen, r->n, 0, EVC_SOLID,
	     NULL},
	    {"MiB read during the epoch", x, rd, r->n, 1, EVC_DOTTED, NULL},
	};
	char title[PATH_MAX + 32];
	snprintf(title, sizeof(title), "rollcache report: %s", r->cache_dir);
	struct evc_chart c = {
	    .title = title,
	    .xlabel = "epoch",
	    .ylabel_left = "records",
	    .ylabel_right = "MiB read",
	    .series = s,
	    .n_series = sizeof(s) / sizeof(s[0]),
	};
	f = fopen(path, "w");
	if (!f) {
		rc = -errno;
		fprintf(stderr, "rollcache report: --svg %s: %s\n", path, strerror(errno));
		goto out;
	}
	rc = evc_chart_svg(f, &c);
	if (fclose(f) != 0 && rc == 0)
		rc = -EIO;
	if (rc != 0)
		fprintf(stderr, "rollcache report: --svg %s: %s\n", path,
			rc == -EINVAL ? "no epoch to draw" : strerror(-rc));
out:
	free(x);
	free(res);
	free(adm);
	free(seen);
	free(rd);
	return rc;
}

int cmd_report(int argc, char **argv)
{
	const char *arg = NULL, *svg = NULL;
	bool json = false, wide = false;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(argv[i], "--json")) {
			json = true;
		} else if (!strcmp(argv[i], "--wide")) {
			wide = true;
		} else if (!strcmp(argv[i], "--svg")) {
			if (i + 1 >= argc) {
				fprintf(stderr, "rollcache report: --svg needs a FILE\n");
				return 2;
			}
			svg = argv[++i];
		} else if (argv[i][0] == '-' && argv[i][1]) {
			fprintf(stderr, "rollcache report: unknown option `%s`; see --help\n",
				argv[i]);
			return 2;
		} else if (!arg) {
			arg = argv[i];
		} else {
			fprintf(stderr, "rollcache report: unexpected argument `%s`\n", argv[i]);
			return 2;
		}
	}
	if (!arg) {
		usage(stderr);
		return 2;
	}
	struct report r = {0};
	int ec = find_cache_dir(arg, r.cache_dir, sizeof(r.cache_dir));
	if (ec != 0)
		return ec;
	char path[PATH_MAX + 16], err[512];
	snprintf(path, sizeof(path), "%s/catalog.db", r.cache_dir);
	struct cfs_catalog *c = NULL;
	int rc = cfs_catalog_open(&c, path, CFS_CATALOG_READONLY, err, sizeof(err));
	if (rc != 0) {
		fprintf(stderr, "rollcache report: %s\n", err);
		return 1;
	}
	rc = gather(c, &r);
	cfs_catalog_close(c);
	if (rc != 0) {
		fprintf(stderr, "rollcache report: %s: reading the catalog: %s\n", path,
			strerror(-rc));
		free(r.e);
		return 1;
	}
	if (json) {
		rc = print_json(&r);
		if (rc != 0) {
			fprintf(stderr, "rollcache report: --json: %s\n",
				rc == -EINVAL
				    ? "the cache directory's path is not UTF-8, which JSON "
				      "cannot carry: run without --json"
				    : strerror(-rc));
			ec = 1;
		}
	} else {
		if (wide)
			print_wide(&r);
		else
			print_narrow(&r);
		print_totals(&r, wide);
	}
	if (svg && write_svg(&r, svg) != 0)
		ec = 1;
	free(r.e);
	return ec;
}

#else /* built without the catalog (-Dcatalog=disabled) */

int cmd_report(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "rollcache report: this build has no catalog (configured with "
			"-Dcatalog=disabled): rebuild with SQLite to read a cache directory\n");
	return 1;
}
#endif
