"""Commands to a rollcache mount's daemon (include/rollcache/control.h).

The mount is read-only, so a command travels as an ioctl on
MOUNTPOINT/.rollcache/control opened for reading.  Pure Python: no library
is loaded.

    import rollcache
    rollcache.control("/mnt/train", "next")        # one more epoch
    rollcache.control("/mnt/train", "next 7 wait")  # reach epoch 7 once
"""
import fcntl
import os

CMD_MAX = 64  # struct rc_control: char cmd[64], NUL included
# _IOW('R', 1, struct rc_control) in Linux's ioctl layout
IOC = (1 << 30) | (CMD_MAX << 16) | (ord("R") << 8) | 1


def control(mountpoint, command):
    """Sends command ("next", "next N", "next wait", "next N wait") and
    returns when the daemon has done it.  Raises OSError: EINVAL for an
    unknown command, ETIMEDOUT when a wait gave up (wait_timeout), ENOENT
    or ENOTTY when mountpoint is not a rollcache mount."""
    data = command.encode()
    if len(data) >= CMD_MAX:
        raise ValueError("control command longer than %d bytes" % (CMD_MAX - 1))
    fd = os.open(os.path.join(mountpoint, ".rollcache", "control"),
                 os.O_RDONLY | os.O_CLOEXEC)
    try:
        fcntl.ioctl(fd, IOC, data.ljust(CMD_MAX, b"\0"))
    finally:
        os.close(fd)
