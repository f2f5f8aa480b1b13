#!/usr/bin/python3
"""cli-mount-restart-kill9-fuse: `rollcache mount` over the mount point of a
daemon killed with SIGKILL, on a real FUSE mount.

After kill -9 the mount point answers ENOTCONN (the kernel keeps the dead
mount).  Proves: the same mount command run again exits 0, says in one line
on stderr that it unmounted the dead mount, and `current/` is readable, with
the surviving cache's files (invariant 6); the dead mount is gone from
/proc/self/mountinfo (one fuse.rollcache entry at the mount point, the
new one).  A live mount is still refused (exit 1, "already a mount point"),
and so is another file system on the point: a tmpfs there (root only)
stays mounted.
"""
import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clitest import skip, check, eq, run, is_mounted, finish  # noqa: E402


def entries(mp):
    """fs types of the mounts at mp, from /proc/self/mountinfo."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            if parts[4] == mp:
                out.append(parts[parts.index("-") + 1])
    return out


def daemon_pid(mp):
    with open(os.path.join(mp, ".rollcache", "stats")) as f:
        return json.load(f)["pid"]


def main():
    if not os.path.exists("/dev/fuse"):
        skip("/dev/fuse is missing")
    root = tempfile.mkdtemp(prefix="rc-restart-")
    mp = os.path.join(root, "mnt")
    os.makedirs(mp)
    try:
        remote = os.path.join(root, "remote")
        p = run("synth", remote, "--records", 400, "--record-size", "4K", "--shards", 4)
        eq(p.returncode, 0, "synth (%s)" % p.stderr)
        cmd = ["mount", "file://%s/" % remote, mp, "--limit", "4M", "--shard-size", "256K",
               "--cache-dir", os.path.join(root, "cache")]
        p = run(*cmd)
        eq(p.returncode, 0, "first mount (%s)" % p.stderr)
        if p.returncode != 0:
            return
        p = run("epoch", mp, "next", "--wait")
        eq(p.returncode, 0, "epoch next --wait (%s)" % p.stderr)
        before = sorted(os.listdir(os.path.join(mp, "current")))
        check(before, "epoch 1 lists files")

        # a live mount is refused, and left alone
        p = run(*cmd)
        eq(p.returncode, 1, "mount over a live mount: exit (%s)" % p.stderr)
        check("already a mount point" in p.stderr, "live mount: %r" % p.stderr)

        pid = daemon_pid(mp)
        os.kill(pid, signal.SIGKILL)
        for _ in range(100):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        try:
            os.statvfs(mp)  # always a request to the daemon (stat may be cached)
            check(False, "the mount point still answers after kill -9")
        except OSError as e:
            check(e.errno in (errno.ENOTCONN, errno.ECONNABORTED),
                  "dead mount point: %s" % e)
        eq(entries(mp), ["fuse.rollcache"], "the dead mount is still mounted")

        p = run(*cmd)
        eq(p.returncode, 0, "mount over the dead mount: exit (%s)" % p.stderr)
        lines = p.stderr.strip().splitlines()
        eq(len(lines), 1, "one line on stderr: %r" % p.stderr)
        check("was gone" in p.stderr and "mounting again" in p.stderr,
              "says what it did: %r" % p.stderr)
        eq(entries(mp), ["fuse.rollcache"], "one rollcache mount after the restart")
        after = sorted(os.listdir(os.path.join(mp, "current")))
        check(after, "current/ lists files after the restart")
        for name in after:
            with open(os.path.join(mp, "current", name), "rb") as f:
                check(len(f.read()) > 0, "current/%s reads" % name)
        check(daemon_pid(mp) != pid, "a new daemon serves the mount")
        run("umount", mp)

        # never another file system: a tmpfs over the point stays
        if os.geteuid() == 0:
            r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mp],
                               capture_output=True, text=True)
            if r.returncode == 0:
                p = run(*cmd, "--allow-non-empty")
                eq(p.returncode, 1, "mount over a tmpfs: exit (%s)" % p.stderr)
                eq(entries(mp), ["tmpfs"], "the tmpfs is still mounted")
                subprocess.run(["umount", mp], capture_output=True)
    finally:
        for _ in range(3):
            if is_mounted(mp):
                run("umount", mp)
        shutil.rmtree(root, ignore_errors=True)
    finish()


main()
