/*
 * help.h - --help text of the configuration keys and the man page, from
 * the program's own tables (help.c).  Private to cli/.
 */
#ifndef RC_CLI_HELP_H
#define RC_CLI_HELP_H

#include <stddef.h>
#include <stdio.h>

/* A subcommand as the synopsis shows it. */
struct cli_cmd_line {
	const char *name;
	const char *synopsis;
};

/* Every configuration key, grouped by section, with defaults; fits 80 columns. */
void cli_help_keys(FILE *f);

/* rollcache(1) as roff, its SYNOPSIS from cmds[0..n). */
void cli_help_man(FILE *f, const struct cli_cmd_line *cmds, size_t n);

#endif
