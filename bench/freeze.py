#!/usr/bin/python3
"""bench/freeze.py - kill -9 and clean restarts during ingest: does the cache
go on admitting fresh records, or freeze?

A cache that counted an object resident while any one of its records was
froze after restarts: every object partly resident, the cache at or below
limit - admit, nothing fetched or evicted again (errors 0, samplers idle).
This runs the set-up that found it: a dataset of 30 objects over nginx
(tests/servers/nginx.sh), `rollcache mount ... --limit 100M --shard-size 1M
--connections 16`, `epoch next` every 0.6 s, and after 2 s either SIGKILL
of the daemon (--kills) or `rollcache umount` (--cycles), then the same
mount command again.  A trial freezes when it admitted no record: the
dataset is 2.4 times the limit (by default; --limit and --object-size
keep it over twice the limit), so a rolling cache always has records to
admit, in the first pass or a later one (the line says when the first pass
is over); the last trial is followed by a check that a mount still admits.

Usage (from the source tree, after a build):
  /usr/bin/python3 bench/freeze.py [--build build] [--kills 100] [--cycles 30]
      [--object-size 8M] [--limit 100M] [--keep DIR]
The suite runs it small (tests/daemon/meson.build: 5 kills and 3 cycles,
objects of 1 MiB under --limit 12M).
Prints one line per trial and a summary; exits 1 when a trial froze.
"""
import argparse
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from sampling import NGINX, Rc, size  # noqa: E402


def catalog(cache, sql):
    db = os.path.join(cache, "catalog.db")
    if not os.path.exists(db):
        return []
    c = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=10)
    try:
        return c.execute(sql).fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        c.close()


def admitted(cache):
    rows = catalog(cache, "SELECT COALESCE(SUM(admitted_records), 0) FROM epochs")
    return rows[0][0] if rows else 0


def first_pass(cache):
    rows = catalog(cache, "SELECT MAX(pass) FROM plans")
    return not rows or rows[0][0] in (None, 0)


def trial(rc, url, mnt, cache, kill, limit):
    before = admitted(cache)
    rc("mount", url, mnt, "--limit", limit, "--shard-size", "1M", "--connections", 16,
       "--cache-dir", cache)
    t0 = time.monotonic()
    while time.monotonic() - t0 < 2.0:
        time.sleep(0.6)
        rc("epoch", mnt, "next", check=False)
    if kill:
        with open(os.path.join(mnt, ".rollcache", "stats")) as f:
            pid = json.load(f)["pid"]
        os.kill(pid, signal.SIGKILL)
        for _ in range(200):
            try:
                os.kill(pid, 0)
                time.sleep(0.02)
            except ProcessLookupError:
                break
        subprocess.run(["fusermount3", "-u", "-z", mnt], capture_output=True)
    else:
        rc("umount", mnt)
    return admitted(cache) - before


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(os.path.dirname(HERE), "build"))
    ap.add_argument("--kills", type=int, default=100)
    ap.add_argument("--cycles", type=int, default=30)
    ap.add_argument("--object-size", type=size, default=8 << 20)
    ap.add_argument("--limit", default="100M",
                    help="the cache's limit (keep the dataset, 30 objects, over twice it)")
    ap.add_argument("--keep")
    a = ap.parse_args()
    rc = Rc(a.build)
    root = a.keep or tempfile.mkdtemp(prefix="rc-bench-freeze-")
    os.makedirs(root, exist_ok=True)
    data, state = os.path.join(root, "data"), os.path.join(root, "nginx")
    rec = 64 << 10
    rc("synth", data, "--records", 30 * a.object_size // rec, "--record-size", rec,
       "--shards", 30, "--seed", 3)
    url = subprocess.run([NGINX, "start", data, state], capture_output=True, text=True,
                         check=True).stdout.strip().splitlines()[-1]
    cache, mnt = os.path.join(root, "cache"), os.path.join(root, "mnt")
    os.makedirs(mnt, exist_ok=True)
    frozen = []
    try:
        plan = [True] * a.kills + [False] * a.cycles
        for i, kill in enumerate(plan):
            got = trial(rc, url, mnt, cache, kill, a.limit)
            covered = not first_pass(cache)
            bad = got == 0  # a rolling cache of a dataset over twice its limit always admits
            if bad:
                frozen.append(i)
            print("trial %3d %-6s admitted %5d records%s%s" % (
                i, "kill" if kill else "umount", got, " (dataset covered)" if covered else "",
                "  FROZE" if bad else ""), flush=True)
        rc("mount", url, mnt, "--limit", a.limit, "--shard-size", "1M", "--connections", 16,
           "--cache-dir", cache)
        before = admitted(cache)
        rc("epoch", mnt, "next", "--wait", timeout=300)
        rc("epoch", mnt, "next", "--wait", timeout=300)
        after = admitted(cache)
        rc("umount", mnt)
        print("after the trials: two `epoch next --wait` admitted %d records" % (after - before))
        if after == before:
            frozen.append("final")
    finally:
        subprocess.run(["fusermount3", "-u", "-z", mnt], capture_output=True)
        subprocess.run([NGINX, "stop", state], capture_output=True)
        if not a.keep:
            shutil.rmtree(root, ignore_errors=True)
    print("%d kill -9 trials, %d clean cycles: %d froze %s" % (a.kills, a.cycles, len(frozen),
                                                               frozen if frozen else ""))
    sys.exit(1 if frozen else 0)


if __name__ == "__main__":
    main()
