/*
 * cmd_control.c - `rollcache umount`, `epoch` and `status`: the commands
 * that talk to a running mount daemon through its files.
 *
 *   rollcache umount MOUNTPOINT
 *   rollcache epoch MOUNTPOINT [next [--wait] | show]
 *   rollcache status MOUNTPOINT [--json] [--watch]
 *
 * They write MOUNTPOINT/.rollcache/control and read .rollcache/metrics and
 * .rollcache/stats (every read capped at TEXT_MAX); umount runs fusermount3
 * and falls back to a lazy unmount for a dead daemon.  They hold no state
 * and link nothing of the daemon: any build can drive any mount.
 */
#include "cli/cmd.h"
#include "cli/util.h"
#include "common/units.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TEXT_MAX ((size_t)4 << 20) /* cap on a stats text read from a mount */

/* ---- talking to a running daemon ------------------------------------- */

/* Reads MOUNTPOINT/.rollcache/<name> into a malloc'd string.  0 or -errno. */
static int read_text(const char *mp, const char *name, char **out)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/.rollcache/%s", mp, name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t cap = 65536, len = 0;
	char *buf = malloc(cap);
	int rc = 0;
	while (buf) {
		if (len + 1 >= cap) {
			if (cap >= TEXT_MAX) {
				rc = -EFBIG;
				break;
			}
			char *p = realloc(buf, cap * 2);
			if (!p)
				break;
			buf = p;
			cap *= 2;
		}
		ssize_t r = read(fd, buf + len, cap - 1 - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = -errno;
			break;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	close(fd);
	if (!buf)
		return -ENOMEM;
	if (rc != 0) {
		free(buf);
		return rc;
	}
	buf[len] = '\0';
	*out = buf;
	return 0;
}

/* The value of metric `name` (rollcache_ prefix implied) in a metrics text. */
static double metric_get(const char *text, const char *name)
{
	char key[128];
	snprintf(key, sizeof(key), "\nrollcache_%s ", name);
	const char *p = strstr(text, key);
	return p ? strtod(p + strlen(key), NULL) : 0.0;
}

/* The string value of the first "key": "..." in a JSON text (no escapes needed here). */
static void json_str(const char *text, const char *key, char *out, size_t len)
{
	char k[64];
	snprintf(k, sizeof(k), "\"%s\": \"", key);
	const char *p = strstr(text, k);
	out[0] = '\0';
	if (!p)
		return;
	p += strlen(k);
	size_t o = 0;
	while (*p && *p != '"' && o + 1 < len)
		out[o++] = *p++;
	out[o] = '\0';
}

static int mp_error(const char *cmd, const char *mp, int rc)
{
	if (rc == -ENOENT)
		fprintf(stderr, "rollcache %s: %s is not a rollcache mount (no .rollcache/)\n", cmd,
			mp);
	else if (rc == -ENOTCONN)
		fprintf(stderr, "rollcache %s: %s: the daemon is gone; run `rollcache umount %s`\n",
			cmd, mp, mp);
	else
		fprintf(stderr, "rollcache %s: %s: %s\n", cmd, mp, strerror(-rc));
	return 1;
}

/* ---- umount ---------------------------------------------------------------- */

static bool pid_alive(pid_t pid)
{
	return kill(pid, 0) == 0 || errno == EPERM;
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
	char *text = NULL;
	if (read_text(mp, "stats", &text) == 0) {
		const char *p = strstr(text, "\"pid\": ");
		if (p)
			pid = (pid_t)strtol(p + 7, NULL, 10);
		free(text);
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

struct control_write {
	const char *path;
	const char *cmd;
	int rc;
	volatile bool done;
};

static void *control_main(void *arg)
{
	struct control_write *c = arg;
	int fd = open(c->path, O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		c->rc = -errno;
	} else {
		ssize_t w = write(fd, c->cmd, strlen(c->cmd));
		c->rc = w < 0 ? -errno : 0;
		close(fd);
	}
	__atomic_store_n(&c->done, true, __ATOMIC_RELEASE);
	return NULL;
}

static void print_epoch(const char *mp)
{
	char *m = NULL;
	char b1[32], b2[32], b3[32];
	if (read_text(mp, "metrics", &m) != 0)
		return;
	printf("epoch %.0f: %.0f files, %.0f records; admitted %s, evicted %s this epoch; "
	       "disk %s\n",
	       metric_get(m, "epoch"), metric_get(m, "current_files"),
	       metric_get(m, "current_records"),
	       cmn_format_size((uint64_t)metric_get(m, "epoch_admitted_bytes"), b1, sizeof(b1)),
	       cmn_format_size((uint64_t)metric_get(m, "epoch_evicted_bytes"), b2, sizeof(b2)),
	       cmn_format_size((uint64_t)metric_get(m, "used_bytes"), b3, sizeof(b3)));
	free(m);
}

int cmd_epoch(int argc, char **argv)
{
	const char *mp = NULL, *action = "show";
	bool wait = false;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			printf("usage: rollcache epoch MOUNTPOINT [next [--wait] | show]\n");
			return 0;
		} else if (!strcmp(argv[i], "--wait")) {
			wait = true;
		} else if (!mp) {
			mp = argv[i];
		} else if (!strcmp(argv[i], "next") || !strcmp(argv[i], "show")) {
			action = argv[i];
		} else {
			fprintf(stderr, "rollcache epoch: unexpected argument `%s`\n", argv[i]);
			return 2;
		}
	}
	if (!mp || (wait && strcmp(action, "next") != 0)) {
		fprintf(stderr, "usage: rollcache epoch MOUNTPOINT [next [--wait] | show]\n");
		return 2;
	}
	char *m = NULL;
	int rc = read_text(mp, "metrics", &m);
	if (rc != 0)
		return mp_error("epoch", mp, rc);
	free(m);
	if (!strcmp(action, "show")) {
		print_epoch(mp);
		return 0;
	}
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/.rollcache/control", mp);
	struct control_write c = {.path = path, .cmd = wait ? "next wait" : "next"};
	pthread_t t;
	if (pthread_create(&t, NULL, control_main, &c) != 0) {
		fprintf(stderr, "rollcache epoch: cannot start a thread\n");
		return 1;
	}
	bool tty = isatty(2);
	bool shown = false;
	while (!__atomic_load_n(&c.done, __ATOMIC_ACQUIRE)) {
		struct timespec ts = {0, 250 * 1000000L};
		nanosleep(&ts, NULL);
		if (!wait || __atomic_load_n(&c.done, __ATOMIC_ACQUIRE))
			continue;
		if (read_text(mp, "metrics", &m) == 0) {
			fprintf(
			    stderr,
			    "%swaiting for min_records: %.0f / %.0f records resident, %.1f MB/s%s",
			    tty ? "\r" : "", metric_get(m, "resident_records"),
			    metric_get(m, "min_records"),
			    metric_get(m, "ingest_bytes_per_second") / 1e6, tty ? "   " : "\n");
			shown = true;
			free(m);
		}
	}
	pthread_join(t, NULL);
	if (shown && tty)
		fputc('\n', stderr);
	if (c.rc != 0) {
		fprintf(stderr, "rollcache epoch: %s: %s\n", mp, strerror(-c.rc));
		return 1;
	}
	print_epoch(mp);
	return 0;
}

/* ---- status ------------------------------------------------------------------ */

static volatile sig_atomic_t status_stop;

static void status_sig(int sig)
{
	(void)sig;
	status_stop = 1;
}

static int status_once(const char *mp, bool json, bool clear)
{
	char *text = NULL;
	int rc = read_text(mp, json ? "stats" : "metrics", &text);
	if (rc != 0)
		return rc;
	if (json) {
		fputs(text, stdout);
		free(text);
		return 0;
	}
	char *js = NULL;
	char source[512] = "", policy[32] = "", advance[16] = "", why[320] = "";
	if (read_text(mp, "stats", &js) == 0) {
		json_str(js, "source", source, sizeof(source));
		json_str(js, "policy", policy, sizeof(policy));
		json_str(js, "advance", advance, sizeof(advance));
		json_str(js, "why", why, sizeof(why));
		free(js);
	}
	double limit = metric_get(text, "limit_bytes"), used = metric_get(text, "used_bytes");
	double frac = limit > 0 ? used / limit : 0;
	char bar[41];
	int fill = (int)(frac * 40 + 0.5);
	for (int i = 0; i < 40; i++)
		bar[i] = i < fill ? '#' : '.';
	bar[40] = '\0';
	char b1[32], b2[32], b3[32], b4[32], b5[32];
	if (clear)
		fputs("\033[H\033[J", stdout);
	printf("rollcache %s on %s\n", source, mp);
	printf("epoch    %.0f (advance %s, policy %s)\n", metric_get(text, "epoch"), advance,
	       policy);
	printf("disk     [%s] %s / %s (%.0f%%), draining %s\n", bar,
	       cmn_format_size((uint64_t)used, b1, sizeof(b1)),
	       cmn_format_size((uint64_t)limit, b2, sizeof(b2)), frac * 100,
	       cmn_format_size((uint64_t)metric_get(text, "draining_bytes"), b3, sizeof(b3)));
	printf("ingest   %.1f MB/s; admitted %s, evicted %s this epoch\n",
	       metric_get(text, "ingest_bytes_per_second") / 1e6,
	       cmn_format_size((uint64_t)metric_get(text, "epoch_admitted_bytes"), b4, sizeof(b4)),
	       cmn_format_size((uint64_t)metric_get(text, "epoch_evicted_bytes"), b5, sizeof(b5)));
	printf("current  %.0f files, %.0f records; %.0f records resident; %.0f open handles\n",
	       metric_get(text, "current_files"), metric_get(text, "current_records"),
	       metric_get(text, "resident_records"), metric_get(text, "open_handles"));
	char b6[32];
	bool pt = metric_get(text, "passthrough") > 0;
	printf("reads    %s this epoch; passthrough %s (%.0f opens passed through)\n",
	       cmn_format_size((uint64_t)metric_get(text, "epoch_read_bytes"), b6, sizeof(b6)),
	       pt ? "on" : "off", metric_get(text, "passthrough_opens_total"));
	printf("errors   %.0f%s%s\n", metric_get(text, "errors_total"), why[0] ? "; " : "", why);
	fflush(stdout);
	free(text);
	return 0;
}

int cmd_status(int argc, char **argv)
{
	const char *mp = NULL;
	bool json = false, watch = false;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			printf("usage: rollcache status MOUNTPOINT [--json] [--watch]\n");
			return 0;
		} else if (!strcmp(argv[i], "--json")) {
			json = true;
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
		fprintf(stderr, "usage: rollcache status MOUNTPOINT [--json] [--watch]\n");
		return 2;
	}
	if (!watch) {
		int rc = status_once(mp, json, false);
		return rc ? mp_error("status", mp, rc) : 0;
	}
	struct sigaction sa = {.sa_handler = status_sig};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	while (!status_stop) {
		int rc = status_once(mp, json, isatty(1) && !json);
		if (rc != 0)
			return mp_error("status", mp, rc);
		struct timespec ts = {1, 0};
		nanosleep(&ts, NULL);
	}
	return 0;
}
