#!/usr/bin/python3
"""bench/integrity_ab.py - first-pass read through a mount, A/B by environment.

  /usr/bin/python3 bench/integrity_ab.py [--rollcache build/cli/rollcache]
      [--size-mb 256] [--runs 8] [--b-env RC_NOVERIFY_TMP=1]

Builds a cache of SIZE MB (synth + ingest), warms the backing files' page
cache, then mounts it fresh RUNS times for each of A (the environment as
is) and B (plus --b-env, passed to `rollcache mount`, so the daemon sees
it), alternating, reads every file of current/ once (the first pass, served
by the daemon with scrub_rate=0), and prints each run's MB/s and the
medians.  Used by docs/reliability.md, "Integrity" to measure the first-pass
check's cost with a local build whose fs_read.c skips cfs_verify_read() when
RC_NOVERIFY_TMP is set (the edit is described there; it is not committed):
without that edit A and B run the same code.  Figures are printed, never
asserted.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from integrity import read_dir, run  # noqa: E402  (the bench it is the A/B of)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rollcache", default="build/cli/rollcache")
    ap.add_argument("--size-mb", type=int, default=256)
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--b-env", default="RC_NOVERIFY_TMP=1")
    a = ap.parse_args()
    rc = os.path.abspath(a.rollcache)
    key, _, val = a.b_env.partition("=")
    root = tempfile.mkdtemp(prefix="rc-bench-integrity-ab-")
    src, cache, mnt, empty = (os.path.join(root, x) for x in ("src", "cache", "mnt", "empty"))
    for d in (mnt, empty):
        os.makedirs(d)
    try:
        run(rc, "synth", src, "--records", a.size_mb * 16, "--record-size", "64K", "--shards", 8)
        cfg = os.path.join(root, "rc.ini")
        with open(cfg, "w") as f:
            f.write("[cache]\nlimit = %dM\n[source]\nallow_empty = true\n"
                    "[sampler]\nshard_size = 32M\n"
                    "[epoch 0-]\nlimit = %dM\nadmit = %dM\n" % ((a.size_mb * 2,) * 3))
        run(rc, "ingest", "file://%s/" % src, "--cache-dir", cache, "--config", cfg)
        read_dir(os.path.join(cache, "shards"))
        res = {"A": [], "B (%s)" % a.b_env: []}
        for _ in range(a.runs):
            for name in res:
                env = dict(os.environ)
                if name != "A":
                    env[key] = val
                run(rc, "mount", "file://%s/" % empty, mnt, "--cache-dir", cache, "--config", cfg,
                    "-o", "scrub_rate=0,unverified_reads=true", env=env)
                try:
                    t0 = time.monotonic()
                    n = read_dir(os.path.join(mnt, "current"))
                    res[name].append(n / (time.monotonic() - t0) / 1e6)
                finally:
                    run(rc, "umount", mnt)
        for name, v in res.items():
            print("%-24s %s MB/s; median %.0f" % (name, " ".join("%.0f" % x for x in v),
                                                  sorted(v)[len(v) // 2]))
    finally:
        if os.path.ismount(mnt):
            subprocess.run(["fusermount3", "-u", mnt])
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
