/*
 * control.h - sending a command to a rollcache mount's daemon.
 *
 * The one client of include/rollcache/control.h's ioctl, shared by the CLI
 * and the feeder.  A control path that is a plain file (a stand-in for a
 * mount in tests, or a directory made to look like one) gets the command
 * written to it instead, so programs can be tested without a daemon.
 */
#ifndef RC_COMMON_CONTROL_H
#define RC_COMMON_CONTROL_H

#include <stddef.h>

/*
 * Sends cmd (shorter than RC_CONTROL_CMD_MAX) to the daemon behind control
 * (MOUNTPOINT/.rollcache/control) and waits for its answer.  Returns 0, or a
 * negative errno: -EINVAL (cmd too long or refused by the daemon), the
 * daemon's -ERANGE, -ECANCELED or -ENOMEM (include/rollcache/control.h), or
 * open()/ioctl()'s error.  A "wait" that times out still returns 0.
 */
int cmn_control_send(const char *control, const char *cmd);

#endif
