/*
 * main.c - `rollcache` command dispatch, --help and --version.
 *
 * Owns only the table of subcommands; each lives in its own cmd_*.c.  A
 * subcommand whose source is not built in this configuration (for example
 * `mount` without libfuse) is still listed and says what is missing.  The
 * benchmarks are not a subcommand: they are the `rollcache-bench` program
 * of a build tree (bench/meson.build), and `rollcache bench` says so.
 *
 * mount(8) compatibility: for `mount -t fuse.rollcache` and fstab lines,
 * /sbin/mount.fuse3 runs `rollcache SOURCE MOUNTPOINT -o OPTS`, and a
 * `mount.rollcache` or `mount.fuse.rollcache` link to this binary is run as
 * `mount.rollcache SOURCE MOUNTPOINT -o OPTS`.  Both mean `rollcache mount`.
 */
#include "cli/cmd.h"
#include "cli/util.h"
#ifdef HAVE_CLI_HELP
#include "cli/help.h"
#endif
#include "rc_config.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

typedef int (*cmd_fn)(int argc, char **argv);

struct command {
	const char *name;
	cmd_fn fn; /* NULL when not built in this configuration */
	const char *synopsis;
	const char *missing; /* why fn is NULL */
};

#ifdef HAVE_CMD_SYNTH
#define CMD_SYNTH cmd_synth
#else
#define CMD_SYNTH NULL
#endif
#ifdef HAVE_CMD_CHECK
#define CMD_CHECK cmd_check
#else
#define CMD_CHECK NULL
#endif
#ifdef HAVE_CMD_INGEST
#define CMD_INGEST cmd_ingest
#else
#define CMD_INGEST NULL
#endif
#ifdef HAVE_CMD_MOUNT
#define CMD_MOUNT cmd_mount
#else
#define CMD_MOUNT NULL
#endif
#ifdef HAVE_CMD_CONTROL
#define CMD_UMOUNT cmd_umount
#define CMD_EPOCH  cmd_epoch
#define CMD_STATUS cmd_status
#else
#define CMD_UMOUNT NULL
#define CMD_EPOCH  NULL
#define CMD_STATUS NULL
#endif
#ifdef HAVE_CMD_REPORT
#define CMD_REPORT cmd_report
#else
#define CMD_REPORT NULL
#endif
#ifdef HAVE_CMD_SIMULATE
#define CMD_SIMULATE cmd_simulate
#else
#define CMD_SIMULATE NULL
#endif

/* Why umount, epoch and status are missing: they parse a mount's stats JSON. */
#define NO_JSON                                                                                    \
	"this build has no JSON reader (install libjansson-dev and rebuild without "               \
	"-Dcatalog=disabled)"

static const struct command commands[] = {
    {"mount", CMD_MOUNT, "[SOURCE] MOUNTPOINT [--config FILE] [--KEY VALUE] [-o k=v]",
     "this build has no FUSE support (install libfuse3-dev and rebuild)"},
    {"epoch", CMD_EPOCH, "MOUNTPOINT [next [N] [--wait] | show]", NO_JSON},
    {"status", CMD_STATUS, "MOUNTPOINT [--json] [--watch] [--wide]", NO_JSON},
    {"ingest", CMD_INGEST, "SOURCE --cache-dir DIR --limit SIZE [--config FILE]",
     "this build has no sampler support (install libcurl4-openssl-dev and rebuild)"},
    {"report", CMD_REPORT, "MOUNTPOINT|CACHE_DIR [--svg FILE] [--wide]",
     "not built in this configuration"},
    {"simulate", CMD_SIMULATE, "--config FILE --dataset SIZE ...",
     "not built in this configuration"},
    {"synth", CMD_SYNTH, "DIR --records N [--record-size SIZE] [--shards K] ...",
     "not built in this configuration"},
    {"check", CMD_CHECK, "FILE|DIR...", "not built in this configuration"},
    {"umount", CMD_UMOUNT, "MOUNTPOINT", NO_JSON},
};

static void usage(FILE *out)
{
	fprintf(out, "usage: rollcache COMMAND [ARGS...]\n\n"
		     "rolling local sample cache of a remote training dataset\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		cli_wrap(out, commands[i].synopsis,
			 (size_t)fprintf(out, "  rollcache %-8s ", commands[i].name), 21, 80);
	fprintf(out, "\n`rollcache COMMAND --help` describes one command (`rollcache mount\n"
		     "--help` every configuration key); `rollcache --version` prints the version;\n"
		     "`man rollcache` is the manual.\n");
}

/* True when argv is a mount helper's `[rollcache] SOURCE MOUNTPOINT ...`. */
static bool is_mount_helper_argv(int argc, char **argv)
{
	const char *slash = strrchr(argv[0], '/');
	const char *base = slash ? slash + 1 : argv[0];

	if (strcmp(base, "mount.rollcache") == 0 || strcmp(base, "mount.fuse.rollcache") == 0)
		return true;
	/* A subcommand name never contains "://" nor starts with '/'. */
	return argc >= 3 && (strstr(argv[1], "://") != NULL || argv[1][0] == '/');
}

/*
 * glibc raises its mmap threshold to the size of each large block freed, up
 * to 32 MiB: once the first listing freed its MANIFEST body, every later
 * listing's arrays and string blocks came from the heap, whose freed pages
 * stay resident, and a relist added its size to the daemon's peak.  With a
 * fixed threshold, blocks of RC_MMAP_THRESHOLD bytes and more get mappings
 * of their own, returned when freed.
 */
#define RC_MMAP_THRESHOLD (1 << 20)

static void malloc_setup(void)
{
#ifdef __GLIBC__
	mallopt(M_MMAP_THRESHOLD, RC_MMAP_THRESHOLD);
#endif
}

int main(int argc, char **argv)
{
	malloc_setup();
	if (argc >= 1 && is_mount_helper_argv(argc, argv)) {
		/* cmd_mount ignores argv[0]: hand it SOURCE MOUNTPOINT [-o ...] as is. */
		cmd_fn mount_fn = CMD_MOUNT;
		if (!mount_fn) {
			fprintf(stderr, "rollcache: this build has no FUSE support "
					"(install libfuse3-dev and rebuild)\n");
			return 1;
		}
		return mount_fn(argc, argv);
	}
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		usage(stdout);
		return 0;
	}
#ifdef HAVE_CLI_HELP
	if (strcmp(argv[1], "--man") == 0) { /* rollcache(1), built by cli/meson.build */
		struct cli_cmd_line lines[sizeof(commands) / sizeof(commands[0])];
		for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
			lines[i] = (struct cli_cmd_line){commands[i].name, commands[i].synopsis};
		cli_help_man(stdout, lines, sizeof(lines) / sizeof(lines[0]));
		return fflush(stdout) == 0 ? 0 : 1;
	}
#endif
	if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0) {
		printf("rollcache %s\n", RC_VERSION);
		return 0;
	}
	if (strcmp(argv[1], "bench") == 0) { /* not listed in --help */
		fprintf(stderr, "rollcache bench: moved to rollcache-bench in BUILD/bench/ "
				"(docs/benchmarks.md)\n");
		return 2;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		const struct command *c = &commands[i];
		if (strcmp(argv[1], c->name) != 0)
			continue;
		if (!c->fn) {
			fprintf(stderr, "rollcache %s: %s\n", c->name, c->missing);
			return 1;
		}
		return c->fn(argc - 1, argv + 1);
	}
	fprintf(stderr, "rollcache: unknown command '%s': run `rollcache --help` for the list\n",
		argv[1]);
	return 2;
}
