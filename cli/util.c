/*
 * util.c - small helpers shared by the CLI's subcommands: paths, child processes.
 */
#include "cli/util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
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

int cli_run(const char *const argv[], bool quiet, int *status)
{
	int st;
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		if (quiet) {
			int nul = open("/dev/null", O_WRONLY);
			if (nul >= 0)
				dup2(nul, 2);
		}
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (status)
		*status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EIO;
}

void cli_wrap(FILE *f, const char *text, size_t col, size_t indent, size_t width)
{
	const char *p = text;
	bool first = true; /* no word of text on this line yet */
	while (*p == ' ')
		p++;
	while (*p) {
		size_t n = strcspn(p, " ");
		if (col + (first ? 0 : 1) + n > width && col > indent) {
			fprintf(f, "\n%*s", (int)indent, "");
			col = indent;
			first = true;
		}
		if (!first) {
			fputc(' ', f);
			col++;
		}
		fwrite(p, 1, n, f);
		col += n;
		first = false;
		p += n;
		while (*p == ' ')
			p++;
	}
	fputc('\n', f);
}
