/*
 * mount_opts.h - what `rollcache mount` parses before it starts the daemon:
 * -o option strings (fuse_opt), the default cache directory, and whether a
 * path is already a mount point.  Private to cli/.
 */
#ifndef RC_CLI_MOUNT_OPTS_H
#define RC_CLI_MOUNT_OPTS_H

#include "common/config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What -o options set besides configuration keys. */
struct mount_args {
	struct cmn_config *cfg;
	char fuse_opts[1024]; /* passed to the kernel mount */
	char err[512];
	bool failed;
	bool splice;		/* -o splice_read: serve reads by splice */
	bool no_passthrough;	/* -o no_passthrough: the daemon serves every read */
	uint32_t readahead_kib; /* -o readahead_kb=N */
	bool nonempty;		/* -o nonempty / allow_non_empty: mount over files */
};

/* Applies one "-o a,b=c,..." string.  Returns 0, or -EINVAL/-ENOMEM with ma->err. */
int cli_mount_parse_o(struct mount_args *ma, const char *opts);

/* The default cache dir: $XDG_CACHE_HOME (or ~/.cache)/rollcache/<fnv1a64(url)>.  0 or -errno. */
int cli_default_cache_dir(const char *url, char *out, size_t len);

/*
 * Whether `path` (absolute, resolved) is a mount point now, from
 * /proc/self/mountinfo (never touching the path: a dead FUSE mount would
 * answer ENOTCONN).  Fills fstype when it is.
 */
bool cli_is_mount_point(const char *path, char *fstype, size_t len);

#endif
