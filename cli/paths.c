/*
 * paths.c - small path helpers shared by the CLI's subcommands.
 */
#include "cli/paths.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int cli_absolute_path(const char *path, char *out, size_t len)
{
	if (path[0] == '/') {
		if (strlen(path) >= len)
			return -ENAMETOOLONG;
		strcpy(out, path);
		return 0;
	}
	char cwd[PATH_MAX];
	if (!getcwd(cwd, sizeof(cwd)))
		return -errno;
	int n = snprintf(out, len, "%s/%s", cwd, path);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}
