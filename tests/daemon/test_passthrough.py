#!/usr/bin/python3
"""fuse-passthrough (on) and fuse-no-passthrough (off): who serves reads.

on: the default mount.  The first pass of a file is served by the daemon
(the statistics see it: read_bytes grows by the file's size); once served
to the end, later opens are passed through to the backing file by the
kernel: the bytes are the same (read, mmap), the daemon serves nothing more
(read_bytes stays), `passthrough_opens` counts them, and the catalog still
counts them as full reads.  A file with a daemon-served handle open gets
daemon-served handles only (the kernel fails an open that mixes the modes
with EIO).  A passed-through handle held across two boundaries pins its
file (never a victim while open, DESIGN invariant 3) and reads the same
bytes; once closed, the next boundary evicts it and its disk space is
freed (the cache is on a tmpfs of its own when root, so the figure is
exact).  Exits 77 only when the kernel cannot do passthrough (< 6.9, no
CONFIG_FUSE_PASSTHROUGH, or not root); where it can, the mount must use it.

off: -o no_passthrough.  The same reads all reach the daemon.

userns: the daemon runs in a user namespace (`unshare -Urm`: root there, but
no CAP_SYS_ADMIN where it counts), so the kernel accepts passthrough at INIT
and then refuses the backing file (EPERM): that first refusal turns
passthrough off for the mount, every read is served by the daemon and
nothing fails.  Exits 77 only where user namespaces are not available.
"""
import json
import shutil
import gzip
import mmap
import os
import re
import subprocess
import sys

import rcfuse as t


def kernel_cannot():
    """Why this kernel and user cannot do FUSE passthrough, or None."""
    m = re.match(r"(\d+)\.(\d+)", os.uname().release)
    if not m or (int(m.group(1)), int(m.group(2))) < (6, 9):
        return "kernel %s has no FUSE passthrough (6.9+)" % os.uname().release
    cfg = None
    for path in ("/proc/config.gz", "/boot/config-" + os.uname().release):
        try:
            opener = gzip.open if path.endswith(".gz") else open
            with opener(path, "rt") as f:
                cfg = f.read()
            break
        except OSError:
            continue
    if cfg is None:
        return "the kernel config is not readable (/proc/config.gz, /boot/config-*)"
    if "CONFIG_FUSE_PASSTHROUGH=y" not in cfg:
        return "the kernel is built without CONFIG_FUSE_PASSTHROUGH"
    if os.geteuid() != 0:
        return "FUSE passthrough needs CAP_SYS_ADMIN (run as root)"
    return None


def used_bytes(path):
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def read_all(path):
    with open(path, "rb") as f:
        return f.read()


def drop_cache(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def shard_row(s, ident):
    return s.catalog("SELECT reads, full_reads FROM shards WHERE id = ?", ident)[0]


def body(s):
    on = sys.argv[1] == "on"
    if on:
        why = kernel_cannot()
        if why:
            t.skip(why)
    tmpfs = False
    if os.geteuid() == 0:
        os.makedirs(s.cache)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32M", "rc-pt", s.cache], check=True)
        s.cleanups.append(lambda: subprocess.run(["umount", "-l", s.cache]))
        tmpfs = True

    s.synth(records=24, size="64K", shards=3)
    cfg = s.config("[cache]\nlimit = 8M\nretire = boundary\n[sampler]\nshard_size = 512K\n"
                   "[epoch 0-]\nlimit = 8M\nadmit = 8M\npolicy = fifo\n")
    t.run("ingest", "file://%s/" % s.src, "--cache-dir", s.cache, "--config", cfg)
    s.mount("file://%s/" % s.empty, "--config", cfg, *([] if on else ["-o", "no_passthrough"]))
    st = s.stats()
    t.eq(st["view"]["passthrough"], on, "passthrough accepted at INIT")
    e = st["epoch"]
    cur = os.path.join(s.mnt, "current")
    names = sorted(os.listdir(cur))
    if len(names) < 2:
        t.fail("expected several files in epoch %d, got %r" % (e, names))
    ids = [int(n[len("shard-"):-len(".tfrecord")]) for n in names]
    want = [read_all(os.path.join(s.cache, "shards", "%d.tfrecord" % i)) for i in ids]
    a, b = os.path.join(cur, names[0]), os.path.join(cur, names[1])

    def opens():
        return s.stats()["view"]["passthrough_opens"]

    def read_bytes():
        return s.stats()["current"]["read_bytes"]

    def settle():
        # close() returns before the kernel's RELEASE reaches the daemon; an
        # open racing it finds the old handle still counted in its io mode
        t.wait_for(lambda: s.stats()["view"]["open_handles"] == 0,
                   "the daemon to see every handle released")
        s.stats()  # a render flushes the read statistics, the last release's included

    # the first pass: the daemon serves it
    t.eq(read_all(a), want[0], "first read of %s" % names[0])
    t.eq(read_bytes(), len(want[0]), "bytes the daemon served for the first pass")
    t.eq(opens(), 0, "opens passed through before any file was served")
    settle()
    line = [ln for ln in t.run("status", s.mnt).stdout.splitlines() if ln.startswith("reads")]
    t.eq([ln.split("; ", 1)[-1] for ln in line],
         ["passthrough %s (0 opens passed through)" % ("on" if on else "off")],
         "`rollcache status`, line 'reads'")

    # the second pass: passed through (on) or served by the daemon again (off)
    if not on:
        drop_cache(a)  # else the kernel's FUSE page cache serves it (keep_cache)
    t.eq(read_all(a), want[0], "second read of %s" % names[0])
    if on:
        t.eq(opens(), 1, "opens passed through after the second read")
        t.eq(read_bytes(), len(want[0]), "bytes the daemon served (passthrough: none more)")
        with open(a, "rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as m:
            t.eq(bytes(m), want[0], "mmap of a passed-through file")
        t.eq(opens(), 2, "opens passed through after the mmap")
    else:
        t.eq(read_bytes(), 2 * len(want[0]), "bytes the daemon served (no passthrough)")
        t.eq(opens(), 0, "opens passed through with -o no_passthrough")
    # the catalog still counts every pass as a read to the end (3 in both modes:
    # on: daemon, passthrough, mmap; off: daemon, the drop's open, daemon)
    settle()
    t.eq(shard_row(s, ids[0]), (3, 3), "catalog reads, full_reads of %s" % names[0])

    # one io mode per inode: while a daemon-served handle of B is open, new
    # handles of B are daemon-served too, even once B was served to the end
    before = opens()
    with open(b, "rb") as h1:
        t.eq(h1.read(), want[1], "first handle of %s" % names[1])
        with open(b, "rb") as h2:
            t.eq(h2.read(), want[1], "second handle of %s while the first is open" % names[1])
        t.eq(opens(), before, "opens passed through while a daemon handle is open")
    settle()
    t.eq(read_all(b), want[1], "%s after both handles closed" % names[1])
    t.eq(opens(), before + (1 if on else 0), "opens passed through once B is closed")
    settle()

    if not on:
        s.umount()
        return

    # a passed-through handle across two boundaries pins its file; evicted after close
    backing = os.path.join(s.cache, "shards", "%d.tfrecord" % ids[0])
    f = open(a, "rb", buffering=0)
    try:
        t.eq(opens(), before + 2, "the held handle is passed through")
        half = len(want[0]) // 2
        got = f.read(half)
        t.run("epoch", s.mnt, "next")
        t.eq(s.catalog("SELECT state FROM shards WHERE id = ?", ids[0]), [(0,)],
             "catalog state of the open file after E+1 (0 = SEALED: pinned)")
        t.run("epoch", s.mnt, "next")
        t.eq(s.stats()["epoch"], e + 2, "epoch after two next")
        got += f.read()
        t.eq(got, want[0], "bytes of the pinned passed-through file")
        t.eq(os.pread(f.fileno(), 100, 10), want[0][10:110], "pread after E+2")
        for i in ids[1:]:
            o = os.path.join(s.cache, "shards", "%d.tfrecord" % i)
            t.wait_for(lambda: not os.path.exists(o), "deletion of %s (evicted, not open)" % o)
        t.eq(os.path.exists(backing), True, "backing file of the open pinned file")
        held = used_bytes(s.cache)
    finally:
        f.close()
    t.wait_for(lambda: s.stats()["view"]["open_handles"] == 0, "the handle's release")
    t.run("epoch", s.mnt, "next")
    t.wait_for(lambda: not os.path.exists(backing), "the file's deletion after close + next")
    t.wait_for(lambda: s.catalog("SELECT state FROM shards WHERE id = ?", ids[0]) == [],
               "catalog GONE (the row deleted) after close")
    if tmpfs:
        # the catalog's WAL may grow by a few pages meanwhile: 64 KiB of slack
        t.wait_for(lambda: used_bytes(s.cache) <= held - len(want[0]) + 65536,
                   "the disk space of the closed passed-through file to be freed "
                   "(%d bytes used while held)" % held)
    t.eq(s.stats()["view"]["passthrough_refused"], 0, "backing files the kernel refused")
    s.umount()
    if tmpfs:
        subprocess.run(["umount", s.cache], check=True)


# Runs inside `unshare -Urm`: mounts, reads A twice, prints stats, unmounts.
USERNS_SCRIPT = r'''
import json, os, subprocess, sys, time
rc, src, mnt, cache, cfg, a = sys.argv[1:7]
p = subprocess.run([rc, "mount", src, mnt, "--cache-dir", cache, "--config", cfg],
                   capture_output=True, text=True)
if p.returncode:
    sys.exit("mount in the user namespace: " + p.stderr)
def st():
    with open(os.path.join(mnt, ".rollcache", "stats")) as f:
        return json.load(f)
def settle():
    for _ in range(200):
        if st()["view"]["open_handles"] == 0:
            return
        time.sleep(0.05)
try:
    out = []
    with open(os.path.join(mnt, a), "rb") as f:
        out.append(f.read().hex())
    settle()
    fd = os.open(os.path.join(mnt, a), os.O_RDONLY)  # the refused passthrough open
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
    settle()
    with open(os.path.join(mnt, a), "rb") as f:
        out.append(f.read().hex())
    print(json.dumps({"reads": out, "stats": st()}))
finally:
    subprocess.run([rc, "umount", mnt])
'''


def body_userns(s):
    ns = ["unshare", "-Urm", "--propagation", "private"]
    if shutil.which("unshare") is None:
        t.missing("unshare is not installed", "apt-get install util-linux")
    if subprocess.run(ns + ["true"]).returncode != 0:
        t.skip("user namespaces are not available here (unshare -Urm failed)")
    s.synth(records=24, size="64K", shards=3)
    cfg = s.config("[cache]\nlimit = 8M\n[source]\nallow_empty = true\n"
                   "[sampler]\nshard_size = 512K\n")
    t.run("ingest", "file://%s/" % s.src, "--cache-dir", s.cache, "--config", cfg)
    names = sorted(os.listdir(os.path.join(s.cache, "shards")))
    want = read_all(os.path.join(s.cache, "shards", names[0]))
    p = subprocess.run(ns + ["/usr/bin/python3", "-c", USERNS_SCRIPT, t.RC,
                             "file://%s/" % s.empty, s.mnt, s.cache, cfg,
                             os.path.join("current", "shard-" + names[0])],
                       capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        t.fail("mount and reads in a user namespace: exit %d: %s"
               % (p.returncode, p.stderr))
    r = json.loads(p.stdout)
    s.pids.append(r["stats"]["pid"])  # no pid namespace: the same pid out here
    for i, h in enumerate(r["reads"]):
        t.eq(bytes.fromhex(h), want, "read %d in the user namespace" % (i + 1))
    v = r["stats"]["view"]
    if os.geteuid() == 0 and kernel_cannot() is None:
        t.eq(v["passthrough_refused"], 1, "backing files refused (EPERM), then no more tries")
    t.eq(v["passthrough"], False, "passthrough after the refusal")
    t.eq(v["passthrough_opens"], 0, "opens passed through")
    t.eq(r["stats"]["current"]["read_bytes"], 2 * len(want), "bytes the daemon served")


t.main(body_userns if sys.argv[1] == "userns" else body, "passthrough")
