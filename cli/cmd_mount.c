/*
 * cmd_mount.c - `rollcache mount`: the mount daemon's front end.
 *
 *   rollcache mount SOURCE MOUNTPOINT [--config FILE] [--KEY VALUE ...]
 *                   [-o k=v,...] [-f] [-d]
 *
 * mount parses and checks everything first (usage/config errors exit 2
 * before anything happens), then forks unless -f/-d: the child runs the
 * daemon (cachefs/daemon.h) and reports "ok" or its one-line error through
 * a pipe once the mount is up or has failed, so the parent's exit status
 * and message are the daemon's.  The child then detaches (setsid, stdio to
 * /dev/null, log to syslog).
 *
 * -o options go through fuse_opt: generic mount(8) options (rw, nofail,
 * _netdev, noauto, user, defaults, x-*, ...) are accepted and ignored, FUSE
 * options (allow_other, allow_root, auto_unmount, max_read=) pass through to
 * the kernel mount, and every other k=v is a configuration key (common/
 * config.h), so fstab lines of type fuse.rollcache work.  Ours: splice_read,
 * no_splice_read, passthrough, no_passthrough, readahead_kb=N.
 *
 * The samplers run as the daemon's workers (one pass per epoch).  The
 * commands that talk to a running daemon are in cmd_control.c.
 */
#include "cli/cmd.h"
#include "cli/util.h"
#include "rc_config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUSE_USE_VERSION 314

#include "cachefs/daemon.h"
#include "cachefs/store.h"
#include "common/config.h"
#include "common/log.h"
#include "common/units.h"

#if defined(RC_HAVE_SAMPLER_INGEST) && RC_HAVE_SAMPLER_INGEST
#define MOUNT_SAMPLERS 1
#include "sampler/sampler.h"
#else
#define MOUNT_SAMPLERS 0
#endif

#include <fcntl.h>
#include <fuse_opt.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

/* ---- -o parsing (fuse_opt) ------------------------------------------- */

struct mount_args {
	struct cmn_config *cfg;
	char fuse_opts[1024]; /* passed to the kernel mount */
	char err[512];
	bool failed;
	bool splice;		/* -o splice_read: serve reads by splice */
	bool no_passthrough;	/* -o no_passthrough: the daemon serves every read */
	uint32_t readahead_kib; /* -o readahead_kb=N */
};

enum {
	KEY_IGNORE = 1,
	KEY_PASS = 2,
	KEY_SPLICE = 3,
	KEY_NOSPLICE = 4,
	KEY_READAHEAD = 5,
	KEY_PT = 6,
	KEY_NOPT = 7,
};

static const struct fuse_opt mount_opt_spec[] = {
    /* generic mount(8)/fstab options: meaningless here */
    FUSE_OPT_KEY("rw", KEY_IGNORE),
    FUSE_OPT_KEY("ro", KEY_IGNORE), /* always read-only, except .rollcache/control */
    FUSE_OPT_KEY("dev", KEY_IGNORE),
    FUSE_OPT_KEY("nodev", KEY_IGNORE),
    FUSE_OPT_KEY("suid", KEY_IGNORE),
    FUSE_OPT_KEY("nosuid", KEY_IGNORE),
    FUSE_OPT_KEY("exec", KEY_IGNORE),
    FUSE_OPT_KEY("noexec", KEY_IGNORE),
    FUSE_OPT_KEY("auto", KEY_IGNORE),
    FUSE_OPT_KEY("noauto", KEY_IGNORE),
    FUSE_OPT_KEY("user", KEY_IGNORE),
    FUSE_OPT_KEY("users", KEY_IGNORE),
    FUSE_OPT_KEY("nouser", KEY_IGNORE),
    FUSE_OPT_KEY("nofail", KEY_IGNORE),
    FUSE_OPT_KEY("_netdev", KEY_IGNORE),
    FUSE_OPT_KEY("defaults", KEY_IGNORE),
    FUSE_OPT_KEY("async", KEY_IGNORE),
    FUSE_OPT_KEY("sync", KEY_IGNORE),
    FUSE_OPT_KEY("atime", KEY_IGNORE),
    FUSE_OPT_KEY("noatime", KEY_IGNORE),
    FUSE_OPT_KEY("relatime", KEY_IGNORE),
    FUSE_OPT_KEY("comment=", KEY_IGNORE), /* prefix match: comment=... */
    FUSE_OPT_KEY("subtype=", KEY_IGNORE),
    FUSE_OPT_KEY("fsname=", KEY_IGNORE),
    /* FUSE mount options for the kernel */
    FUSE_OPT_KEY("allow_other", KEY_PASS),
    FUSE_OPT_KEY("allow_root", KEY_PASS),
    FUSE_OPT_KEY("auto_unmount", KEY_PASS),
    FUSE_OPT_KEY("max_read=", KEY_IGNORE), /* ours is 1 MiB; a second value would conflict */
    /* ours */
    FUSE_OPT_KEY("splice_read", KEY_SPLICE),
    FUSE_OPT_KEY("no_splice_read", KEY_NOSPLICE),
    FUSE_OPT_KEY("passthrough", KEY_PT),
    FUSE_OPT_KEY("no_passthrough", KEY_NOPT),
    FUSE_OPT_KEY("readahead_kb=", KEY_READAHEAD),
    FUSE_OPT_END,
};

static int append_opt(char *buf, size_t len, const char *opt)
{
	size_t used = strlen(buf);
	int n = snprintf(buf + used, len - used, "%s%s", used ? "," : "", opt);
	return n < 0 || (size_t)n >= len - used ? -1 : 0;
}

static int mount_opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	struct mount_args *ma = data;
	(void)outargs;
	if (ma->failed)
		return 0;
	switch (key) {
	case KEY_IGNORE:
		return 0;
	case KEY_PASS:
		if (append_opt(ma->fuse_opts, sizeof(ma->fuse_opts), arg) != 0) {
			snprintf(ma->err, sizeof(ma->err), "-o: too many FUSE options");
			ma->failed = true;
		}
		return 0;
	case KEY_SPLICE:
		ma->splice = true;
		return 0;
	case KEY_NOSPLICE:
		ma->splice = false;
		return 0;
	case KEY_PT:
		ma->no_passthrough = false;
		return 0;
	case KEY_NOPT:
		ma->no_passthrough = true;
		return 0;
	case KEY_READAHEAD: {
		char *end;
		unsigned long v = strtoul(arg + strlen("readahead_kb="), &end, 10);
		if (*end || v < 4 || v > (1ul << 20)) {
			snprintf(ma->err, sizeof(ma->err),
				 "-o %s: expected a readahead in KiB from 4 to 1048576", arg);
			ma->failed = true;
		} else {
			ma->readahead_kib = (uint32_t)v;
		}
		return 0;
	}
	case FUSE_OPT_KEY_OPT: {
		char tmp[512];
		if (strncmp(arg, "x-", 2) == 0)
			return 0; /* x-systemd.*, x-gvfs-*: for other tools */
		if (cmn_config_parse_o(ma->cfg, arg, tmp, sizeof(tmp)) != 0) {
			snprintf(ma->err, sizeof(ma->err), "%s", tmp);
			ma->failed = true;
		}
		return 0;
	}
	default:
		return 1; /* non-options: not expected, kept */
	}
}

/* Applies one "-o a,b=c,..." string.  Returns 0, or -EINVAL with ma->err. */
static int parse_o(struct mount_args *ma, const char *opts)
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	int rc = 0;
	if (fuse_opt_add_arg(&args, "rollcache") || fuse_opt_add_arg(&args, "-o") ||
	    fuse_opt_add_arg(&args, opts)) {
		snprintf(ma->err, sizeof(ma->err), "-o: out of memory");
		rc = -ENOMEM;
	} else if (fuse_opt_parse(&args, ma, mount_opt_spec, mount_opt_proc) != 0 || ma->failed) {
		if (!ma->err[0])
			snprintf(ma->err, sizeof(ma->err), "-o %s: cannot parse", opts);
		rc = -EINVAL;
	}
	fuse_opt_free_args(&args);
	return rc;
}

/* ---- paths --------------------------------------------------------------- */

/* The default cache dir: $XDG_CACHE_HOME (or ~/.cache)/rollcache/<fnv1a64(url)>. */
static int default_cache_dir(const char *url, char *out, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (const unsigned char *p = (const unsigned char *)url; *p; p++)
		h = (h ^ *p) * 0x100000001b3ull;
	const char *xdg = getenv("XDG_CACHE_HOME");
	const char *home = getenv("HOME");
	int n;
	if (xdg && xdg[0] == '/')
		n = snprintf(out, len, "%s/rollcache/%016" PRIx64, xdg, h);
	else if (home && home[0] == '/')
		n = snprintf(out, len, "%s/.cache/rollcache/%016" PRIx64, home, h);
	else
		return -ENOENT;
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* Makes `path` absolute (it need not exist).  Returns 0 or -errno. */

/*
 * Whether `path` (absolute, resolved) is a mount point now, from
 * /proc/self/mountinfo (no access to the path itself: a dead FUSE mount
 * would answer ENOTCONN).  Fills fstype when it is.
 */
static bool is_mount_point(const char *path, char *fstype, size_t len)
{
	FILE *mi = fopen("/proc/self/mountinfo", "re");
	char line[4096];
	bool found = false;
	if (!mi)
		return false;
	while (fgets(line, sizeof(line), mi)) {
		char mp[2048], *o = mp;
		if (sscanf(line, "%*s %*s %*s %*s %2047s", mp) != 1)
			continue;
		for (const char *p = mp; *p; p++) { /* undo \040-style escapes */
			if (p[0] == '\\' && p[1] && p[2] && p[3]) {
				*o++ = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
				p += 3;
			} else {
				*o++ = *p;
			}
		}
		*o = '\0';
		if (strcmp(mp, path) != 0)
			continue;
		const char *dash = strstr(line, " - ");
		found = true;
		if (dash && sscanf(dash + 3, "%63s", fstype) == 1)
			fstype[len - 1] = '\0';
		else
			snprintf(fstype, len, "?");
	}
	fclose(mi);
	return found;
}

/* ---- samplers as daemon workers ----------------------------------------- */

#if MOUNT_SAMPLERS
/*
 * One sampler pass per epoch: a boundary stops the running pass and starts
 * a new one for the new epoch (its files join at the next boundary, DESIGN
 * "Epochs"), with a seed per epoch so each pass samples in a new order.
 * Counters of finished passes are summed into `total`.
 */
struct workers {
	const struct cmn_config *cfg;
	struct cfs_store *store;
	pthread_t thread;
	bool running;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct smp_sampler *s;	       /* protected by mu: the running pass, or NULL */
	uint32_t epoch;		       /* protected by mu: epoch to sample for */
	bool stop;		       /* protected by mu */
	bool paused;		       /* protected by mu: a boundary is in progress */
	bool busy;		       /* protected by mu: a pass is between new and free */
	bool idle;		       /* protected by mu: the pass of `epoch` ended */
	struct cfs_worker_stats total; /* protected by mu: finished passes */
};

static void add_stats(struct cfs_worker_stats *o, const struct smp_stats *st)
{
#define C(f) o->f += SMP_STAT_GET(st, f)
	C(requests);
	C(retries);
	C(http_4xx);
	C(http_408_429);
	C(http_5xx);
	C(timeouts);
	C(net_errors);
	C(truncated);
	C(bad_records);
	C(failed_objects);
	C(objects_done);
	C(bytes_fetched);
	C(records_admitted);
	C(bytes_admitted);
	C(budget_waits);
#undef C
}

static int new_sampler(struct workers *w, uint32_t epoch, struct smp_sampler **out, char *err,
		       size_t errlen)
{
	struct smp_sampler_opts so = {
	    .cfg = w->cfg,
	    .store = w->store,
	    .seed = 1 + (uint64_t)epoch,
	    .stop_when_full = false,
	    .room_wait_ms = 500, /* bounded waits: a boundary's stop is seen soon */
	};
	return smp_sampler_new(out, &so, err, errlen);
}

static void *sampler_main(void *arg)
{
	struct workers *w = arg;
	char err[512];
	uint32_t done = UINT32_MAX; /* the epoch whose pass ended */
	pthread_mutex_lock(&w->mu);
	while (!w->stop) {
		if (w->paused || w->epoch == done) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += 1;
			pthread_cond_timedwait(&w->cv, &w->mu, &ts);
			continue;
		}
		uint32_t epoch = w->epoch;
		w->idle = false;
		w->busy = true;
		pthread_mutex_unlock(&w->mu);
		struct smp_sampler *s = NULL;
		int rc = new_sampler(w, epoch, &s, err, sizeof(err));
		if (rc == 0) {
			pthread_mutex_lock(&w->mu);
			w->s = s;
			bool go = !w->stop && !w->paused && w->epoch == epoch;
			pthread_mutex_unlock(&w->mu);
			if (go)
				rc = smp_sampler_run(s, epoch, err, sizeof(err));
			pthread_mutex_lock(&w->mu);
			add_stats(&w->total, smp_sampler_stats(s));
			w->s = NULL;
			pthread_mutex_unlock(&w->mu);
			smp_sampler_free(s); /* seals or discards what it was writing */
		}
		if (rc != 0)
			cmn_log(CMN_LOG_ERROR, "samplers, epoch %" PRIu32 ": %s", epoch, err);
		pthread_mutex_lock(&w->mu);
		w->busy = false;
		done = epoch;
		if (w->epoch == epoch)
			w->idle = true;
		pthread_cond_broadcast(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

static int workers_start(void *ctx, struct cfs_store *store, uint32_t epoch, char *err,
			 size_t errlen)
{
	struct workers *w = ctx;
	struct smp_sampler *probe = NULL;
	w->store = store;
	int rc = new_sampler(w, epoch, &probe, err, errlen); /* bad URL, credentials: now */
	if (rc != 0)
		return rc;
	smp_sampler_free(probe);
	w->epoch = epoch;
	rc = pthread_create(&w->thread, NULL, sampler_main, w);
	if (rc != 0) {
		snprintf(err, errlen, "cannot start the sampler thread: %s", strerror(rc));
		return -rc;
	}
	w->running = true;
	return 0;
}

static void workers_pause(void *ctx)
{
	struct workers *w = ctx;
	pthread_mutex_lock(&w->mu);
	w->paused = true;
	if (w->s)
		smp_sampler_stop(w->s);
	for (int i = 0; i < 30 && w->busy && !w->stop; i++) {
		if (w->s)
			smp_sampler_stop(w->s);
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		pthread_cond_timedwait(&w->cv, &w->mu, &ts);
	}
	if (w->busy)
		cmn_log(CMN_LOG_WARN, "samplers: the pass did not end within 30 s of the boundary");
	pthread_mutex_unlock(&w->mu);
}

static void workers_new_epoch(void *ctx, uint32_t epoch)
{
	struct workers *w = ctx;
	pthread_mutex_lock(&w->mu);
	w->epoch = epoch;
	w->paused = false;
	if (w->s)
		smp_sampler_stop(w->s);
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

static void workers_stats(void *ctx, struct cfs_worker_stats *o)
{
	struct workers *w = ctx;
	pthread_mutex_lock(&w->mu);
	*o = w->total;
	if (w->s)
		add_stats(o, smp_sampler_stats(w->s));
	o->present = true;
	o->idle = w->idle;
	pthread_mutex_unlock(&w->mu);
}

static void workers_stop(void *ctx)
{
	struct workers *w = ctx;
	if (!w->running)
		return;
	pthread_mutex_lock(&w->mu);
	w->stop = true;
	if (w->s)
		smp_sampler_stop(w->s);
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->thread, NULL);
	w->running = false;
}

static const struct cfs_daemon_workers sampler_workers = {
    .start = workers_start,
    .pause = workers_pause,
    .new_epoch = workers_new_epoch,
    .stats = workers_stats,
    .stop = workers_stop,
};
#endif

/* ---- mount ----------------------------------------------------------------- */

static void mount_usage(FILE *out)
{
	fprintf(out,
		"usage: rollcache mount SOURCE MOUNTPOINT [--config FILE] [--KEY VALUE ...] "
		"[-o k=v,...] [-f] [-d]\n"
		"  SOURCE      file:///abs/dir/, http(s)://host/prefix/ or s3://bucket/prefix/\n"
		"  -f          stay in the foreground (default: detach once the mount is up)\n"
		"  -d          foreground with FUSE request tracing\n"
		"  -o k=v,...  configuration keys (limit=20G,cache_dir=/var/cache/rc,...), FUSE\n"
		"              options (allow_other, auto_unmount) and fstab options (ignored)\n"
		"              no_passthrough: the daemon serves every read (default: files it\n"
		"              served once are passed through to the kernel where it can)\n"
		"See docs/mount.md.\n");
}

struct ready_ctx {
	int fd; /* write end of the readiness pipe, or -1 */
};

static void syslog_sink(enum cmn_log_level level, const char *line, void *ctx)
{
	(void)ctx;
	static const int prio[] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG};
	syslog(prio[level], "%s", line);
}

/* The mount is up: tell the parent, then detach from the terminal. */
static void on_ready(void *ctx)
{
	struct ready_ctx *r = ctx;
	if (r->fd < 0)
		return;
	openlog("rollcache", LOG_PID, LOG_DAEMON);
	cmn_log_set_sink(syslog_sink, NULL);
	ssize_t w = write(r->fd, "ok\n", 3);
	(void)w;
	close(r->fd);
	r->fd = -1;
	int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (nul >= 0) {
		dup2(nul, 0);
		dup2(nul, 1);
		dup2(nul, 2);
		if (nul > 2)
			close(nul);
	}
	if (chdir("/") != 0)
		cmn_log(CMN_LOG_WARN, "chdir /: %s", strerror(errno));
}

/* Parent side of daemonizing: waits for the child's report. */
static int wait_ready(int fd, pid_t child)
{
	char buf[1200];
	size_t got = 0;
	for (;;) {
		ssize_t r = read(fd, buf + got, sizeof(buf) - 1 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
		if (got == sizeof(buf) - 1)
			break;
	}
	close(fd);
	buf[got] = '\0';
	if (strncmp(buf, "ok\n", 3) == 0)
		return 0;
	int status = 0;
	waitpid(child, &status, 0);
	if (got) {
		size_t n = strlen(buf);
		while (n && buf[n - 1] == '\n')
			buf[--n] = '\0';
		fprintf(stderr, "rollcache mount: %s\n", buf);
	} else {
		fprintf(stderr,
			"rollcache mount: the daemon exited during start-up (status %d); "
			"run with -f to see why\n",
			status);
	}
	return 1;
}

int cmd_mount(int argc, char **argv)
{
	struct cmn_config cfg;
	struct mount_args ma;
	char err[1024];
	const char *source = NULL, *mountpoint = NULL, *config = NULL;
	bool foreground = false, debug = false;
	char mp_abs[PATH_MAX], dir_abs[PATH_MAX], src_copy[2048];
	int ret = 2;

	cmn_config_init(&cfg);
	memset(&ma, 0, sizeof(ma));
	ma.cfg = &cfg;
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--config") && i + 1 < argc)
			config = argv[i + 1];
	if (config && cmn_config_load_file(&cfg, config, err, sizeof(err))) {
		fprintf(stderr, "rollcache mount: %s\n", err);
		goto out;
	}
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			mount_usage(stdout);
			ret = 0;
			goto out;
		} else if (!strcmp(a, "-f")) {
			foreground = true;
		} else if (!strcmp(a, "-d")) {
			debug = foreground = true;
		} else if (!strcmp(a, "-o") || !strncmp(a, "-o", 2)) {
			const char *v = a[2] ? a + 2 : (i + 1 < argc ? argv[++i] : NULL);
			if (!v) {
				fprintf(
				    stderr,
				    "rollcache mount: -o needs options, such as -o limit=20G\n");
				goto out;
			}
			if (parse_o(&ma, v) != 0) {
				fprintf(stderr, "rollcache mount: %s\n", ma.err);
				goto out;
			}
		} else if (!strncmp(a, "--", 2)) {
			if (i + 1 >= argc) {
				fprintf(stderr, "rollcache mount: %s needs a value\n", a);
				goto out;
			}
			const char *v = argv[++i];
			if (!strcmp(a, "--config"))
				continue;
			if (cmn_config_set(&cfg, a + 2, v, a, err, sizeof(err))) {
				fprintf(stderr, "rollcache mount: %s\n", err);
				goto out;
			}
		} else if (!source) {
			source = a;
		} else if (!mountpoint) {
			mountpoint = a;
		} else {
			fprintf(stderr, "rollcache mount: unexpected argument `%s`\n", a);
			mount_usage(stderr);
			goto out;
		}
	}
	if (!source || !mountpoint) {
		fprintf(stderr, "rollcache mount: expected SOURCE and MOUNTPOINT\n");
		mount_usage(stderr);
		goto out;
	}
	if (cmn_config_set(&cfg, "url", source, "SOURCE", err, sizeof(err))) {
		fprintf(stderr, "rollcache mount: %s\n", err);
		goto out;
	}
	if (cmn_config_finish(&cfg, err, sizeof(err))) {
		fprintf(stderr, "rollcache mount: %s\n", err);
		goto out;
	}
	if (!realpath(mountpoint, mp_abs)) {
		fprintf(stderr, "rollcache mount: %s: %s: create the mount point directory first\n",
			mountpoint, strerror(errno));
		goto out;
	}
	struct stat st;
	if (stat(mp_abs, &st) != 0 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "rollcache mount: %s is not a directory\n", mp_abs);
		goto out;
	}
	char fstype[64];
	if (is_mount_point(mp_abs, fstype, sizeof(fstype))) {
		fprintf(stderr,
			"rollcache mount: %s is already a mount point (%s): unmount it first "
			"(rollcache umount %s)\n",
			mp_abs, fstype, mp_abs);
		ret = 1;
		goto out;
	}
	if (!cfg.cache_dir) {
		if (default_cache_dir(cfg.url, dir_abs, sizeof(dir_abs)) != 0) {
			fprintf(stderr, "rollcache mount: no cache directory: set cache_dir "
					"(--cache-dir DIR or -o cache_dir=DIR)\n");
			goto out;
		}
	} else if (cli_absolute_path(cfg.cache_dir, dir_abs, sizeof(dir_abs)) != 0) {
		fprintf(stderr, "rollcache mount: cache_dir %s: path too long\n", cfg.cache_dir);
		goto out;
	}
	if (cmn_config_set(&cfg, "cache_dir", dir_abs, "cache_dir", err, sizeof(err))) {
		fprintf(stderr, "rollcache mount: %s\n", err);
		goto out;
	}
	snprintf(src_copy, sizeof(src_copy), "%s", cfg.url);
	if (debug)
		cmn_log_set_level(CMN_LOG_DEBUG);

	ret = 1;
	struct ready_ctx rc_ready = {.fd = -1};
	pid_t child = 0;
	if (!foreground) {
		int p[2];
		if (pipe2(p, O_CLOEXEC) != 0) {
			fprintf(stderr, "rollcache mount: pipe: %s\n", strerror(errno));
			goto out;
		}
		fflush(NULL);
		child = fork();
		if (child < 0) {
			fprintf(stderr, "rollcache mount: fork: %s\n", strerror(errno));
			close(p[0]);
			close(p[1]);
			goto out;
		}
		if (child > 0) {
			close(p[1]);
			ret = wait_ready(p[0], child);
			goto out;
		}
		close(p[0]);
		setsid();
		rc_ready.fd = p[1];
	}

#if MOUNT_SAMPLERS
	struct workers w = {.cfg = &cfg};
	pthread_mutex_init(&w.mu, NULL);
	pthread_cond_init(&w.cv, NULL);
	const struct cfs_daemon_workers *wk = &sampler_workers;
	void *wctx = &w;
#else
	const struct cfs_daemon_workers *wk = NULL;
	void *wctx = NULL;
#endif
	struct cfs_daemon_opts o = {
	    .cfg = &cfg,
	    .mountpoint = mp_abs,
	    .source = src_copy,
	    .debug = debug,
	    .splice_read = ma.splice,
	    .passthrough = !ma.no_passthrough,
	    .readahead_kib = ma.readahead_kib,
	    .fuse_opts = ma.fuse_opts,
	    .workers = wk,
	    .workers_ctx = wctx,
	    .on_ready = on_ready,
	    .on_ready_ctx = &rc_ready,
	};
	int rc = cfs_daemon_run(&o, err, sizeof(err));
	if (rc != 0) {
		if (rc_ready.fd >= 0) {
			dprintf(rc_ready.fd, "%s\n", err);
			close(rc_ready.fd);
		} else {
			cmn_log(CMN_LOG_ERROR, "%s", err);
			if (foreground)
				fprintf(stderr, "rollcache mount: %s\n", err);
		}
		ret = 1;
	} else {
		ret = 0;
	}
#if MOUNT_SAMPLERS
	pthread_mutex_destroy(&w.mu);
	pthread_cond_destroy(&w.cv);
#endif
	if (!foreground) {
		cmn_config_free(&cfg);
		_exit(ret);
	}
out:
	cmn_config_free(&cfg);
	return ret;
}
