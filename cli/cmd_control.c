/*
 * cmd_control.c - `rollcache umount`, `epoch` and `status`: the commands
 * that talk to a running mount daemon through its files.
 *
 *   rollcache umount MOUNTPOINT
 *   rollcache epoch MOUNTPOINT [next [N] [--wait] | show]
 *   rollcache status MOUNTPOINT [--json] [--watch]
 *
 * They send commands to MOUNTPOINT/.rollcache/control (common/control.c)
 * and read .rollcache/stats, the JSON of docs/mount.md, through
 * cli/stats_read.c, which looks each figure up by its path in the daemon's
 * table ("disk.draining"); every figure they print comes from it.  umount
 * runs fusermount3 and falls back to a lazy unmount for a dead daemon.
 * They hold no state and link nothing of the daemon: any build can drive
 * any mount.
 */
#include "cli/cmd.h"
#include "cli/stats_read.h"
#include "cli/util.h"
#include "common/config.h"
#include "common/control.h"
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

/* ---- talking to a running daemon ------------------------------------- */

/* Writes s to f with control characters as '?': a stats string cannot redraw the terminal. */
static void put_clean(const char *s, FILE *f)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		fputc(*p < 0x20 || *p == 0x7f ? '?' : *p, f);
}

/*
 * Says on stderr why MP's stats could not be read (rc from cli_stats_read(), err
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
	if (cli_stats_read(mp, &st, NULL, err, sizeof(err)) == 0) {
		json_int_t n = json_integer_value(cli_stats_get(st, "pid"));
		if (n > 0 && n <= INT_MAX)
			pid = (pid_t)n;
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
static void print_epoch(const json_t *st)
{
	char b1[32], b2[32], b3[32];
	const json_t *row = cli_stats_epoch_row(st); /* NULL: nothing admitted yet */
	printf("epoch %" PRIu64 ": %" PRIu64 " files, %" PRIu64 " records; admitted %s, evicted %s "
	       "this epoch; disk %s\n",
	       cli_stats_count(st, "epoch"), cli_stats_count(st, "current.files"),
	       cli_stats_count(st, "current.records"),
	       cmn_format_size(cli_stats_count(row, "admitted_bytes"), b1, sizeof(b1)),
	       cmn_format_size(cli_stats_count(row, "evicted_bytes"), b2, sizeof(b2)),
	       cmn_format_size(cli_stats_count(st, "used"), b3, sizeof(b3)));
}

/*
 * Loads MP's stats and prints the epoch line.  Returns 0 or cli_stats_read()'s
 * error, said on stderr for `rollcache epoch`.
 */
static int show_epoch(const char *mp)
{
	json_t *st = NULL;
	char err[256];
	int rc = cli_stats_read(mp, &st, NULL, err, sizeof(err));
	if (rc != 0)
		return mp_error("epoch", mp, rc, err);
	print_epoch(st);
	json_decref(st);
	return 0;
}

/*
 * The progress line of `epoch next --wait`, at most 79 columns: what the
 * daemon waits for (docs/mount.md, "Epochs": min_records resident, or the
 * samplers blocked on the epoch's admit or the limit, idle or stopped: it
 * goes ahead a second after), how far it is, and the admission rate.  Once
 * min_records are resident the call still runs the rest of the boundary
 * (the samplers' pause, the snapshot), after the cache filled to 90% of
 * its limit (resident and retiring) while the samplers bring bytes in
 * (daemon/epochs.c, filling()).
 */
static void wait_progress(const json_t *st, char *out, size_t len)
{
	double mbs = cli_stats_num(st, "sampler.ingest_bytes_per_s") / 1e6;
	uint64_t have = cli_stats_count(st, "resident.records");
	uint64_t want = cli_stats_count(st, "min_records");
	bool stopped = cli_stats_true(st, "sampler.stopped");
	bool idle = cli_stats_true(st, "sampler.idle");
	bool no_admit = cli_stats_count(st, "admission.waiting_admit") > 0;
	bool no_room = cli_stats_count(st, "admission.waiting_limit") > 0;
	uint64_t bytes = cli_stats_count(st, "resident.bytes");
	uint64_t retiring = cli_stats_count(st, "disk.retiring"); /* leaves at the snapshot */
	uint64_t limit = cli_stats_count(st, "limit");
	bool blocked = no_admit || no_room || idle || stopped;
	if (have >= want && !blocked && bytes + retiring < limit / 100 * CMN_FILL_PERCENT)
		snprintf(out, len, "filling the cache: %.1f/%.1f MB, admit %.1f/%.1f MB, %.1f MB/s",
			 (double)bytes / 1e6, (double)limit / 1e6,
			 (double)cli_stats_count(st, "admission.admit_used") / 1e6,
			 (double)cli_stats_count(st, "admission.admit") / 1e6, mbs);
	else if (have >= want)
		snprintf(out, len,
			 "min_records reached (%" PRIu64 "/%" PRIu64
			 " records): finishing the boundary, %.1f MB/s",
			 have, want, mbs);
	else if (blocked)
		snprintf(out, len,
			 "waiting for min_records: %" PRIu64 "/%" PRIu64 " records; %s, %.1f MB/s",
			 have, want,
			 stopped    ? "samplers stopped"
			 : idle	    ? "source has no more"
			 : no_admit ? "admit used up"
				    : "cache at its limit",
			 mbs);
	else
		snprintf(out, len,
			 "waiting for min_records or admit: %" PRIu64 "/%" PRIu64
			 " records, %.1f/%.1f MB, %.1f MB/s",
			 have, want, (double)cli_stats_count(st, "admission.admit_used") / 1e6,
			 (double)cli_stats_count(st, "admission.admit") / 1e6, mbs);
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
	int rc = cli_stats_read(mp, &st, NULL, err, sizeof(err));
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
		if (cli_stats_read(mp, &st, NULL, err, sizeof(err)) == 0) {
			char line[160];
			const char *state = cli_stats_str(st, "sampler.state");
			wait_progress(st, line, sizeof(line));
			if (tty) /* padded: it overwrites a longer line before */
				fprintf(stderr, "\r%-79s", line);
			else
				fprintf(stderr, "%s\n", line);
			/* samplers that cannot admit (a full disk, ...): say why */
			if (!strncmp(state, "waiting", 7)) {
				fputs(tty ? "\n  samplers " : "  samplers ", stderr);
				put_clean(state, stderr);
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
	if (wait && cli_stats_read(mp, &st, NULL, err, sizeof(err)) == 0) {
		const char *why = cli_stats_str(st, "last_boundary.wait");
		if (why[0]) { /* it went ahead before min_records: say why */
			fputs("rollcache epoch: went ahead without min_records: ", stderr);
			put_clean(why, stderr);
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
 * Prints the `last` lines of the view to m: the recent warnings and errors,
 * newest first, each with its local time and level (a repeat: "xN"); from
 * a daemon without "recent", its last_error alone.
 */
static void status_problems(const json_t *st, FILE *m)
{
	const json_t *recent = json_object_get(st, "recent");
	const json_t *last = json_object_get(st, "last_error");
	size_t n = json_is_array(recent) ? json_array_size(recent) : json_is_object(last) ? 1 : 0;
	for (size_t i = 0; i < n; i++) {
		const json_t *e = json_is_array(recent) ? json_array_get(recent, n - 1 - i) : last;
		time_t t = (time_t)(cli_stats_count(e, "unix_ms") / 1000);
		uint64_t count = cli_stats_count(e, "count");
		struct tm tm;
		char when[32];
		localtime_r(&t, &tm);
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
		fprintf(m, "%-9s%s ", i ? "" : "last", when);
		put_clean(cli_stats_str(e, "level"), m);
		if (count > 1)
			fprintf(m, " x%" PRIu64, count);
		fputs(": ", m);
		put_clean(cli_stats_str(e, "message"), m);
		fputc('\n', m);
	}
}

/* Writes the lines of the status view of MP's stats st to m (docs/mount.md). */
static void status_lines(const json_t *st, const char *mp, bool wide, FILE *m)
{
	uint64_t used = cli_stats_count(st, "used"), limit = cli_stats_count(st, "limit");
	double frac = limit > 0 ? (double)used / (double)limit : 0;
	int barw = wide ? 40 : 20;
	char bar[41];
	int fill = (int)(frac * barw + 0.5);
	for (int i = 0; i < barw; i++)
		bar[i] = i < fill ? '#' : '.';
	bar[barw] = '\0';
	char b1[32], b2[32], b3[32];
	const json_t *row = cli_stats_epoch_row(st); /* NULL: nothing admitted yet */
	const char *why = cli_stats_str(st, "last_boundary.why");
	const char *state = cli_stats_str(st, "sampler.state");
	fputs("rollcache ", m);
	put_clean(cli_stats_str(st, "source"), m);
	fprintf(m, " on %s\nepoch    %" PRIu64 " (advance ", mp, cli_stats_count(st, "epoch"));
	put_clean(cli_stats_str(st, "advance"), m);
	fputs(", policy ", m);
	put_clean(cli_stats_str(st, "schedule.policy"), m);
	fputs(")\n", m);
	fprintf(m, "disk     [%s] %s / %s (%.0f%%), draining %s\n", bar,
		cmn_format_size(used, b1, sizeof(b1)), cmn_format_size(limit, b2, sizeof(b2)),
		frac * 100, cmn_format_size(cli_stats_count(st, "disk.draining"), b3, sizeof(b3)));
	uint64_t listed = cli_stats_count(st, "sampler.listed_objects"),
		 cat = cli_stats_count(st, "disk.catalog");
	fprintf(m, "catalog  %s beside the limit", cmn_format_size(cat, b1, sizeof(b1)));
	if (listed)
		fprintf(m, ", %.0f B per listed object", (double)cat / (double)listed);
	fputc('\n', m);
	fprintf(m, "ingest   %.1f MB/s; admitted %s, evicted %s this epoch\n",
		cli_stats_num(st, "sampler.ingest_bytes_per_s") / 1e6,
		cmn_format_size(cli_stats_count(row, "admitted_bytes"), b1, sizeof(b1)),
		cmn_format_size(cli_stats_count(row, "evicted_bytes"), b2, sizeof(b2)));
	fprintf(m,
		"current  %" PRIu64 " files, %" PRIu64 " records; %" PRIu64
		" records resident; %" PRIu64 " open handles\n",
		cli_stats_count(st, "current.files"), cli_stats_count(st, "current.records"),
		cli_stats_count(st, "resident.records"), cli_stats_count(st, "view.open_handles"));
	fprintf(m, "reads    %s this epoch; passthrough %s (%" PRIu64 " opens passed through)\n",
		cmn_format_size(cli_stats_count(st, "current.read_bytes"), b1, sizeof(b1)),
		cli_stats_true(st, "view.passthrough") ? "on" : "off",
		cli_stats_count(st, "view.passthrough_opens"));
	fprintf(m, "errors   %" PRIu64 "%s", cli_stats_errors(st), why[0] ? "; " : "");
	put_clean(why, m);
	fputc('\n', m);
	if (cli_stats_true(st, "sampler.stopped")) {
		fputs("sampler  STOPPED (see last)\n", m);
	} else if (state[0]) {
		fputs("sampler  ", m);
		put_clean(state, m);
		fprintf(m, "; %" PRIu64 " objects listed\n",
			cli_stats_count(st, "sampler.listed_objects"));
	}
	status_problems(st, m);
}

/*
 * Prints MP's status once: the stats text as read (json) or the view of
 * docs/mount.md, after clearing the terminal when clear.  Returns 0 or
 * cli_stats_read()'s error (reason in err[errlen]); nothing is printed then.
 */
static int status_once(const char *mp, bool json, bool clear, bool wide, char *err, size_t errlen)
{
	json_t *st = NULL;
	char *text = NULL;
	int rc = cli_stats_read(mp, &st, &text, err, errlen);
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
	status_lines(st, mp, wide, m);
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
