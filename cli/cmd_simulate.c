/*
 * cmd_simulate.c - `rollcache simulate`: what a schedule does to coverage.
 *
 *   rollcache simulate --config FILE [--config FILE ...] --dataset SIZE --record-size SIZE
 *                      [--epochs N] [--shard-size SIZE] [--seed S] [--svg FILE]
 *                      [--svg-downloads FILE] [--csv] [--wide]
 *   rollcache simulate --limit SIZE [--admit SIZE] [--policy P[,P...]] [--min-uses N]
 *                      --dataset SIZE --record-size SIZE [...]
 *
 * Each --config file (its [cache] limit and [epoch ...] sections, read by
 * common/config.c and built by eviction/schedule.c) and each policy of
 * --policy (one [epoch 0-] entry from --limit/--admit/--min-uses) is one run
 * of eviction/sim.c; every run prints its per-epoch table, and --svg draws
 * the coverage and resident bytes of all runs in one chart.
 *
 * Owns only argument handling and presentation; the model is in sim.h.
 * Exit codes: 0 ok, 1 runtime failure (memory, writing the SVG), 2 usage.
 */
#include "cli/cmd.h"
#include "cli/util.h"
#include "common/config.h"
#include "common/units.h"
#include "eviction/chart.h"
#include "eviction/sim.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RUNS 8

struct run {
	char label[64];
	char source[256]; /* the config path, or "--policy X" */
	struct evc_schedule sch;
	bool retire_read; /* the config's [cache] retire = read */
	struct evc_sim_row *rows;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: rollcache simulate (--config FILE ... | --limit SIZE [--admit SIZE]\n"
		"                           [--policy P[,P...]] [--min-uses N])\n"
		"                          --dataset SIZE --record-size SIZE [--epochs N]\n"
		"                          [--shard-size SIZE] [--seed S] [--svg FILE]\n"
		"                          [--svg-downloads FILE] [--csv] [--wide] [--first N]\n"
		"                          [--retire read|boundary]\n\n"
		"Runs the real eviction policies over a simulated sampler and a reader that\n"
		"reads every resident shard once per epoch, and prints per epoch: resident\n"
		"and fresh records, records evicted (and evicted before being read), distinct\n"
		"records read so far, coverage of the dataset, the best coverage any policy\n"
		"could reach with the same downloads (bound), and bytes downloaded.\n"
		"--config may be given up to %d times; --policy takes a comma list (fifo, lru,\n"
		"uses, random, none).  Defaults: --epochs 20, --shard-size from the config\n"
		"or limit/16 (64K to 64M), --seed 1, --admit limit/2, --retire as a mount's\n"
		"default (read; a --config run takes its file's).  --svg draws coverage and\n"
		"resident bytes per epoch; --svg-downloads draws coverage against bytes\n"
		"downloaded; --csv prints one CSV line per run and epoch instead of the\n"
		"tables; --wide adds seen/dl (distinct / downloaded records) and the note\n"
		"of each epoch to the 80-column tables.  --first N\n"
		"numbers the simulated epochs from N, with the schedule's entries at those\n"
		"numbers (default 0; 2 matches a mount whose first full view is epoch 2:\n"
		"epoch 0 starts empty, first_epoch makes epoch 1 from the first shard).\n"
		"See docs/eviction.md.\n",
		MAX_RUNS);
}

static int parse_u64(const char *flag, const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-') {
		fprintf(stderr, "rollcache simulate: %s %s: expected a whole number\n", flag, s);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

static int parse_size_flag(const char *flag, const char *s, uint64_t *out)
{
	char err[160];
	if (cmn_parse_size(s, out, err, sizeof(err)) < 0) {
		fprintf(stderr, "rollcache simulate: %s %s\n", flag, err);
		return -EINVAL;
	}
	return 0;
}

static const char *base_label(const char *path, char *buf, size_t len)
{
	const char *b = strrchr(path, '/');
	b = b ? b + 1 : path;
	snprintf(buf, len, "%s", b);
	char *dot = strrchr(buf, '.');
	if (dot && dot != buf)
		*dot = '\0';
	return buf;
}

/* A size in at most 10 characters, for the 80-column table: "512.0 MiB", "1023 GiB". */
static const char *short_size(uint64_t v, char *buf, size_t len)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	double x = (double)v;
	int i = 0;
	while (x >= 1023.95 && i < 6) {
		x /= 1024.0;
		i++;
	}
	if (i == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)v);
	else
		snprintf(buf, len, x < 99.95 ? "%.1f %s" : "%.0f %s", x, units[i]);
	return buf;
}

#define SIM_COLUMNS 80 /* without --wide, no line is longer (counts below 10^8) */

/*
 * One run's table.  80 columns: epoch, policy, resident, fresh, evicted,
 * unread, distinct, coverage, bound, downloaded; --wide adds seen/dl and
 * the note, and prints the exact sizes.  The notes and the summary are
 * wrapped to 80 columns unless wide.
 */
static void print_table(FILE *f, const struct run *r, const struct evc_sim_opts *o, bool wide)
{
	char a[32], b[32], c[32], line[512];
	const struct evc_sim_row *z = &r->rows[o->epochs - 1];
	uint64_t per_shard = o->shard_size / o->record_size ? o->shard_size / o->record_size : 1;
	size_t width = wide ? SIZE_MAX : SIM_COLUMNS;

	snprintf(line, sizeof(line), "== %s: %s", r->label, r->source);
	size_t slen = strlen(r->source);
	if (strlen(line) > width) /* a long path: its end, which names the file */
		snprintf(line, sizeof(line), "== %.30s: ...%s", r->label,
			 r->source + (slen > 40 ? slen - 40 : 0));
	fprintf(f, "%s\n", line);
	snprintf(line, sizeof(line),
		 "dataset %s = %llu records of %s, shards of %llu records, seed %llu",
		 cmn_format_size(o->dataset, a, sizeof(a)), (unsigned long long)z->dataset_records,
		 cmn_format_size(o->record_size, b, sizeof(b)), (unsigned long long)per_shard,
		 (unsigned long long)o->seed);
	fputs("   ", f);
	cli_wrap(f, line, 3, 5, width);
	for (size_t i = 0; i < r->sch.n; i++) {
		char d[200];
		fputs("   ", f);
		cli_wrap(f, evc_entry_describe(&r->sch.entries[i], d, sizeof(d)), 3, 5, width);
	}
	if (wide)
		fprintf(f, "%5s %-6s %9s %9s %9s %9s %9s %8s %8s %11s %7s  %s\n", "epoch", "policy",
			"resident", "fresh", "evicted", "unread", "distinct", "coverage", "bound",
			"downloaded", "seen/dl", "note");
	else
		fprintf(f, "%5s %-6s %8s %7s %7s %6s %8s %8s %6s %10s\n", "epoch", "policy",
			"resident", "fresh", "evicted", "unread", "distinct", "coverage", "bound",
			"downloaded");
	for (uint32_t e = 0; e < o->epochs; e++) {
		const struct evc_sim_row *w = &r->rows[e];
		double cov = 100.0 * (double)w->distinct / (double)w->dataset_records;
		double bnd = 100.0 * (double)w->bound / (double)w->dataset_records;
		double eff = w->downloaded_records
				 ? (double)w->distinct / (double)w->downloaded_records
				 : 0.0;
		if (wide)
			fprintf(f,
				"%5u %-6s %9llu %9llu %9llu %9llu %9llu %7.1f%% %7.1f%% %11s "
				"%7.2f  %s\n",
				w->epoch, cmn_policy_name(w->entry.policy),
				(unsigned long long)w->resident_records,
				(unsigned long long)w->fresh_records,
				(unsigned long long)w->evicted_records,
				(unsigned long long)w->evicted_unread,
				(unsigned long long)w->distinct, cov, bnd,
				cmn_format_size(w->downloaded_bytes, c, sizeof(c)), eff,
				w->reason == EVC_REASON_OK ? "" : evc_reason_name(w->reason));
		else
			fprintf(f, "%5u %-6s %8llu %7llu %7llu %6llu %8llu %7.1f%% %5.1f%% %10s\n",
				w->epoch, cmn_policy_name(w->entry.policy),
				(unsigned long long)w->resident_records,
				(unsigned long long)w->fresh_records,
				(unsigned long long)w->evicted_records,
				(unsigned long long)w->evicted_unread,
				(unsigned long long)w->distinct, cov, bnd,
				short_size(w->downloaded_bytes, c, sizeof(c)));
	}
	/* The first reason of each kind, in full. */
	unsigned shown = 0;
	for (uint32_t e = 0; e < o->epochs; e++) {
		const struct evc_sim_row *w = &r->rows[e];
		if (w->reason == EVC_REASON_OK || (shown & (1u << w->reason)))
			continue;
		shown |= 1u << w->reason;
		snprintf(line, sizeof(line), "note from epoch %u (%s): %s", w->epoch,
			 evc_reason_name(w->reason), w->why);
		fputs("   ", f);
		cli_wrap(f, line, 3, 5, width);
	}
	double cov = 100.0 * (double)z->distinct / (double)z->dataset_records;
	double bnd = 100.0 * (double)z->bound / (double)z->dataset_records;
	uint64_t dl = z->downloaded_records;
	snprintf(line, sizeof(line), "after %u epochs: coverage %.1f%% (bound %.1f%%)", o->epochs,
		 cov, bnd);
	fputs("   ", f);
	cli_wrap(f, line, 3, 5, width);
	snprintf(line, sizeof(line),
		 "downloaded %s (%.2fx the dataset), %.2f coverage per downloaded byte",
		 cmn_format_size(z->downloaded_bytes, a, sizeof(a)),
		 (double)z->downloaded_bytes / (double)o->dataset,
		 dl ? (double)z->distinct / (double)dl : 0.0);
	fputs("   ", f);
	cli_wrap(f, line, 3, 5, width);
	snprintf(line, sizeof(line), "evicted before read %llu records (%.1f%% of downloads)",
		 (unsigned long long)z->wasted_records,
		 dl ? 100.0 * (double)z->wasted_records / (double)dl : 0.0);
	fputs("   ", f);
	cli_wrap(f, line, 3, 5, width);
	fputc('\n', f);
}

/* One CSV for all runs: a header, then a line per run and epoch. */
static void print_csv(FILE *f, const struct run *runs, size_t n_runs, const struct evc_sim_opts *o)
{
	fprintf(f, "run,epoch,policy,limit,admit,min_uses,budget,resident_records,resident_bytes,"
		   "fresh_records,evicted_records,evicted_unread,distinct,dataset_records,"
		   "bound,downloaded_bytes,reason\n");
	for (size_t i = 0; i < n_runs; i++)
		for (uint32_t e = 0; e < o->epochs; e++) {
			const struct evc_sim_row *w = &runs[i].rows[e];
			fprintf(
			    f,
			    "%s,%u,%s,%llu,%llu,%u,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,"
			    "%llu,%s\n",
			    runs[i].label, w->epoch, cmn_policy_name(w->entry.policy),
			    (unsigned long long)w->entry.limit, (unsigned long long)w->entry.admit,
			    w->entry.min_uses, (unsigned long long)w->budget,
			    (unsigned long long)w->resident_records,
			    (unsigned long long)w->resident_bytes,
			    (unsigned long long)w->fresh_records,
			    (unsigned long long)w->evicted_records,
			    (unsigned long long)w->evicted_unread, (unsigned long long)w->distinct,
			    (unsigned long long)w->dataset_records, (unsigned long long)w->bound,
			    (unsigned long long)w->downloaded_bytes, evc_reason_name(w->reason));
		}
}

static int chart_to_file(const char *path, const char *flag, const struct evc_chart *c)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		int rc = -errno;
		fprintf(stderr, "rollcache simulate: %s %s: %s\n", flag, path, strerror(-rc));
		return rc;
	}
	int rc = evc_chart_svg(f, c);
	if (fclose(f) != 0 && rc == 0)
		rc = -EIO;
	if (rc < 0)
		fprintf(stderr, "rollcache simulate: %s %s: %s\n", flag, path, strerror(-rc));
	return rc;
}

static int write_svg(const char *path, const struct run *runs, size_t n_runs,
		     const struct evc_sim_opts *o)
{
	static const char *const colors[MAX_RUNS] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
						     "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};
	struct evc_series s[MAX_RUNS * 3];
	char labels[MAX_RUNS * 3][96], title[160], a[32], b[32];
	double *vals = calloc((size_t)o->epochs * MAX_RUNS * 3, sizeof(double));
	size_t ns = 0;
	int rc = 0;

	if (!vals)
		return -ENOMEM;
	for (size_t i = 0; i < n_runs; i++) {
		double *cov = vals + (size_t)o->epochs * ns;
		for (uint32_t e = 0; e < o->epochs; e++)
			cov[e] = 100.0 * (double)runs[i].rows[e].distinct /
				 (double)runs[i].rows[e].dataset_records;
		snprintf(labels[ns], sizeof(labels[ns]), "%.60s: coverage %%", runs[i].label);
		s[ns] =
		    (struct evc_series){labels[ns], NULL, cov, o->epochs, 0, EVC_SOLID, colors[i]};
		ns++;
		double *res = vals + (size_t)o->epochs * ns;
		for (uint32_t e = 0; e < o->epochs; e++)
			res[e] = (double)runs[i].rows[e].resident_bytes / (1024.0 * 1024 * 1024);
		snprintf(labels[ns], sizeof(labels[ns]), "%.60s: resident GiB", runs[i].label);
		s[ns] =
		    (struct evc_series){labels[ns], NULL, res, o->epochs, 1, EVC_DASHED, colors[i]};
		ns++;
		if (n_runs == 1) {
			double *bnd = vals + (size_t)o->epochs * ns;
			for (uint32_t e = 0; e < o->epochs; e++)
				bnd[e] = 100.0 * (double)runs[i].rows[e].bound /
					 (double)runs[i].rows[e].dataset_records;
			snprintf(labels[ns], sizeof(labels[ns]), "%.60s: bound (same downloads) %%",
				 runs[i].label);
			s[ns] = (struct evc_series){labels[ns], NULL,	    bnd,      o->epochs,
						    0,		EVC_DOTTED, "#555555"};
			ns++;
		}
	}
	snprintf(title, sizeof(title), "rollcache simulate: dataset %s, records of %s",
		 cmn_format_size(o->dataset, a, sizeof(a)),
		 cmn_format_size(o->record_size, b, sizeof(b)));
	struct evc_chart c = {
	    title, "epoch", "coverage of the dataset (%)", "resident (GiB)", 100.0, 0, 0, s, ns};
	rc = chart_to_file(path, "--svg", &c);
	free(vals);
	return rc;
}

/* Coverage against bytes downloaded: the slope is coverage per byte. */
static int write_svg_downloads(const char *path, const struct run *runs, size_t n_runs,
			       const struct evc_sim_opts *o)
{
	static const char *const colors[MAX_RUNS] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
						     "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};
	struct evc_series s[MAX_RUNS + 1];
	char labels[MAX_RUNS][96], title[160], a[32], b[32];
	size_t ne = (size_t)o->epochs + 1; /* a leading (0, 0) point */
	double *vals = calloc(ne * 2 * (MAX_RUNS + 1), sizeof(double));
	double xmax = 0, ideal_x[3], ideal_y[3];
	int rc;

	if (!vals)
		return -ENOMEM;
	for (size_t i = 0; i < n_runs; i++) {
		double *x = vals + ne * 2 * i, *y = x + ne;
		for (uint32_t e = 0; e < o->epochs; e++) {
			const struct evc_sim_row *w = &runs[i].rows[e];
			x[e + 1] = (double)w->downloaded_bytes / (1024.0 * 1024 * 1024);
			y[e + 1] = 100.0 * (double)w->distinct / (double)w->dataset_records;
			if (x[e + 1] > xmax)
				xmax = x[e + 1];
		}
		snprintf(labels[i], sizeof(labels[i]), "%.60s", runs[i].label);
		s[i] = (struct evc_series){labels[i], x, y, ne, 0, EVC_SOLID, colors[i]};
	}
	/* Ideal: every downloaded byte is a record the model has not seen. */
	double ds = (double)o->dataset / (1024.0 * 1024 * 1024);
	ideal_x[0] = 0;
	ideal_y[0] = 0;
	ideal_x[1] = ds;
	ideal_y[1] = 100;
	ideal_x[2] = xmax > ds ? xmax : ds;
	ideal_y[2] = 100;
	s[n_runs] = (struct evc_series){"ideal: every downloaded byte new and read",
					ideal_x,
					ideal_y,
					3,
					0,
					EVC_DOTTED,
					"#555555"};
	snprintf(title, sizeof(title), "coverage per downloaded byte: dataset %s, records of %s",
		 cmn_format_size(o->dataset, a, sizeof(a)),
		 cmn_format_size(o->record_size, b, sizeof(b)));
	struct evc_chart c = {
	    title, "downloaded (GiB)", "coverage of the dataset (%)", NULL, 100.0, 0, 0,
	    s,	   n_runs + 1};
	rc = chart_to_file(path, "--svg-downloads", &c);
	free(vals);
	return rc;
}

/* Loads one config into a run.  Returns 0 or 2 (message printed). */
static int load_config_run(const char *path, struct run *r, uint64_t *shard_size)
{
	struct cmn_config c;
	char err[320];
	int rc;

	cmn_config_init(&c);
	rc = cmn_config_load_file(&c, path, err, sizeof(err));
	if (rc == 0)
		rc = cmn_config_finish(&c, err, sizeof(err));
	if (rc == 0)
		rc = evc_schedule_build(c.epochs, c.n_epochs, c.limit, path, &r->sch, err,
					sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "rollcache simulate: %s\n", err);
		cmn_config_free(&c);
		return 2;
	}
	if (*shard_size == 0)
		*shard_size = c.shard_size;
	r->retire_read = c.retire == CMN_RETIRE_READ;
	base_label(path, r->label, sizeof(r->label));
	snprintf(r->source, sizeof(r->source), "%s", path);
	cmn_config_free(&c);
	return 0;
}

int cmd_simulate(int argc, char **argv)
{
	struct run runs[MAX_RUNS];
	const char *configs[MAX_RUNS], *svg = NULL, *svg_dl = NULL, *policies = NULL;
	size_t n_configs = 0, n_runs = 0;
	uint64_t dataset = 0, record_size = 0, epochs = 20, shard_size = 0, seed = 1, first = 0;
	uint64_t limit = 0, admit = 0, min_uses = 0;
	int has_admit = 0, csv = 0, code = 2, retire = -1; /* -1: the mount's default */
	bool wide = false;
	char err[320];

	memset(runs, 0, sizeof(runs));
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = NULL;
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			usage(stdout);
			return 0;
		}
		if (strcmp(a, "--csv") == 0) {
			csv = 1;
			continue;
		}
		if (strcmp(a, "--wide") == 0) {
			wide = true;
			continue;
		}
		if (strncmp(a, "--", 2) != 0) {
			fprintf(stderr,
				"rollcache simulate: unexpected argument '%s': see --help\n", a);
			return 2;
		}
		char name[32];
		const char *eq = strchr(a, '=');
		size_t nl = eq ? (size_t)(eq - a) : strlen(a);
		if (nl >= sizeof(name)) {
			fprintf(stderr, "rollcache simulate: unknown option '%s': see --help\n", a);
			return 2;
		}
		memcpy(name, a, nl);
		name[nl] = '\0';
		if (eq)
			v = eq + 1;
		else if (i + 1 < argc)
			v = argv[++i];
		if (!v) {
			fprintf(stderr, "rollcache simulate: %s needs a value: see --help\n", name);
			return 2;
		}
		int rc = 0;
		if (strcmp(name, "--config") == 0) {
			if (n_configs == MAX_RUNS) {
				fprintf(stderr, "rollcache simulate: at most %d --config files\n",
					MAX_RUNS);
				return 2;
			}
			configs[n_configs++] = v;
		} else if (strcmp(name, "--dataset") == 0) {
			rc = parse_size_flag(name, v, &dataset);
		} else if (strcmp(name, "--record-size") == 0) {
			rc = parse_size_flag(name, v, &record_size);
		} else if (strcmp(name, "--shard-size") == 0) {
			rc = parse_size_flag(name, v, &shard_size);
		} else if (strcmp(name, "--limit") == 0) {
			rc = parse_size_flag(name, v, &limit);
		} else if (strcmp(name, "--admit") == 0) {
			rc = parse_size_flag(name, v, &admit);
			has_admit = 1;
		} else if (strcmp(name, "--retire") == 0) {
			if (strcmp(v, "read") != 0 && strcmp(v, "boundary") != 0) {
				fprintf(
				    stderr,
				    "rollcache simulate: --retire %s: expected read or boundary\n",
				    v);
				return 2;
			}
			retire = v[0] == 'r' ? 1 : 0;
		} else if (strcmp(name, "--epochs") == 0) {
			rc = parse_u64(name, v, &epochs);
		} else if (strcmp(name, "--seed") == 0) {
			rc = parse_u64(name, v, &seed);
		} else if (strcmp(name, "--first") == 0) {
			rc = parse_u64(name, v, &first);
			if (rc == 0 && first > 1000000) {
				fprintf(stderr, "rollcache simulate: --first %s: at most 1000000\n",
					v);
				return 2;
			}
		} else if (strcmp(name, "--min-uses") == 0 || strcmp(name, "--min_uses") == 0) {
			rc = parse_u64(name, v, &min_uses);
		} else if (strcmp(name, "--policy") == 0) {
			policies = v;
		} else if (strcmp(name, "--svg") == 0) {
			svg = v;
		} else if (strcmp(name, "--svg-downloads") == 0) {
			svg_dl = v;
		} else {
			fprintf(stderr, "rollcache simulate: unknown option '%s': see --help\n",
				name);
			return 2;
		}
		if (rc < 0)
			return 2;
	}
	if (!dataset || !record_size) {
		fprintf(stderr, "rollcache simulate: --dataset SIZE and --record-size SIZE are "
				"required: see --help\n");
		return 2;
	}
	if (epochs == 0 || epochs > 100000) {
		fprintf(stderr, "rollcache simulate: --epochs %llu: expected 1 to 100000\n",
			(unsigned long long)epochs);
		return 2;
	}
	if (min_uses > UINT32_MAX) {
		fprintf(stderr, "rollcache simulate: --min-uses %llu is too large\n",
			(unsigned long long)min_uses);
		return 2;
	}
	if (n_configs == 0 && !limit) {
		fprintf(stderr,
			"rollcache simulate: give --config FILE (a schedule) or --limit SIZE "
			"[--policy P]: see --help\n");
		return 2;
	}
	if (limit && has_admit && admit > limit) {
		fprintf(stderr, "rollcache simulate: --admit is above --limit: lower --admit\n");
		return 2;
	}
	if (!limit && (policies || has_admit)) {
		fprintf(stderr, "rollcache simulate: --policy and --admit need --limit SIZE\n");
		return 2;
	}

	for (size_t i = 0; i < n_configs; i++) {
		code = load_config_run(configs[i], &runs[n_runs], &shard_size);
		if (code)
			goto out;
		n_runs++;
	}
	if (limit) {
		char list[256];
		snprintf(list, sizeof(list), "%s", policies ? policies : "fifo");
		for (char *save = NULL, *p = strtok_r(list, ",", &save); p;
		     p = strtok_r(NULL, ",", &save)) {
			struct cmn_epoch_section sec = {0};
			if (n_runs == MAX_RUNS) {
				fprintf(stderr, "rollcache simulate: at most %d runs in all\n",
					MAX_RUNS);
				code = 2;
				goto out;
			}
			if (cmn_policy_parse(p, &sec.policy) < 0) {
				fprintf(
				    stderr,
				    "rollcache simulate: --policy %s: expected fifo, lru, uses, "
				    "random or none\n",
				    p);
				code = 2;
				goto out;
			}
			sec.first = 0;
			sec.last = CMN_EPOCH_OPEN;
			sec.has_policy = true;
			sec.has_limit = true;
			sec.limit = limit;
			sec.has_admit = has_admit;
			sec.admit = admit;
			sec.has_min_uses = true;
			sec.min_uses = (uint32_t)min_uses;
			struct run *r = &runs[n_runs];
			struct cmn_config defaults;
			cmn_config_init(&defaults); /* a mount with only these flags */
			r->retire_read =
			    retire >= 0 ? retire == 1 : defaults.retire == CMN_RETIRE_READ;
			if (evc_schedule_build(&sec, 1, limit, "--limit", &r->sch, err,
					       sizeof(err)) < 0) {
				fprintf(stderr, "rollcache simulate: %s\n", err);
				code = 2;
				goto out;
			}
			snprintf(r->label, sizeof(r->label), "%s", p);
			snprintf(r->source, sizeof(r->source), "--policy %s", p);
			n_runs++;
		}
	}
	if (shard_size == 0)
		shard_size = cmn_config_derived_shard_size(limit);
	/* A shard larger than an entry's admit budget can never be admitted. */
	for (size_t i = 0; i < n_runs; i++)
		for (size_t j = 0; j < runs[i].sch.n; j++) {
			const struct evc_entry *e = &runs[i].sch.entries[j];
			char a[32], b[32], d[200];
			if (e->admit && e->admit < shard_size)
				fprintf(
				    stderr,
				    "rollcache simulate: warning: %s: %s: admit %s is below the "
				    "shard size %s, so no fresh shard fits; see --shard-size\n",
				    runs[i].label, evc_entry_describe(e, d, sizeof(d)),
				    cmn_format_size(e->admit, a, sizeof(a)),
				    cmn_format_size(shard_size, b, sizeof(b)));
		}

	struct evc_sim_opts o = {dataset, record_size, shard_size,     (uint32_t)epochs,
				 seed,	  false,       (uint32_t)first};
	for (size_t i = 0; i < n_runs; i++) {
		runs[i].rows = calloc(o.epochs, sizeof(*runs[i].rows));
		if (!runs[i].rows) {
			fprintf(stderr, "rollcache simulate: out of memory\n");
			code = 1;
			goto out;
		}
		o.retire_read = runs[i].retire_read;
		int rc = evc_sim_run(&o, &runs[i].sch, runs[i].rows, err, sizeof(err));
		if (rc < 0) {
			fprintf(stderr, "rollcache simulate: %s\n", err);
			code = rc == -EINVAL ? 2 : 1;
			goto out;
		}
		if (!csv)
			print_table(stdout, &runs[i], &o, wide);
	}
	if (csv)
		print_csv(stdout, runs, n_runs, &o);
	code = 0;
	if (svg && write_svg(svg, runs, n_runs, &o) < 0)
		code = 1;
	if (svg_dl && write_svg_downloads(svg_dl, runs, n_runs, &o) < 0)
		code = 1;
out:
	for (size_t i = 0; i < MAX_RUNS; i++) {
		evc_schedule_free(&runs[i].sch);
		free(runs[i].rows);
	}
	return code;
}
