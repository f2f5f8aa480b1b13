#!/usr/bin/python3
"""cli-status-report-wait-fuse: status, report and `epoch next --wait` on a
real FUSE mount of a small synth dataset.

Proves:
  - the stats' disk.catalog is the size of the catalog's files, and
    `rollcache status` shows it;
  - no line of `rollcache status` or `rollcache report` (of the mount and of
    its cache directory) is longer than 80 columns; --wide keeps the long
    report table;
  - `epoch next --wait` prints progress lines (stderr is not a terminal
    here: one line each) that say what is awaited - min_records or the
    epoch's admit - in at most 80 columns;
  - the ingest rate of the stats moves while `next --wait` waits: the
    samplers were blocked on the old epoch's admit (rate 0), the wait
    admits the new epoch's, and when bytes were admitted during a wait of a
    second or more some sample of the rate is above 0, and so is some
    progress line's (it was computed only on the epoch thread's tick, which
    does not run during the wait).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clitest import RC, skip, check, eq, run, is_mounted, finish, fits, wait_for  # noqa: E402


def stats(mp):
    with open(os.path.join(mp, ".rollcache", "stats")) as f:
        return json.load(f)


def main():
    if not os.path.exists("/dev/fuse"):
        skip("/dev/fuse is missing")
    root = tempfile.mkdtemp(prefix="rc-columns-")
    mp = os.path.join(root, "mnt")
    os.makedirs(mp)
    cache = os.path.join(root, "cache")
    try:
        remote = os.path.join(root, "remote")
        p = run("synth", remote, "--records", 8000, "--record-size", "16K", "--shards", 16)
        eq(p.returncode, 0, "synth (%s)" % p.stderr)
        # 24 MiB admitted an epoch, one connection: seconds of admission.  Two
        # epochs' admits (48 MiB) stay under the limit, so the wait below ends
        # on the admit alone; with admit = limit/2 (the default) the second
        # epoch's admit and the limit ran out together, and which one the
        # samplers waited on was a race.
        p = run("mount", "file://%s/" % remote, mp, "--limit", "64M", "--admit", "24M",
                "--shard-size", "1M",
                "--cache-dir", cache, "--min-records", 100000, "--connections", 1,
                "--retire", "boundary",  # the wait follows the boundary: it admits
                "--first-epoch", 0)
        eq(p.returncode, 0, "mount (%s)" % p.stderr)
        if p.returncode != 0:
            return
        # the samplers fill epoch 0's admit and block on it: the rate drops to 0
        wait_for(lambda: stats(mp)["admission"]["waiting_admit"] > 0, "blocked on the admit")
        wait_for(lambda: stats(mp)["sampler"]["ingest_bytes_per_s"] == 0, "rate 0 while blocked")

        p = run("status", mp)
        eq(p.returncode, 0, "status (%s)" % p.stderr)
        fits("status", p.stdout)
        # the catalog's bytes: its files' sizes, between two stat(2)s of them
        files = [os.path.join(cache, n) for n in ("catalog.db", "catalog.db-wal")]
        size = lambda: sum(os.path.getsize(f) for f in files if os.path.exists(f))  # noqa: E731
        lo, got, hi = size(), stats(mp)["disk"]["catalog"], size()
        check(min(lo, hi) <= got <= max(lo, hi) and got > 0,
              "disk.catalog %d, the files hold %d then %d bytes" % (got, lo, hi))
        check(any(l.startswith("catalog  ") and "beside the limit" in l
                  for l in p.stdout.splitlines()), "status's catalog line: %r" % p.stdout)

        # next --wait: min_records is out of reach, so it waits for the admit
        w = subprocess.Popen([RC, "epoch", mp, "next", "--wait"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        samples = []
        while w.poll() is None:
            try:
                st = stats(mp)
            except (OSError, ValueError):
                break
            samples.append((time.monotonic(), st["sampler"]["bytes_admitted"],
                            st["sampler"]["ingest_bytes_per_s"]))
            time.sleep(0.2)
        out, err = w.communicate(timeout=120)
        eq(w.returncode, 0, "epoch next --wait (%s)" % err)
        progress = [l for l in err.splitlines() if not l.startswith("rollcache epoch:")]
        fits("epoch next --wait progress", "\n".join(progress))
        for l in progress:
            check("min_records" in l, "progress line names min_records: %r" % l)
        check(any("admit" in l for l in progress) or not progress,
              "progress lines name the admit: %r" % progress[:3])
        # bytes were admitted during a wait of a second or more: the rate moved.
        # The daemon updates it at least every half second of the wait and
        # halves it at each update without bytes, so it stays above 0 after.
        if (len(samples) >= 2 and samples[-1][1] > samples[0][1]
                and samples[-1][0] - samples[0][0] >= 1.0):
            check(any(s[2] > 0 for s in samples),
                  "ingest rate stayed 0 while %d bytes were admitted over %.1f s"
                  % (samples[-1][1] - samples[0][1], samples[-1][0] - samples[0][0]))
            check(progress and any(not l.endswith(" 0.0 MB/s") for l in progress),
                  "every progress line says 0.0 MB/s: %r" % progress[-3:])
        else:
            check(False, "the wait admitted nothing, or lasted under 1 s: %r" % samples)

        # read the epoch, advance once more, then the report
        cur = os.path.join(mp, "current")
        for name in sorted(os.listdir(cur)):
            with open(os.path.join(cur, name), "rb") as f:
                while f.read(1 << 20):
                    pass
        p = run("epoch", mp, "next", "--wait", timeout=120)
        eq(p.returncode, 0, "second next --wait (%s)" % p.stderr)
        p = run("status", mp)
        fits("status after two epochs", p.stdout)
        for where in (mp, cache):
            p = run("report", where)
            eq(p.returncode, 0, "report %s (%s)" % (where, p.stderr))
            fits("report %s" % where, p.stdout)
            check("total:" in p.stdout and "seen/admitted" in p.stdout,
                  "report totals: %r" % p.stdout[-400:])
        p = run("report", mp, "--wide")
        check(any(len(l) > 80 for l in p.stdout.splitlines()),
              "report --wide: the long table")
    finally:
        if is_mounted(mp):
            run("umount", mp)
        shutil.rmtree(root, ignore_errors=True)
    finish()


main()
