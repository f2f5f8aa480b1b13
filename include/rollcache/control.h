/*
 * rollcache/control.h - the control channel of a rollcache mount.
 *
 * A mount is read-only (`ro` in /proc/mounts), so the kernel refuses to open
 * any of its files for writing.  Commands reach the daemon as an ioctl on
 * MOUNTPOINT/.rollcache/control opened read-only:
 *
 *     struct rc_control c = {0};
 *     snprintf(c.cmd, sizeof c.cmd, "next 7 wait");
 *     int fd = open("/mnt/train/.rollcache/control", O_RDONLY | O_CLOEXEC);
 *     int rc = ioctl(fd, RC_CONTROL_IOC, &c);    // 0, or -1 with errno
 *     close(fd);
 *
 * Commands (docs/mount.md): "next", "next N", "next wait", "next N wait",
 * "retire read", "retire boundary", "retire config".  The call returns
 * when the daemon has answered: a "next" once its boundary has run (with
 * "wait", after min_records were resident or wait_timeout passed: the epoch
 * then advances all the same, and `status` says why in last_boundary.wait).
 * Errors: EINVAL for an unknown command, ERANGE for an epoch number out of
 * range, ECANCELED when the mount is going away, ENOMEM, ENOTTY for another
 * ioctl or file.
 *
 * From a shell: `rollcache epoch MOUNTPOINT next [N] [--wait]`; from Python:
 * `rollcache.control(MOUNTPOINT, "next")`.
 */
#ifndef ROLLCACHE_CONTROL_H
#define ROLLCACHE_CONTROL_H

#include <sys/ioctl.h>

#define RC_CONTROL_CMD_MAX 64 /* bytes of one command, NUL included */

struct rc_control {
	char cmd[RC_CONTROL_CMD_MAX]; /* NUL-terminated command text */
};

/* 'R' (rollcache), number 1, the kernel copies sizeof(struct rc_control) in. */
#define RC_CONTROL_IOC _IOW('R', 1, struct rc_control)

#endif
