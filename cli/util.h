/*
 * util.h - small helpers shared by the CLI's subcommands: paths, child processes.
 */
#ifndef RC_CLI_UTIL_H
#define RC_CLI_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/*
 * Writes `path` made absolute against the current directory (not resolved:
 * a dead FUSE mount point must not be touched) into out[len].  Returns 0,
 * -ENAMETOOLONG, or -errno from getcwd(); out is undefined on failure.
 */
int cli_absolute_path(const char *path, char *out, size_t len);

/*
 * Runs argv[0] (looked up in $PATH unless it contains '/') with argv and
 * waits for it.  With quiet, its stderr goes to /dev/null.  Returns 0 when
 * it exited 0, -EIO when it exited otherwise or could not be run (exit
 * status in *status when status is not NULL, -1 if it did not exit), or
 * -errno when fork/wait failed.
 */
int cli_run(const char *const argv[], bool quiet, int *status);

/*
 * Writes text and a newline to f, broken at spaces so that no line is
 * longer than width columns: the first line continues a line of which col
 * columns are already written, the others start with indent spaces.  A
 * word longer than a line is written whole on a line of its own.
 */
void cli_wrap(FILE *f, const char *text, size_t col, size_t indent, size_t width);

#endif
