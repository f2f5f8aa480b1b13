/*
 * cmd_control.c - `rollcache umount`, `epoch` and `status`: the commands
 * that talk to a running mount daemon through its files.
 *
 *   rollcache umount MOUNTPOINT
 *   rollcache epoch MOUNTPOINT [next [N] [--wait] | show]
 *   rollcache status MOUNTPOINT [--json] [--watch]
 *
 * They send commands to MOUNTPOINT/.rollcache/control (common/control.c)
 * and read .rollcache/stats, the JSON of docs/mount.md, parsed with jansson (read with a cap of
 * STATS_MAX); every figure they print comes from it.  umount runs fusermount3 and falls back to a
 * lazy unmount for a dead daemon.  They hold no state and link nothing of the daemon: any build can
 * drive any mount.
 */
#include "cli/cmd.h"
#include "cli/util.h"
#include "common/control.h"
#include "common/file.h"
#include "common/units.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/*
 * Cap on .rollcache/stats: the daemon's own cap on the text it serves
 * (daemon/stats.c), which grows with the epochs[] rows of a long run.
 */
#define STATS_MAX ((size_t)16 << 20)

/* ---- talking to a running daemon ------------------------------------- */

/*
 * What the commands show of a mount, taken from its stats JSON (field names
 * in docs/mount.md).  The strings are borrowed from the json_t it was filled
 * from and live as long as it does; a field the JSON lacks reads 0 or "".
 */
struct mount_view {
	const char *source, *advance, *policy, *why;
	const char *wait;	/* why the last `next --wait` went ahead early, or "" */
	const char *last_error; /* the last warning or error logged, or "" */
	const char *last_level;
	uint64_t last_error_ms; /* its time (ms since 1970), 0: none */
	bool sampler_stopped;
	const char *sampler_state; /* "running", "waiting: ..." (a current daemon), or "" */
	uint64_t listed_objects;
	long long pid;
	uint64_t epoch; /* 0 before the first epoch ("epoch": null) */
	uint64_t limit, used, draining, min_records, resident_records;
	uint64_t admit, admit_used;	   /* the epoch's admit budget and its use */
	bool waiting_admit, waiting_limit; /* samplers blocked on the admit or the limit */
	bool sampler_idle;		   /* their pass is over: nothing more this epoch */
	uint64_t current_files, current_records, read_bytes;
	uint64_t admitted, evicted; /* the current epoch's row of epochs[] */
	uint64_t open_handles, passthrough_opens;
	uint64_t errors; /* the sum of errors.* */
	bool passthrough;
	double ingest_bps;
};

/* obj[key] as a number (true counts 1); 0 when obj or the key is missing or of another type. */
static double jnum(const json_t *obj, const char *key)
{
	const json_t *v = json_object_get(obj, key);
	return json_is_true(v) ? 1.0 : json_number_value(v);
}

/* obj[key] as a count: a JSON integer, 0 when missing, negative or of another type. */
static uint64_t jcount(const json_t *obj, const char *key)
{
	const json_t *v = json_object_get(obj, key);
	json_int_t i = json_is_integer(v) ? json_integer_value(v) : 0;
	return i > 0 ? (uint64_t)i : 0;
}

/* obj[key] as a string borrowed from obj; "" when missing or of another type. */
static const char *jstr(const json_t *obj, const char *key)
{
	const char *s = json_string_value(json_object_get(obj, key));
	return s ? s : "";
}

/* Fills *v from the stats object root; v borrows root's strings. */
static void mount_view_of(const json_t *root, struct mount_view *v)
{
	const json_t *epoch = json_object_get(root, "epoch");
	const json_t *current = json_object_get(root, "current");
	const json_t *view = json_object_get(root, "view");
	const json_t *boundary = json_object_get(root, "last_boundary");
	memset(v, 0, sizeof(*v));
	v->source = jstr(root, "source");
	v->advance = jstr(root, "advance");
	v->policy = jstr(json_object_get(root, "schedule"), "policy");
	v->why = jstr(boundary, "why");
	v->wait = jstr(boundary, "wait");
	const json_t *last = json_object_get(root, "last_error");
	v->last_error = jstr(last, "message");
	v->last_level = jstr(last, "level");
	v->last_error_ms = jcount(last, "unix_ms");
	v->sampler_stopped =
	    json_is_true(json_object_get(json_object_get(root, "sampler"), "stopped"));
	v->sampler_idle = json_is_true(json_object_get(json_object_get(root, "sampler"), "idle"));
	v->sampler_state = jstr(json_object_get(root, "sampler"), "state");
	v->listed_objects = jcount(json_object_get(root, "sampler"), "listed_objects");
	v->pid = json_integer_value(json_object_get(root, "pid"));
	v->epoch = jcount(root, "epoch");
	v->limit = jcount(root, "limit");
	v->used = jcount(root, "used");
	v->draining = jcount(json_object_get(root, "disk"), "draining");
	v->min_records = jcount(root, "min_records");
	v->resident_records = jcount(json_object_get(root, "resident"), "records");
	const json_t *adm = json_object_get(root, "admission");
	v->admit = jcount(adm, "admit");
	v->admit_used = jcount(adm, "admit_used");
	v->waiting_admit = jcount(adm, "waiting_admit") > 0;
	v->waiting_limit = jcount(adm, "waiting_limit") > 0;
	v->current_files = jcount(current, "files");
	v->current_records = jcount(current, "records");
	v->read_bytes = jcount(current, "read_bytes");
	v->open_handles = jcount(view, "open_handles");
	v->passthrough = json_is_true(json_object_get(view, "passthrough"));
	v->passthrough_opens = jcount(view, "passthrough_opens");
	v->ingest_bps = jnum(json_object_get(root, "sampler"), "ingest_bytes_per_s");
	/* "epoch": null (none begun yet) has no row of its own */
	const json_t *rows = json_object_get(root, "epochs");
	for (size_t i = 0; json_is_integer(epoch) && i < json_array_size(rows); i++) {
		const json_t *row = json_array_get(rows, i);
		if (jcount(row, "epoch") == v->epoch) {
			v->admitted = jcount(row, "admitted_bytes");
			v->evicted = jcount(row, "evicted_bytes");
		}
	}
	const char *key;
	const json_t *n;
	json_object_foreach((json_t *)json_object_get(root, "errors"), key, n) v->errors +=
	    json_is_integer(n) && json_integer_value(n) > 0 ? (uint64_t)json_integer_value(n) : 0;
}

/*
 * Reads and parses MP/.rollcache/stats.  On success *root is its top-level
 * object (json_decref() by the caller) and, when text is not NULL, *text the
 * text as read (free() by the caller).  Returns 0, the read's -errno
 * (-ENOENT: not a mount, -ENOTCONN: a dead daemon, -EFBIG: over STATS_MAX),
 * or -EBADMSG when the text is not a JSON object, with jansson's reason in
 * err[errlen]; on failure *root and *text are unchanged.
 */
static int stats_load(const char *mp, json_t **root, char **text, char *err, size_t errlen)
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof(path), "%s/.rollcache/stats", mp) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	char *buf = NULL;
	size_t len = 0;
	int rc = cmn_read_file_capped(path, STATS_MAX, &buf, &len);
	if (rc != 0)
		return rc;
	json_error_t jerr;
	json_t *js = json_loadb(buf, len, 0, &jerr);
	if (!json_is_object(js)) {
		if (js)
			snprintf(err, errlen, "not a JSON object");
		else
			snprintf(err, errlen, "line %d: %s", jerr.line, jerr.text);
		json_decref(js);
		free(buf);
		return -EBADMSG;
	}
	*root = js;
	if (text)
		*text = buf;
	else
		free(buf);
	return 0;
}

/* Writes s to f with control characters as '?': a stats string cannot redraw the terminal. */
static void put_clean(const char *s, FILE *f)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		fputc(*p < 0x20 || *p == 0x7f ? '?' : *p, f);
}

/*
 * Says on stderr why MP's stats could not be read (rc from stats_load(), err
 * its reason for -EBADMSG).  Returns the exit code, 1.
 */
static int mp_error(const char *cmd, const char *mp, int rc, const char *err)
{
	if (rc == -EBADMSG)
		fprintf(stderr,
			"rollcache %s: %s/.rollcache/stats is not the stats JSON of a mount (%s)\n",
			cmd, mp, err);
	else if (rc == -ENOENT)
		fprintf(stderr, "rollcache %s: %s is not a rollcache mount (no .rollcache/)\n", cmd,
			mp);
	else if (rc == -ENOTCONN ||
		 rc == -ECONNABORTED) /* the latter while the kernel tears down */
		fprintf(stderr,
			"rollcache %s: %s: the daemon is gone; mount it again (the same "
			"`rollcache mount`) or run `rollcache umount %s`\n",
			cmd, mp, mp);
	else
		fprintf(stderr, "rollcache %s: %s: %s\n", cmd, mp, strerror(-rc));
	return 1;
}

/* ---- umount ---------------------------------------------------------------- */

/*
 * Whether pid still runs.  A zombie has exited - its locks and files are
 * released - but answers kill(0) until its parent reaps it, which for a
 * detached daemon is whatever init the machine has (seconds in some
 * containers): /proc says which.
 */
static bool pid_alive(pid_t pid)
{
	if (kill(pid, 0) != 0 && errno != EPERM)
		return false;
	char path[64], buf[256];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return true; /* no /proc: trust kill() */
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *rp = strrchr(buf, ')'); /* "pid (comm) S ...": comm may hold ')' */
	return !(rp && rp[1] == ' ' && rp[2] == 'Z');
}

int cmd_umount(int argc, char **argv)
{
	if (argc != 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		fprintf(argc == 2 ? stdout : stderr, "usage: rollcache umount MOUNTPOINT\n");
		return argc == 2 ? 0 : 2;
	}
	char mp[PATH_MAX];
	if (cli_absolute_path(argv[1], mp, sizeof(mp)) != 0) {
		fprintf(stderr, "rollcache umount: %s: path too long\n", argv[1]);
		return 2;
	}
	/* The daemon's pid, to wait until it has closed the cache (its lock). */
	pid_t pid = 0;
	json_t *st = NULL;
	char err[256];
	if (stats_load(mp, &st, NULL, err, sizeof(err)) == 0) {
		struct mount_view v;
		mount_view_of(st, &v);
		if (v.pid > 0 && v.pid <= INT_MAX)
			pid = (pid_t)v.pid;
		json_decref(st);
	}
	const char *plain[] = {"fusermount3", "-u", mp, NULL};
	const char *lazy[] = {"fusermount3", "-u", "-z", mp, NULL};
	if (cli_run(plain, true, NULL) != 0) {
		if (cli_run(lazy, true, NULL) != 0 && umount2(mp, MNT_DETACH) != 0) {
			fprintf(stderr,
				"rollcache umount: %s: cannot unmount (%s): is it mounted?\n", mp,
				strerror(errno));
			return 1;
		}
		fprintf(stderr, "rollcache umount: %s was busy or dead: detached lazily\n", mp);
	}
	if (pid > 0) {
		for (int i = 0; i < 300 && pid_alive(pid); i++) {
			struct timespec ts = {0, 100 * 1000000L};
			nanosleep(&ts, NULL);
		}
		if (pid_alive(pid)) {
			fprintf(stderr,
				"rollcache umount: daemon pid %d still running after 30 s\n",
				(int)pid);
			return 1;
		}
	}
	return 0;
}

/* ---- epoch ------------------------------------------------------------------ */

/* One command sent from its own thread, so the caller can show progress. */
struct control_call {
	const char *path;
	const char *cmd;
	int rc;
	bool done; /* protected by mu */
	pthread_mutex_t mu;
	pthread_cond_t cond; /* signalled when done */
};

static void *control_main(void *arg)
{
	struct control_call *c = arg;
	int rc = cmn_control_send(c->path, c->cmd);
	pthread_mutex_lock(&c->mu);
	c->rc = rc;
	c->done = true;
	pthread_cond_signal(&c->cond);
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

/* Waits up to ms for the call to end; returns whether it has. */
static bool control_wait(struct control_call *c, long ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&c->mu);
	while (!c->done && pthread_cond_timedwait(&c->cond, &c->mu, &ts) == 0)
		;
	bool done = c->done;
	pthread_mutex_unlock(&c->mu);
	return done;
}

/* The one-line summary of `epoch show` and `epoch next`, from a mount's stats. */
static void print_epoch(const struct mount_view *v)
{
	char b1[32], b2[32], b3[32];
	printf("epoch %" PRIu64 ": %" PRIu64 " files, %" PRIu64 " records; admitted %s, evicted %s "
	       "this epoch; disk %s\n",
	       v->epoch, v->current_files, v->current_records,
	       cmn_format_size(v->admitted, b1, sizeof(b1)),
	       cmn_format_size(v->evicted, b2, sizeof(b2)),
	       cmn_format_size(v->used, b3, sizeof(b3)));
}

/*
 * Loads MP's stats and prints the epoch line.  Returns 0 or stats_load()'s
 * error, said on stderr for `rollcache epoch`.
 */
static int show_epoch(const char *mp)
{
	json_t *st = NULL;
	char err[256];
	int rc = stats_load(mp, &st, NULL, err, sizeof(err));
	if (rc != 0)
		return mp_error("epoch", mp, rc, err);
	struct mount_view v;
	mount_view_of(st, &v);
	print_epoch(&v);
	json_decref(st);
	return 0;
}

/*
 * The progress line of `epoch next --wait`, at most 79 columns: what the
 * daemon waits for (docs/mount.md, "Epochs": min_records resident, or the
 * samplers blocked on the epoch's admit or the limit, idle or stopped: it
 * goes ahead a second after), how far it is, and the admission rate.  Once
 * min_records are resident the call still runs the rest of the boundary
 * (the samplers' pause, the snapshot).
 */
static void wait_progress(const struct mount_view *v, char *out, size_t len)
{
	double mbs = v->ingest_bps / 1e6;
	if (v->resident_records >= v->min_records)
		snprintf(out, len,
			 "min_records reached (%" PRIu64 "/%" PRIu64
			 " records): finishing the boundary, %.1f MB/s",
			 v->resident_records, v->min_records, mbs);
	else if (v->waiting_admit || v->waiting_limit || v->sampler_idle || v->sampler_stopped)
		snprintf(out, len,
			 "waiting for min_records: %" PRIu64 "/%" PRIu64 " records; %s, %.1f MB/s",
			 v->resident_records, v->min_records,
			 v->sampler_stopped ? "samplers stopped"
			 : v->sampler_idle  ? "source has no more"
			 : v->waiting_admit ? "admit used up"
					    : "cache at its limit",
			 mbs);
	else
		snprintf(out, len,
			 "waiting for min_records or admit: %" PRIu64 "/%" PRIu64
			 " records, %.1f/%.1f MB, %.1f MB/s",
			 v->resident_records, v->min_records, (double)v->admit_used / 1e6,
			 (double)v->admit / 1e6, mbs);
	if (strlen(out) > 79)
		out[79] = '\0';
}

#define EPOCH_USAGE "usage: rollcache epoch MOUNTPOINT [next [N] [--wait] | show]\n"

/* Whether s is a decimal epoch number (at most 10 digits); *n gets it. */
static bool parse_epoch_number(const char *s, uint64_t *n)
{
	size_t len = strlen(s);
	if (len == 0 || len > 10 || strspn(s, "0123456789") != len)
		return false;
	*n = strtoull(s, NULL, 10);
	return *n <= UINT32_MAX;
}

/*
 * `epoch MP next N` asks for epoch N: every rank of a job may run it, the
 * mount advances once, and N <= the current epoch returns at once (the
 * daemon's "next N", docs/mount.md).
 */
int cmd_epoch(int argc, char **argv)
{
	const char *mp = NULL, *action = "show";
	bool wait = false, have_n = false;
	uint64_t n = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			printf(EPOCH_USAGE);
			return 0;
		} else if (!strcmp(argv[i], "--wait")) {
			wait = true;
		} else if (!mp) {
			mp = argv[i];
		} else if (!strcmp(argv[i], "next") || !strcmp(argv[i], "show")) {
			action = argv[i];
		} else if (!strcmp(action, "next") && !have_n && parse_epoch_number(argv[i], &n)) {
			have_n = true;
		} else {
			fprintf(stderr, "rollcache epoch: unexpected argument `%s`\n", argv[i]);
			return 2;
		}
	}
	if (!mp || (wait && strcmp(action, "next") != 0)) {
		fprintf(stderr, EPOCH_USAGE);
		return 2;
	}
	if (!strcmp(action, "show"))
		return show_epoch(mp);
	json_t *st = NULL;
	char err[256];
	int rc = stats_load(mp, &st, NULL, err, sizeof(err));
	if (rc != 0)
		return mp_error("epoch", mp, rc, err);
	json_decref(st);
	char path[PATH_MAX], cmd[64];
	snprintf(path, sizeof(path), "%s/.rollcache/control", mp);
	if (have_n)
		snprintf(cmd, sizeof(cmd), "next %" PRIu64 "%s", n, wait ? " wait" : "");
	else
		snprintf(cmd, sizeof(cmd), "%s", wait ? "next wait" : "next");
	struct control_call c = {.path = path,
				 .cmd = cmd,
				 .mu = PTHREAD_MUTEX_INITIALIZER,
				 .cond = PTHREAD_COND_INITIALIZER};
	pthread_t t;
	if (pthread_create(&t, NULL, control_main, &c) != 0) {
		fprintf(stderr, "rollcache epoch: cannot start a thread\n");
		return 1;
	}
	bool tty = isatty(2);
	bool shown = false;
	/* the answer ends the wait at once; progress is shown every 250 ms */
	while (!control_wait(&c, 250)) {
		if (!wait)
			continue;
		if (stats_load(mp, &st, NULL, err, sizeof(err)) == 0) {
			struct mount_view v;
			char line[160];
			mount_view_of(st, &v);
			wait_progress(&v, line, sizeof(line));
			if (tty) /* padded: it overwrites a longer line before */
				fprintf(stderr, "\r%-79s", line);
			else
				fprintf(stderr, "%s\n", line);
			/* samplers that cannot admit (a full disk, ...): say why */
			if (!strncmp(v.sampler_state, "waiting", 7)) {
				fputs(tty ? "\n  samplers " : "  samplers ", stderr);
				put_clean(v.sampler_state, stderr);
				fputs("\n", stderr);
			}
			shown = true;
			json_decref(st);
		}
	}
	pthread_join(t, NULL);
	if (shown && tty)
		fputc('\n', stderr);
	if (c.rc != 0) {
		fprintf(stderr, "rollcache epoch: %s: %s\n", mp, strerror(-c.rc));
		return 1;
	}
	/* the epoch has advanced: a failure to show it is said, not an error */
	show_epoch(mp);
	if (wait && stats_load(mp, &st, NULL, err, sizeof(err)) == 0) {
		struct mount_view v;
		mount_view_of(st, &v);
		if (v.wait[0]) { /* it went ahead before min_records: say why */
			fputs("rollcache epoch: went ahead without min_records: ", stderr);
			put_clean(v.wait, stderr);
			fputc('\n', stderr);
		}
		json_decref(st);
	}
	return 0;
}

/* ---- status ------------------------------------------------------------------ */

#define STATUS_COLUMNS 80 /* without --wide, no line is longer */

static volatile sig_atomic_t status_stop;

static void status_sig(int sig)
{
	(void)sig;
	status_stop = 1;
}

/*
 * Prints MP's status once: the stats text as read (json) or the view of
 * docs/mount.md, after clearing the terminal when clear.  Returns 0 or
 * stats_load()'s error (reason in err[errlen]); nothing is printed then.
 */
static int status_once(const char *mp, bool json, bool clear, bool wide, char *err, size_t errlen)
{
	json_t *st = NULL;
	char *text = NULL;
	int rc = stats_load(mp, &st, &text, err, errlen);
	if (rc != 0)
		return rc;
	if (json) {
		fputs(text, stdout);
		fflush(stdout);
		free(text);
		json_decref(st);
		return 0;
	}
	free(text);
	struct mount_view v;
	mount_view_of(st, &v);
	double frac = v.limit > 0 ? (double)v.used / (double)v.limit : 0;
	int barw = wide ? 40 : 20;
	char bar[41];
	int fill = (int)(frac * barw + 0.5);
	for (int i = 0; i < barw; i++)
		bar[i] = i < fill ? '#' : '.';
	bar[barw] = '\0';
	char b1[32], b2[32], b3[32], b4[32], b5[32], b6[32];
	FILE *m;
	char *buf = NULL;
	size_t len = 0;
	/* the lines go through a memory stream, then out cut to 80 columns */
	m = open_memstream(&buf, &len);
	if (!m) {
		json_decref(st);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	fputs("rollcache ", m);
	put_clean(v.source, m);
	fprintf(m, " on %s\nepoch    %" PRIu64 " (advance ", mp, v.epoch);
	put_clean(v.advance, m);
	fputs(", policy ", m);
	put_clean(v.policy, m);
	fputs(")\n", m);
	fprintf(m, "disk     [%s] %s / %s (%.0f%%), draining %s\n", bar,
		cmn_format_size(v.used, b1, sizeof(b1)), cmn_format_size(v.limit, b2, sizeof(b2)),
		frac * 100, cmn_format_size(v.draining, b3, sizeof(b3)));
	fprintf(m, "ingest   %.1f MB/s; admitted %s, evicted %s this epoch\n", v.ingest_bps / 1e6,
		cmn_format_size(v.admitted, b4, sizeof(b4)),
		cmn_format_size(v.evicted, b5, sizeof(b5)));
	fprintf(m,
		"current  %" PRIu64 " files, %" PRIu64 " records; %" PRIu64
		" records resident; %" PRIu64 " open handles\n",
		v.current_files, v.current_records, v.resident_records, v.open_handles);
	fprintf(m, "reads    %s this epoch; passthrough %s (%" PRIu64 " opens passed through)\n",
		cmn_format_size(v.read_bytes, b6, sizeof(b6)), v.passthrough ? "on" : "off",
		v.passthrough_opens);
	fprintf(m, "errors   %" PRIu64 "%s", v.errors, v.why[0] ? "; " : "");
	put_clean(v.why, m);
	fputc('\n', m);
	if (v.sampler_stopped) {
		fputs("sampler  STOPPED (see last)\n", m);
	} else if (v.sampler_state[0]) {
		fputs("sampler  ", m);
		put_clean(v.sampler_state, m);
		fprintf(m, "; %" PRIu64 " objects listed\n", v.listed_objects);
	}
	if (v.last_error_ms) { /* the last warning or error, with its time */
		time_t t = (time_t)(v.last_error_ms / 1000);
		struct tm tm;
		char when[32];
		localtime_r(&t, &tm);
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
		fprintf(m, "last     %s %s: ", when, v.last_level);
		put_clean(v.last_error, m);
		fputc('\n', m);
	}
	fclose(m);
	json_decref(st);
	if (clear)
		fputs("\033[H\033[J", stdout);
	for (char *line = buf, *nl; line && *line; line = nl + 1) {
		nl = strchr(line, '\n');
		size_t n = nl ? (size_t)(nl - line) : strlen(line);
		if (!wide && n > STATUS_COLUMNS)
			printf("%.*s...\n", STATUS_COLUMNS - 3, line);
		else
			printf("%.*s\n", (int)n, line);
		if (!nl)
			break;
	}
	free(buf);
	fflush(stdout);
	return 0;
}

int cmd_status(int argc, char **argv)
{
	const char *mp = NULL;
	bool json = false, watch = false, wide = false;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			printf("usage: rollcache status MOUNTPOINT [--json] [--watch] [--wide]\n"
			       "  --json   the mount's .rollcache/stats as is\n"
			       "  --watch  again every second until interrupted\n"
			       "  --wide   lines longer than 80 columns are not cut\n");
			return 0;
		} else if (!strcmp(argv[i], "--json")) {
			json = true;
		} else if (!strcmp(argv[i], "--wide")) {
			wide = true;
		} else if (!strcmp(argv[i], "--watch")) {
			watch = true;
		} else if (!mp) {
			mp = argv[i];
		} else {
			fprintf(stderr, "rollcache status: unexpected argument `%s`\n", argv[i]);
			return 2;
		}
	}
	if (!mp) {
		fprintf(stderr, "usage: rollcache status MOUNTPOINT [--json] [--watch] [--wide]\n");
		return 2;
	}
	char err[256];
	if (!watch) {
		int rc = status_once(mp, json, false, wide, err, sizeof(err));
		return rc ? mp_error("status", mp, rc, err) : 0;
	}
	struct sigaction sa = {.sa_handler = status_sig};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	while (!status_stop) {
		int rc = status_once(mp, json, isatty(1) && !json, wide, err, sizeof(err));
		if (rc != 0)
			return mp_error("status", mp, rc, err);
		struct timespec ts = {1, 0};
		nanosleep(&ts, NULL);
	}
	return 0;
}
