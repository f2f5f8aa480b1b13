#!/usr/bin/python3
"""fuse-erofs: every mutating call on the mount answers EROFS.

open for write / read-write / truncate, creat, truncate, mkdir, rmdir,
unlink, rename, link, symlink, mknod, chmod, chown, utimensat, setxattr and
removexattr, on files, epoch directories and the root: first on the `ro`
mount, where the kernel answers, then remounted `rw`, where every one of
them reaches the daemon's own handlers.  Also checks the modes (0444
files, 0555 dirs, 0400 control), the fixed names (readdir agrees with
lstat on each one's inode and type), `ro` in /proc/mounts, the
control ioctl, and that the sealed file is unchanged afterwards (DESIGN invariant 1).
"""
import errno
import os
import stat
import subprocess

import rcfuse as t


def expect_erofs(what, fn, *args):
    try:
        fn(*args)
    except OSError as e:
        t.eq(errno.errorcode.get(e.errno, e.errno), "EROFS", what)
        return
    t.fail("%s: succeeded, expected EROFS" % what)


def body(s):
    s.synth(records=40, size="2K", shards=2)
    t.run("ingest", "file://%s/" % s.src, "--cache-dir", s.cache, "--limit", "4M",
          "--shard-size", "64K")
    s.mount("file://%s/" % s.empty, "--limit", "4M", "--shard-size", "64K")
    cur = os.path.realpath(os.path.join(s.mnt, "current"))
    names = sorted(os.listdir(cur))
    if not names:
        t.fail("current/ is empty")
    f = os.path.join(cur, names[0])
    with open(f, "rb") as fh:
        before = fh.read()

    # modes
    t.eq(stat.S_IMODE(os.stat(f).st_mode), 0o444, "file mode")
    for d in (s.mnt, cur, os.path.join(s.mnt, "epochs"), os.path.join(s.mnt, ".rollcache")):
        t.eq(stat.S_IMODE(os.stat(d).st_mode), 0o555, "mode of " + d)
    t.eq(stat.S_IMODE(os.stat(os.path.join(s.mnt, ".rollcache", "control")).st_mode), 0o400,
         "control mode")
    # the fixed names: readdir lists each one with the inode and type its
    # lookup (lstat) gives; stats and metrics are 0444 files of size 0
    meta = os.path.join(s.mnt, ".rollcache")
    fixed = {s.mnt: {"current": stat.S_IFLNK, "epochs": stat.S_IFDIR, ".rollcache": stat.S_IFDIR},
             meta: {"control": stat.S_IFREG, "epochs": stat.S_IFDIR, "metrics": stat.S_IFREG,
                    "stats": stat.S_IFREG}}
    for d, want in fixed.items():
        ents = {e.name: e for e in os.scandir(d)}
        t.eq(sorted(ents), sorted(want), "names listed in " + d)
        for n, kind in want.items():
            st = os.lstat(os.path.join(d, n))
            t.eq(stat.S_IFMT(st.st_mode), kind, "type of %s/%s (lstat)" % (d, n))
            t.eq(ents[n].inode(), st.st_ino, "inode of %s/%s, readdir vs lstat" % (d, n))
            t.eq((ents[n].is_dir(follow_symlinks=False), ents[n].is_symlink()),
                 (kind == stat.S_IFDIR, kind == stat.S_IFLNK), "readdir type of %s/%s" % (d, n))
    for n in ("stats", "metrics"):
        st = os.stat(os.path.join(meta, n))
        t.eq((stat.S_IMODE(st.st_mode), st.st_size), (0o444, 0), "mode and size of " + n)
    t.eq(os.readlink(os.path.join(s.mnt, "current")), "epochs/%d" % s.stats()["epoch"],
         "the text of current")
    # the mount is read-only for the kernel too, not only for the daemon
    with open("/proc/mounts") as pm:
        opts = [ln.split()[3].split(",") for ln in pm if ln.split()[1] == s.mnt]
    t.eq(len(opts), 1, "the mount in /proc/mounts")
    t.eq("ro" in opts[0] and "rw" not in opts[0], True, "ro in /proc/mounts: %s" % opts[0])

    def attempts(who):
        """Every mutating call answers EROFS (who: which side answers)."""
        new = os.path.join(cur, "new-file")
        for d in (cur, s.mnt):
            nd = os.path.join(d, "new-thing")
            expect_erofs(who + ": creat in " + d, os.open, nd, os.O_CREAT | os.O_WRONLY, 0o644)
            expect_erofs(who + ": mkdir in " + d, os.mkdir, nd)
            expect_erofs(who + ": symlink in " + d, os.symlink, "x", nd)
            expect_erofs(who + ": mknod in " + d, os.mknod, nd, stat.S_IFIFO | 0o644)
        expect_erofs(who + ": open O_WRONLY", os.open, f, os.O_WRONLY)
        expect_erofs(who + ": open O_RDWR", os.open, f, os.O_RDWR)
        expect_erofs(who + ": open O_RDONLY|O_TRUNC", os.open, f, os.O_RDONLY | os.O_TRUNC)
        expect_erofs(who + ": open O_WRONLY|O_TRUNC", os.open, f, os.O_WRONLY | os.O_TRUNC)
        expect_erofs(who + ": open O_WRONLY|O_APPEND", os.open, f, os.O_WRONLY | os.O_APPEND)
        expect_erofs(who + ": truncate", os.truncate, f, 0)
        expect_erofs(who + ": unlink", os.unlink, f)
        expect_erofs(who + ": rmdir epoch dir", os.rmdir, cur)
        expect_erofs(who + ": rmdir .rollcache", os.rmdir, os.path.join(s.mnt, ".rollcache"))
        expect_erofs(who + ": unlink current", os.unlink, os.path.join(s.mnt, "current"))
        expect_erofs(who + ": rename", os.rename, f, new)
        if len(names) > 1:
            expect_erofs(who + ": rename over", os.rename, f, os.path.join(cur, names[1]))
        expect_erofs(who + ": link", os.link, f, new)
        expect_erofs(who + ": chmod", os.chmod, f, 0o644)
        expect_erofs(who + ": chmod dir", os.chmod, cur, 0o755)
        expect_erofs(who + ": chown", os.chown, f, 1, 1)
        expect_erofs(who + ": utimensat", os.utime, f, (1, 1))
        expect_erofs(who + ": utimensat now", os.utime, f, None)
        expect_erofs(who + ": setxattr", os.setxattr, f, "user.x", b"1")
        expect_erofs(who + ": removexattr", os.removexattr, f, "user.x")


    # the kernel answers these itself on a `ro` mount ...
    attempts("kernel (ro mount)")
    # ... so the daemon's own answers are reached with the mount remounted
    # rw: the FUSE kernel lets the mutating calls through to the daemon
    rm = subprocess.run(["mount", "-i", "-o", "remount,rw", s.mnt], capture_output=True, text=True)
    if rm.returncode != 0:
        if os.geteuid() != 0:
            s.umount()
            t.skip("remounting rw to reach the daemon's EROFS answers needs root")
        t.fail("mount -o remount,rw: %s" % rm.stderr.strip())
    with open("/proc/mounts") as pm:
        opts = [ln.split()[3].split(",") for ln in pm if ln.split()[1] == s.mnt]
    t.eq("rw" in opts[0], True, "rw in /proc/mounts after the remount: %s" % opts[0])
    attempts("daemon (rw remount)")
    try:
        fd = os.open(os.path.join(s.mnt, ".rollcache", "stats"), os.O_WRONLY)
        os.close(fd)
        t.fail("open stats for write succeeded")
    except OSError as e:
        t.eq(e.errno, errno.EROFS, "open stats O_WRONLY")
    # control opens read-only, takes commands by its ioctl, only known ones
    try:
        os.open(os.path.join(s.mnt, ".rollcache", "control"), os.O_WRONLY)
        t.fail("open control for writing succeeded")
    except OSError as e:
        t.eq(e.errno, errno.EROFS, "open control O_WRONLY")
    t.eq(t.control(s.mnt, "bogus"), errno.EINVAL, "control 'bogus'")
    with open(os.path.join(s.mnt, ".rollcache", "control"), "rb") as fh:
        t.eq(fh.read(), b"", "reading control")
        import fcntl
        try:
            fcntl.ioctl(fh.fileno(), t.CONTROL_IOC + 1, b"\0" * t.CONTROL_CMD_MAX)
            t.fail("an unknown ioctl succeeded")
        except OSError as e:
            t.eq(e.errno, errno.ENOTTY, "unknown ioctl on control")
    dfd = os.open(f, os.O_RDONLY)
    try:
        fcntl.ioctl(dfd, t.CONTROL_IOC, b"next".ljust(64, b"\0"))
        t.fail("the control ioctl on a data file succeeded")
    except OSError as e:
        t.eq(e.errno, errno.ENOTTY, "control ioctl on a data file")
    finally:
        os.close(dfd)

    with open(f, "rb") as fh:
        t.eq(fh.read() == before, True, "file unchanged after the attempts")
    t.eq(sorted(os.listdir(cur)), names, "names unchanged after the attempts")
    s.umount()


t.main(body, "erofs")
