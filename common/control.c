/*
 * control.c - cmn_control_send(): one command to a mount's daemon.
 *
 * Owns only the client side of the control ioctl (include/rollcache/control.h);
 * cachefs/fs.c answers it.  The mount is read-only, so the command travels as
 * an ioctl on the control file opened O_RDONLY.  A plain file answers ENOTTY:
 * then the command is written to it, which is how tests stand a directory in
 * for a mount.
 */
#include "common/control.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "rollcache/control.h"

static int write_cmd(const char *control, const char *cmd)
{
	int fd = open(control, O_WRONLY | O_TRUNC | O_CLOEXEC); /* the last command */
	if (fd < 0)
		return -errno;
	int rc = 0;
	ssize_t w;
	do
		w = write(fd, cmd, strlen(cmd));
	while (w < 0 && errno == EINTR);
	if (w != (ssize_t)strlen(cmd))
		rc = w < 0 ? -errno : -EIO;
	if (close(fd) != 0 && rc == 0)
		rc = -errno;
	return rc;
}

int cmn_control_send(const char *control, const char *cmd)
{
	struct rc_control c;
	size_t n = strlen(cmd);

	if (n >= sizeof(c.cmd))
		return -EINVAL;
	memset(&c, 0, sizeof(c));
	memcpy(c.cmd, cmd, n);

	int fd = open(control, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* no retry on EINTR: "next" without N is not idempotent */
	int rc = ioctl(fd, RC_CONTROL_IOC, &c) < 0 ? -errno : 0;
	close(fd);
	if (rc == -ENOTTY) /* not a rollcache mount: a plain file stands in */
		rc = write_cmd(control, cmd);
	return rc;
}
