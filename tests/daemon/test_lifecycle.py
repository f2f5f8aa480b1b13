#!/usr/bin/python3
"""fuse-lifecycle MODE: the daemon's end and a re-mount.

  sigkill   SIGKILL of the daemon leaves a dead mount (ENOTCONN) that
            `rollcache umount` clears; the next mount serves the surviving
            cache intact (same names, same bytes) at once.
  sigterm   SIGTERM unmounts cleanly: the mount goes away, the daemon exits,
            the cache lock is released and a re-mount serves the same files.
  fstab     mount(8)'s helper mount.fuse3 with type fuse.rollcache and an
            fstab-style option string (nofail, _netdev, x-systemd.*, rw,
            cache_dir=, limit=) mounts; see docs/mount.md.
"""
import errno
import hashlib
import os
import signal
import subprocess
import sys

import rcfuse as t


def snapshot(mp):
    cur = os.path.join(mp, "current")
    out = {}
    for n in sorted(os.listdir(cur)):
        with open(os.path.join(cur, n), "rb") as f:
            out[n] = hashlib.sha256(f.read()).hexdigest()
    return out


def prefill(s):
    s.synth(records=60, size="4K", shards=3)
    t.run("ingest", "file://%s/" % s.src, "--cache-dir", s.cache, "--limit", "4M",
          "--shard-size", "64K")


def remount_same(s, before):
    s.mount("file://%s/" % s.empty, "--limit", "4M", "--shard-size", "64K")
    t.eq(snapshot(s.mnt), before, "files after re-mount")
    t.run("check", os.path.join(s.mnt, "current"))
    s.umount()


def sigkill(s):
    prefill(s)
    pid = s.mount("file://%s/" % s.empty, "--limit", "4M", "--shard-size", "64K")
    before = snapshot(s.mnt)
    if not before:
        t.fail("nothing mounted")
    os.kill(pid, signal.SIGKILL)
    t.wait_for(lambda: not t.pid_alive(pid), "the daemon to die")
    try:
        os.listdir(s.mnt)
        t.fail("listing a dead mount succeeded")
    except OSError as e:
        # ENOTCONN, or ECONNABORTED while the kernel still tears the
        # connection down (seen right after the daemon's exit)
        if e.errno not in (errno.ENOTCONN, errno.ECONNABORTED):
            t.fail("listing a dead mount: %s, want ENOTCONN or ECONNABORTED"
                   % errno.errorcode.get(e.errno))
    p = t.run("status", s.mnt, check=False)
    t.eq(p.returncode, 1, "status on a dead mount")
    if "umount" not in p.stderr:
        t.fail("status on a dead mount should say to umount: %r" % p.stderr)
    t.run("umount", s.mnt)
    s.mounts.remove(s.mnt)
    t.eq(t.is_mounted(s.mnt), False, "mounted after umount")
    remount_same(s, before)


def sigint(s):
    """-f in the foreground, started the way a shell starts a background job
    (SIGINT ignored): SIGINT still unmounts cleanly and the daemon exits 0."""
    prefill(s)
    p = subprocess.Popen([t.RC, "mount", "file://%s/" % s.empty, s.mnt, "--cache-dir", s.cache,
                          "--limit", "4M", "--shard-size", "64K", "--allow-empty", "true", "-f"],
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
                         stderr=subprocess.PIPE, text=True)
    s.pids.append(p.pid)
    s.mounts.append(s.mnt)
    t.wait_for(lambda: os.path.exists(os.path.join(s.mnt, "current")), "the -f mount", timeout=20)
    before = snapshot(s.mnt)
    p.send_signal(signal.SIGINT)
    try:
        _, err = p.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        t.fail("the daemon did not exit on SIGINT")
    t.eq(p.returncode, 0, "exit status after SIGINT (stderr %r)" % err)
    t.eq(t.is_mounted(s.mnt), False, "mounted after SIGINT")
    s.mounts.remove(s.mnt)
    remount_same(s, before)


def sigterm(s):
    prefill(s)
    pid = s.mount("file://%s/" % s.empty, "--limit", "4M", "--shard-size", "64K")
    before = snapshot(s.mnt)
    with open(os.path.join(s.mnt, "current", sorted(before)[0]), "rb") as f:
        f.read(100)
    os.kill(pid, signal.SIGTERM)
    t.wait_for(lambda: not t.pid_alive(pid), "the daemon to exit on SIGTERM")
    t.eq(t.is_mounted(s.mnt), False, "mounted after SIGTERM")
    s.mounts.remove(s.mnt)
    # the read statistics were flushed on the way out
    reads = s.catalog("SELECT SUM(reads) FROM shards")[0][0]
    if not reads:
        t.fail("read statistics lost at SIGTERM: %r" % reads)
    remount_same(s, before)


def fstab(s):
    prefill(s)
    helper = "/sbin/mount.fuse3"
    if not os.path.exists(helper):
        t.missing("/sbin/mount.fuse3 is not installed",
                  "run scripts/deps.sh (apt-get install fuse3)")
    # mount.fuse3 runs `rollcache SOURCE MOUNTPOINT -o OPTS` through $PATH:
    # put the binary under test first in $PATH under its plain name, so
    # main()'s source-first dispatch is what runs.
    shim_dir = os.path.join(s.root, "bin")
    os.makedirs(shim_dir)
    os.symlink(t.RC, os.path.join(shim_dir, "rollcache"))
    env = dict(os.environ, PATH=shim_dir + ":" + os.environ.get("PATH", "/usr/bin:/bin"))
    opts = ("rw,nofail,_netdev,noauto,x-systemd.automount,cache_dir=%s,limit=4M,"
            "shard_size=64K,min_records=10,allow_empty=true" % s.cache)
    p = subprocess.run([helper, "file://%s/" % s.empty, s.mnt, "-t", "fuse.rollcache", "-o", opts],
                       env=env, capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        t.fail("mount.fuse3: exit %d: %s %s" % (p.returncode, p.stdout, p.stderr))
    s.mounts.append(s.mnt)
    st = s.stats()
    s.pids.append(st["pid"])
    t.eq(st["min_records"], 10, "min_records from -o")
    t.eq(st["limit"], 4 << 20, "limit from -o")
    t.eq(st["cache_dir"], s.cache, "cache_dir from -o")
    if not snapshot(s.mnt):
        t.fail("nothing served after mount.fuse3")
    with open("/proc/self/mountinfo") as f:
        line = [l for l in f if l.split()[4] == s.mnt][0]
    if "fuse.rollcache" not in line:
        t.fail("mount type is not fuse.rollcache: %s" % line)
    s.umount()
    # a bad option is one line on stderr and a failing exit status
    p = subprocess.run([helper, "file://%s/" % s.empty, s.mnt, "-t", "fuse.rollcache", "-o",
                        "cache_dir=%s,limit=20X" % s.cache], env=env, capture_output=True,
                       text=True, timeout=60)
    if p.returncode == 0 or "20X" not in p.stderr:
        t.fail("bad -o limit: exit %d, stderr %r" % (p.returncode, p.stderr))


def errors(s):
    """Failures come back from the daemonizing child as the parent's exit
    status and one line on stderr naming what is wrong and what to do."""
    prefill(s)
    src = "file://%s/" % s.empty

    def expect(code, words, *args):
        p = t.run("mount", *args, check=False)
        t.eq(p.returncode, code, "exit status of mount %s" % " ".join(map(str, args)))
        line = p.stderr.strip()
        t.eq(len(line.splitlines()), 1, "one line on stderr: %r" % line)
        for w in words:
            if w not in line:
                t.fail("stderr %r lacks %r" % (line, w))

    expect(2, ["limit"], src, s.mnt, "--cache-dir", s.cache)
    expect(2, ["20X"], src, s.mnt, "--cache-dir", s.cache, "-o", "limit=20X")
    expect(2, ["create the mount point"], src, os.path.join(s.root, "nope"),
           "--cache-dir", s.cache, "--limit", "4M", "--shard-size", "64K")
    pid = s.mount(src, "--limit", "4M", "--shard-size", "64K")
    other = os.path.join(s.root, "mnt2")
    os.makedirs(other)
    # the cache is locked by the running daemon: the child reports it
    expect(1, ["in use by pid %d" % pid], src, other, "--cache-dir", s.cache, "--limit", "4M",
           "--shard-size", "64K")
    t.eq(t.is_mounted(other), False, "a failed mount left a mount behind")
    expect(1, ["already a mount point"], src, s.mnt, "--cache-dir",
           os.path.join(s.root, "cache2"), "--limit", "4M", "--shard-size", "64K",
           "--allow-empty", "true")
    expect(1, ["%s: 0 objects listed" % src, "allow_empty = true"], src, other, "--cache-dir",
           os.path.join(s.root, "cache3"), "--limit", "4M", "--shard-size", "64K")
    s.umount()


modes = {"sigkill": sigkill, "sigterm": sigterm, "sigint": sigint, "fstab": fstab, "errors": errors}
t.main(modes[sys.argv[1]], sys.argv[1])
