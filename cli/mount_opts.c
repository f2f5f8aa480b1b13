/*
 * mount_opts.c - `rollcache mount`'s -o parsing and paths (mount_opts.h).
 *
 * -o options go through fuse_opt: generic mount(8) options (rw, nofail,
 * _netdev, noauto, user, defaults, x-*, ...) are accepted and ignored, FUSE
 * options (allow_other, allow_root, auto_unmount, max_read=) pass through to
 * the kernel mount, and every other k=v is a configuration key (common/
 * config.h), so fstab lines of type fuse.rollcache work.  Ours: splice_read,
 * no_splice_read, passthrough, no_passthrough, readahead_kb=N.
 */
#define FUSE_USE_VERSION 314

#include "cli/mount_opts.h"

#include <errno.h>
#include <fuse_opt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- -o parsing (fuse_opt) ------------------------------------------- */

enum {
	KEY_IGNORE = 1,
	KEY_PASS = 2,
	KEY_SPLICE = 3,
	KEY_NOSPLICE = 4,
	KEY_READAHEAD = 5,
	KEY_PT = 6,
	KEY_NOPT = 7,
	KEY_NONEMPTY = 8,
};

static const struct fuse_opt mount_opt_spec[] = {
    /* generic mount(8)/fstab options: meaningless here */
    FUSE_OPT_KEY("rw", KEY_IGNORE), /* fstab default: the mount is ro whatever it says */
    FUSE_OPT_KEY("ro", KEY_IGNORE), /* always read-only (cachefs/fs.c adds ro) */
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
    FUSE_OPT_KEY("nonempty", KEY_NONEMPTY), /* s3fs and old FUSE spell it so */
    FUSE_OPT_KEY("allow_non_empty", KEY_NONEMPTY),
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
	case KEY_NONEMPTY:
		ma->nonempty = true;
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
int cli_mount_parse_o(struct mount_args *ma, const char *opts)
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
int cli_default_cache_dir(const char *url, char *out, size_t len)
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

/*
 * Whether `path` (absolute, resolved) is a mount point now, from
 * /proc/self/mountinfo (no access to the path itself: a dead FUSE mount
 * would answer ENOTCONN).  Fills fstype when it is.
 */
bool cli_is_mount_point(const char *path, char *fstype, size_t len)
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
