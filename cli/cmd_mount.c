/*
 * cmd_mount.c - `rollcache mount`: parses and checks everything, then hands
 * over to the daemon (daemon/daemon.h).
 *
 *   rollcache mount SOURCE MOUNTPOINT [--config FILE] [--KEY VALUE ...]
 *                   [-o k=v,...] [-f] [-d]
 *
 * Usage and config errors exit 2 before anything happens; the daemon's
 * failures exit 1 with its one-line message (it forks unless -f/-d and
 * reports through a pipe, so the message is the same either way).  -o
 * parsing and the paths are in mount_opts.c; the commands that talk to a
 * running mount in cmd_control.c.
 */
#include "cli/cmd.h"
#include "cli/mount_opts.h"
#include "cli/util.h"
#include "common/config.h"
#include "common/log.h"
#include "daemon/daemon.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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
			if (cli_mount_parse_o(&ma, v) != 0) {
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
	if (cli_is_mount_point(mp_abs, fstype, sizeof(fstype))) {
		fprintf(stderr,
			"rollcache mount: %s is already a mount point (%s): unmount it first "
			"(rollcache umount %s)\n",
			mp_abs, fstype, mp_abs);
		ret = 1;
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
	if (rc != 0) {
		if (foreground)
			cmn_log(CMN_LOG_ERROR, "%s", err);
		fprintf(stderr, "rollcache mount: %s\n", err);
	}
	ret = rc == 0 ? 0 : 1;
out:
	cmn_config_free(&cfg);
	return ret;
}
