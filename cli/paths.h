/*
 * paths.h - small path helpers shared by the CLI's subcommands.
 */
#ifndef RC_CLI_PATHS_H
#define RC_CLI_PATHS_H

#include <stddef.h>

/*
 * Writes `path` made absolute against the current directory (not resolved:
 * a dead FUSE mount point must not be touched) into out[len].  Returns 0,
 * -ENAMETOOLONG, or -errno from getcwd(); out is undefined on failure.
 */
int cli_absolute_path(const char *path, char *out, size_t len);

#endif
