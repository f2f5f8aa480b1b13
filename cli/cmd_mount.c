/*
 * cmd_mount.c - `rollcache mount`: parses and checks everything, then hands
 * over to the daemon (daemon/daemon.h).
 *
 *   rollcache mount [SOURCE] MOUNTPOINT [--config FILE] [--KEY VALUE ...]
 *                   [-o k=v,...] [-f] [-d] [--allow-non-empty]
 *
 * SOURCE may be left out when the config file names [source] url.  A
 * mount point that holds files is refused unless --allow-non-empty (or
 * -o nonempty), as rclone and s3fs do.  A rollcache mount point whose
 * daemon is gone (ENOTCONN) is unmounted lazily and mounted again
 * (clean_dead_mount()), so that a restarted unit comes back.  Usage and
 * config errors (a bad schedule included: it is built here once) exit 2
 * before anything happens; the daemon's failures exit 1 with its one-line
 * message (it forks unless -f/-d and reports through a pipe, so the message
 * is the same either way).  -o parsing and the paths are in mount_opts.c;
 * the commands that talk to a running mount in cmd_control.c.
 */
#include "cli/cmd.h"
#include "cli/help.h"
#include "cli/mount_opts.h"
#include "cli/util.h"
#include "common/config.h"
#include "common/log.h"
#include "daemon/daemon.h"
#include "eviction/schedule.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>

static void mount_usage(FILE *out, bool keys)
{
	fprintf(out,
		"usage: rollcache mount [SOURCE] MOUNTPOINT [--config FILE] [--KEY VALUE ...]\n"
		"                       [-o k=v,...] [-f] [-d] [--allow-non-empty]\n"
		"  SOURCE      file:///abs/dir/, http(s)://host/prefix/ or s3://bucket/prefix/;\n"
		"              may be left out when the config file has [source] url\n"
		"  -f          stay in the foreground (default: detach once the mount is up)\n"
		"  -d          foreground with FUSE request tracing\n"
		"  -o k=v,...  configuration keys (limit=20G,cache_dir=/var/cache/rc,...), FUSE\n"
		"              options (allow_other, auto_unmount), fstab options (ignored),\n"
		"              nonempty (= --allow-non-empty), no_passthrough (the daemon\n"
		"              serves every read)\n"
		"  --allow-non-empty  mount over a directory that is not empty\n");
	if (keys) {
		fputc('\n', out);
		cli_help_keys(out);
		fprintf(out, "\nSee `man rollcache` and docs/configuration.md.\n");
	}
}

/* 1 when dir holds any entry besides . and .., 0 when empty, -errno. */
static int dir_has_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int found = 0;
	if (!d)
		return -errno;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
			found = 1;
			break;
		}
	}
	closedir(d);
	return found;
}

/*
 * path made absolute with its parent resolved (realpath) but not its last
 * part, which may be a dead FUSE mount point that answers ENOTCONN.
 * Returns 0, or -errno of the parent's realpath() / -ENAMETOOLONG.
 */
static int parent_resolved(const char *path, char *out, size_t len)
{
	char abs[PATH_MAX], parent[PATH_MAX];
	int rc = cli_absolute_path(path, abs, sizeof(abs));
	if (rc != 0)
		return rc;
	size_t n = strlen(abs);
	while (n > 1 && abs[n - 1] == '/')
		abs[--n] = '\0';
	char *slash = strrchr(abs, '/');
	const char *base = slash + 1;
	if (slash == abs) {
		snprintf(parent, sizeof(parent), "/");
	} else {
		*slash = '\0';
		if (!realpath(abs, parent))
			return -errno;
	}
	if (!*base) /* "/" itself */
		return snprintf(out, len, "/") >= (int)len ? -ENAMETOOLONG : 0;
	n = (size_t)snprintf(out, len, "%s/%s", strcmp(parent, "/") ? parent : "", base);
	return n >= len ? -ENAMETOOLONG : 0;
}

/*
 * A rollcache mount whose daemon is gone (killed, crashed) leaves its mount
 * point answering ENOTCONN until it is unmounted; `rollcache mount` on it
 * then detaches it lazily (fusermount3 -u -z, else umount2(MNT_DETACH)) and
 * goes on, as a restarting service unit needs.  Only a mount of type
 * fuse.rollcache in /proc/self/mountinfo is touched; a live mount, or any
 * other file system, is left to the checks after.  Returns 0 (nothing to
 * do, or detached), or 1 with the reason on stderr.
 */
static int clean_dead_mount(const char *mountpoint)
{
	char mp[PATH_MAX], fstype[64];
	struct statfs sfs;
	if (parent_resolved(mountpoint, mp, sizeof(mp)) != 0 ||
	    !cli_is_mount_point(mp, fstype, sizeof(fstype)))
		return 0;
	/* statfs always asks the daemon; stat may be answered from cached attributes */
	if (statfs(mp, &sfs) == 0 || (errno != ENOTCONN && errno != ECONNABORTED))
		return 0;
	if (strcmp(fstype, "fuse.rollcache") != 0) {
		fprintf(stderr,
			"rollcache mount: %s is a dead %s mount, not rollcache's: unmount it "
			"first (fusermount3 -u -z %s)\n",
			mp, fstype, mp);
		return 1;
	}
	const char *lazy[] = {"fusermount3", "-u", "-z", mp, NULL};
	if (cli_run(lazy, true, NULL) != 0 && umount2(mp, MNT_DETACH) != 0) {
		fprintf(stderr,
			"rollcache mount: %s: the daemon of the rollcache mount there is gone, and "
			"unmounting it failed (%s): run `rollcache umount %s` as its owner\n",
			mp, strerror(errno), mp);
		return 1;
	}
	fprintf(stderr,
		"rollcache mount: %s: the daemon of the mount there was gone: unmounted it, "
		"mounting again\n",
		mp);
	return 0;
}

/* Builds the schedule once, so that a bad one is a config error (exit 2). */
static int check_schedule(const struct cmn_config *cfg, char *err, size_t errlen)
{
	struct evc_schedule sch;
	int rc = evc_schedule_build(cfg->epochs, cfg->n_epochs, cfg->limit, cfg->path, &sch, err,
				    errlen);
	if (rc == 0)
		evc_schedule_free(&sch);
	return rc;
}

int cmd_mount(int argc, char **argv)
{
	struct cmn_config cfg;
	struct mount_args ma;
	char err[1024];
	const char *pos[3] = {NULL, NULL, NULL};
	const char *source = NULL, *mountpoint = NULL, *config = NULL;
	bool foreground = false, debug = false, allow_non_empty = false;
	int npos = 0;
	char mp_abs[PATH_MAX], dir_abs[PATH_MAX], src_copy[2048];
	int ret = 2;

	cmn_config_init(&cfg);
	memset(&ma, 0, sizeof(ma));
	ma.cfg = &cfg;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			mount_usage(stdout, true);
			ret = 0;
			goto out;
		}
		if (!strcmp(argv[i], "--config") && i + 1 < argc)
			config = argv[i + 1];
		else if (!strncmp(argv[i], "--config=", 9))
			config = argv[i] + 9;
	}
	if (config && cmn_config_load_file(&cfg, config, err, sizeof(err))) {
		fprintf(stderr, "rollcache mount: %s\n", err);
		goto out;
	}
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-f")) {
			foreground = true;
		} else if (!strcmp(a, "-d")) {
			debug = foreground = true;
		} else if (!strcmp(a, "--allow-non-empty") || !strcmp(a, "--allow_non_empty")) {
			allow_non_empty = true;
		} else if (!strncmp(a, "-o", 2)) {
			const char *v = a[2] ? a + 2 : (i + 1 < argc ? argv[++i] : NULL);
			if (!v) {
				fprintf(
				    stderr,
				    "rollcache mount: -o needs options, such as -o limit=20G\n");
				goto out;
			}
			if (cli_mount_parse_o(&ma, v) != 0) {
				fprintf(stderr, "rollcache mount: %s\n", ma.err);
				goto out;
			}
		} else if (!strncmp(a, "--", 2)) {
			/* --key value or --key=value */
			char key[128];
			const char *eq = strchr(a, '='), *v;
			if (eq) {
				snprintf(key, sizeof(key), "%.*s", (int)(eq - a), a);
				v = eq + 1;
			} else {
				if (i + 1 >= argc) {
					fprintf(stderr, "rollcache mount: %s needs a value\n", a);
					goto out;
				}
				snprintf(key, sizeof(key), "%s", a);
				v = argv[++i];
			}
			if (!strcmp(key, "--config"))
				continue;
			if (cmn_config_set(&cfg, key + 2, v, key, err, sizeof(err))) {
				fprintf(stderr, "rollcache mount: %s\n", err);
				goto out;
			}
		} else if (a[0] == '-' && a[1]) {
			fprintf(stderr, "rollcache mount: unknown option `%s`: see --help\n", a);
			goto out;
		} else if (npos < 3) {
			pos[npos++] = a;
		} else {
			fprintf(stderr, "rollcache mount: unexpected argument `%s`\n", a);
			goto out;
		}
	}
	if (ma.nonempty)
		allow_non_empty = true;
	if (npos == 2) {
		source = pos[0];
		mountpoint = pos[1];
	} else if (npos == 1 && cfg.url) {
		mountpoint = pos[0]; /* the source is the config file's [source] url */
	} else if (npos > 2) {
		fprintf(stderr, "rollcache mount: unexpected argument `%s`\n", pos[2]);
		goto out;
	} else {
		fprintf(stderr, "rollcache mount: expected SOURCE and MOUNTPOINT (or MOUNTPOINT "
				"and url in the config file's [source]); see --help\n");
		goto out;
	}
	if (source && cmn_config_set(&cfg, "url", source, "SOURCE", err, sizeof(err))) {
		fprintf(stderr, "rollcache mount: %s\n", err);
		goto out;
	}
	if (cmn_config_finish(&cfg, err, sizeof(err)) || check_schedule(&cfg, err, sizeof(err))) {
		fprintf(stderr, "rollcache mount: %s\n", err);
		goto out;
	}
	if (clean_dead_mount(mountpoint) != 0) {
		ret = 1;
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
	if (cli_is_mount_point(mp_abs, fstype, sizeof(fstype))) {
		fprintf(stderr,
			"rollcache mount: %s is already a mount point (%s): unmount it first "
			"(rollcache umount %s)\n",
			mp_abs, fstype, mp_abs);
		ret = 1;
		goto out;
	}
	if (!allow_non_empty && dir_has_entries(mp_abs) > 0) {
		fprintf(stderr,
			"rollcache mount: %s is not empty: mount on an empty directory, or pass "
			"--allow-non-empty (-o nonempty) to hide its files\n",
			mp_abs);
		goto out;
	}
	if (!cfg.cache_dir) {
		if (cli_default_cache_dir(cfg.url, dir_abs, sizeof(dir_abs)) != 0) {
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

	struct dmn_opts o = {
	    .cfg = &cfg,
	    .mountpoint = mp_abs,
	    .source = src_copy,
	    .debug = debug,
	    .splice_read = ma.splice,
	    .passthrough = !ma.no_passthrough,
	    .readahead_kib = ma.readahead_kib,
	    .fuse_opts = ma.fuse_opts,
	    .detach = !foreground,
	};
	int rc = dmn_run(&o, err, sizeof(err));
	if (rc != 0)
		fprintf(stderr, "rollcache mount: %s\n", err);
	/* a source URL that cannot be one is a usage error (daemon/samplers.h) */
	ret = rc == 0 ? 0 : rc == -EINVAL || rc == -ENOTSUP ? 2 : 1;
out:
	cmn_config_free(&cfg);
	return ret;
}
