#!/usr/bin/python3
"""bench/restart_dirty.py - the first record after kill -9, with and without other dirty pages.

Each iteration over a fresh cache: `rollcache mount URL MNT --limit 1G`
(the daemon's log at debug level into the cache's directory), the first
three views read whole with `epoch MNT next --wait` after each, then
SIGKILL of the daemon while its samplers fetch, a lazy unmount, optionally
DIRTY MiB written with dd into a file beside the cache (not synced: pages
the kernel still has to write back), and the same mount command again,
timed: the command's own time and the time until the first record of its
view can be read.  Printed before each remount: the catalog's WAL size
and the kernel's Dirty and Writeback (kB, /proc/meminfo).

Usage: /usr/bin/python3 bench/restart_dirty.py BUILD URL WORKDIR N [DIRTY_MIB]
URL serves a dataset larger than 1 GiB (e.g. `rollcache synth DIR --records
32760 --record-size 64K --shards 64` behind tests/servers/nginx.sh).
"""
import os
import shutil
import signal
import subprocess
import sys
import time


def first_record(view, t0):
    while True:
        try:
            for f in os.listdir(view):
                if f.endswith(".tfrecord"):
                    with open(os.path.join(view, f), "rb") as fh:
                        if len(fh.read(16)) == 16:
                            return time.monotonic() - t0
        except OSError:
            pass
        time.sleep(0.001)


def read_all(d):
    for f in sorted(os.listdir(d)):
        with open(os.path.join(d, f), "rb") as fh:
            while fh.read(1 << 20):
                pass


def main():
    if len(sys.argv) not in (5, 6):
        sys.exit(__doc__)
    build, url, work, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    dirty = int(sys.argv[5]) if len(sys.argv) == 6 else 0
    rc = os.path.join(build, "cli", "rollcache")
    env = dict(os.environ, ROLLCACHE_LOG="debug")
    for it in range(n):
        shutil.rmtree(work, ignore_errors=True)
        mnt, cache = os.path.join(work, "mnt"), os.path.join(work, "cache")
        os.makedirs(mnt)
        cmd = [rc, "mount", url, mnt, "--cache-dir", cache, "--limit", "1G", "--log-file",
               os.path.join(work, "log.txt")]
        subprocess.run(cmd, check=True, env=env)
        first_record(os.path.join(mnt, "current"), time.monotonic())
        for _ in range(3):
            read_all(os.path.join(mnt, "current"))
            subprocess.run([rc, "epoch", mnt, "next", "--wait"], capture_output=True)
        with open(os.path.join(cache, "lock")) as f:
            pid = int(f.read().split()[0])
        os.kill(pid, signal.SIGKILL)
        while True:
            try:
                os.kill(pid, 0)
                time.sleep(0.01)
            except ProcessLookupError:
                break
        subprocess.run(["fusermount3", "-u", "-z", mnt])
        if dirty:
            subprocess.run(["dd", "if=/dev/zero", "of=" + os.path.join(work, "dirty"), "bs=1M",
                            "count=%d" % dirty], capture_output=True)
        wal = os.path.join(cache, "catalog.db-wal")
        mem = {l.split(":")[0]: l.split()[1] for l in open("/proc/meminfo")}
        t0 = time.monotonic()
        subprocess.run(cmd, check=True, env=env)
        tm = time.monotonic() - t0
        f = first_record(os.path.join(mnt, "current"), t0)
        print("%s it %d: WAL %d B, Dirty %s kB, Writeback %s kB; mount command %.3f s, "
              "first record %.3f s" % (build, it, os.path.getsize(wal) if os.path.exists(wal)
                                       else -1, mem["Dirty"], mem["Writeback"], tm, f),
              flush=True)
        subprocess.run([rc, "umount", mnt], capture_output=True)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
