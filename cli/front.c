/*
 * front.c - the `rollcache` program users run.  `epoch`, `status` and
 * `umount` run here; every other command (and --help, --version, the
 * mount helper's argv) runs in rollcache-core, exec'd with the same argv.
 *
 * Why two programs: rollcache-core links libcurl, libfuse, SQLite and the
 * feeder, about 45 shared libraries whose loading and relocation cost about
 * 20 ms at every start on this machine - more than the whole `epoch next
 * --wait` at a boundary whose records are resident (the target is 20 ms).
 * The control commands only read a mount's stats JSON and send one ioctl
 * (cli/cmd_control.c), so this program links jansson and libc.
 *
 * Where rollcache-core is: beside this program (the build tree), then
 * ../libexec/rollcache/ from it (an install, under any DESTDIR), then the
 * configured libexecdir.  Owns nothing else; exit codes are the command's,
 * or 127 when rollcache-core cannot be run.
 */
#include "cli/cmd.h"
#include "rc_config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
} here[] = {
    {"epoch", cmd_epoch},
    {"status", cmd_status},
    {"umount", cmd_umount},
};

static int exec_core(char **argv)
{
	char dir[PATH_MAX], path[PATH_MAX + 64];
	int err = ENOENT;
	ssize_t n = readlink("/proc/self/exe", dir, sizeof(dir) - 1);
	if (n > 0) {
		dir[n] = '\0';
		char *slash = strrchr(dir, '/');
		if (slash)
			*slash = '\0';
		static const char *const rel[] = {"/rollcache-core",
						  "/../libexec/rollcache/rollcache-core"};
		for (size_t i = 0; slash && i < sizeof(rel) / sizeof(rel[0]); i++) {
			snprintf(path, sizeof(path), "%s%s", dir, rel[i]);
			execv(path, argv);
			if (errno != ENOENT)
				err = errno;
		}
	}
	execv(RC_LIBEXECDIR "/rollcache/rollcache-core", argv);
	if (errno != ENOENT)
		err = errno;
	fprintf(stderr,
		"rollcache: cannot run rollcache-core (looked beside %s and in %s/rollcache): %s; "
		"reinstall rollcache\n",
		n > 0 ? dir : "this program", RC_LIBEXECDIR, strerror(err));
	return 127;
}

int main(int argc, char **argv)
{
	if (argc >= 2)
		for (size_t i = 0; i < sizeof(here) / sizeof(here[0]); i++)
			if (strcmp(argv[1], here[i].name) == 0)
				return here[i].fn(argc - 1, argv + 1);
	return exec_core(argv);
}
