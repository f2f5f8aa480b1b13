/*
 * cmd.h - the subcommands of the `rollcache` executable.
 *
 * Each takes argv with argv[0] = the subcommand name and returns the exit
 * code: 0 ok, 1 runtime failure, 2 usage or config error.  Errors are one
 * line on stderr naming what is wrong and what to do.
 */
#ifndef RC_CLI_CMD_H
#define RC_CLI_CMD_H

int cmd_synth(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_ingest(int argc, char **argv);
int cmd_mount(int argc, char **argv);
int cmd_umount(int argc, char **argv);
int cmd_epoch(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_simulate(int argc, char **argv);

#endif
