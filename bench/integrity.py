#!/usr/bin/python3
"""bench/integrity.py - the figures of docs/reliability.md, "Integrity".

  /usr/bin/python3 bench/integrity.py [--rollcache build/cli/rollcache]
      [--size-mb 256] [--rates 50M,200M] [--seconds 6] [--dir /tmp]

Builds a cache of SIZE MB of TFRecord shards (synth + ingest), then prints:
  1. the scrubber's measured rate at each --rates value: the growth of
     .rollcache/stats integrity.scrub_bytes over --seconds on a mount with
     -o scrub_rate=R (the backing files are in the page cache, so the rate
     is the pacing, not the disk);
  2. `rollcache check --cache-dir` on the same cache: its own summary line
     (the offline check's speed, warm page cache);
  3. a first pass through a mount (scrub_rate=0, every record's CRC checked
     by the daemon before it serves it) vs a plain read of the backing
     files, both with the backing files in the page cache, best of 3
     fresh mounts.
Figures are printed, never asserted.  Needs /dev/fuse; run as any user.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


def run(rc, *args, env=None):
    p = subprocess.run([rc] + [str(a) for a in args], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit("rollcache %s: exit %d: %s" % (" ".join(map(str, args)), p.returncode,
                                                 p.stderr.strip()))
    return p.stdout


def stats(mnt):
    with open(os.path.join(mnt, ".rollcache", "stats")) as f:
        return json.load(f)


def read_dir(d):
    n = 0
    for name in sorted(os.listdir(d)):
        with open(os.path.join(d, name), "rb", buffering=0) as f:
            while True:
                b = f.read(1 << 20)
                if not b:
                    break
                n += len(b)
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rollcache", default="build/cli/rollcache")
    ap.add_argument("--size-mb", type=int, default=256)
    ap.add_argument("--rates", default="50M,200M")
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--dir", default=None)
    a = ap.parse_args()
    rc = os.path.abspath(a.rollcache)
    root = tempfile.mkdtemp(prefix="rc-bench-integrity-", dir=a.dir)
    src, cache, mnt, empty = (os.path.join(root, x) for x in ("src", "cache", "mnt", "empty"))
    for d in (mnt, empty):
        os.makedirs(d)
    try:
        records = a.size_mb * 16  # 64 KiB records
        run(rc, "synth", src, "--records", records, "--record-size", "64K", "--shards", 8)
        cfg = os.path.join(root, "rc.ini")
        with open(cfg, "w") as f:
            f.write("[cache]\nlimit = %dM\n[source]\nallow_empty = true\n"
                    "[sampler]\nshard_size = 32M\n"
                    "[epoch 0-]\nlimit = %dM\nadmit = %dM\n" % (a.size_mb * 2, a.size_mb * 2,
                                                                a.size_mb * 2))
        run(rc, "ingest", "file://%s/" % src, "--cache-dir", cache, "--config", cfg)
        shards = os.path.join(cache, "shards")
        total = read_dir(shards)  # warm the page cache
        print("cache: %d shards, %.1f MB (%s)" % (len(os.listdir(shards)), total / 1e6, root))

        print("1. scrubber rate (integrity.scrub_bytes over %.0f s):" % a.seconds)
        for r in a.rates.split(","):
            run(rc, "mount", "file://%s/" % empty, mnt, "--cache-dir", cache, "--config", cfg,
                "-o", "scrub_rate=" + r)
            try:
                time.sleep(1.0)
                s0, t0 = stats(mnt)["integrity"]["scrub_bytes"], time.monotonic()
                time.sleep(a.seconds)
                st = stats(mnt)["integrity"]
                s1, t1 = st["scrub_bytes"], time.monotonic()
                rate = (s1 - s0) / (t1 - t0)
                print("   scrub_rate=%-6s measured %.1f MB/s = %.1f MiB/s (passes %d, last pass "
                      "%d ms, errors.corrupt %d)" % (r, rate / 1e6, rate / 2**20, st["scrub_passes"],
                                                     st["scrub_last_pass_ms"],
                                                     stats(mnt)["errors"]["corrupt"]))
            finally:
                run(rc, "umount", mnt)

        print("2. rollcache check --cache-dir (warm page cache):")
        p = subprocess.run([rc, "check", "--cache-dir", cache], capture_output=True, text=True)
        print("   exit %d: %s" % (p.returncode, p.stdout.strip()))

        print("3. first pass through a mount (records checked) vs plain read, warm, best of 3:")
        best_m = best_d = None
        for _ in range(3):
            t0 = time.monotonic()
            n = read_dir(shards)
            dt = time.monotonic() - t0
            best_d = dt if best_d is None or dt < best_d else best_d
            run(rc, "mount", "file://%s/" % empty, mnt, "--cache-dir", cache, "--config", cfg,
                "-o", "scrub_rate=0,unverified_reads=true")
            try:
                cur = os.path.join(mnt, "current")
                t0 = time.monotonic()
                m = read_dir(cur)
                dt = time.monotonic() - t0
                st = stats(mnt)["integrity"]
                if st["verified_bytes"] < total or m != n:
                    sys.exit("first pass checked %d of %d bytes" % (st["verified_bytes"], total))
                best_m = dt if best_m is None or dt < best_m else best_m
            finally:
                run(rc, "umount", mnt)
        print("   plain read of the backing files: %.0f MB/s" % (total / best_d / 1e6))
        print("   first pass through the mount:    %.0f MB/s (%.2fx the plain read's time)"
              % (total / best_m / 1e6, best_m / best_d))
    finally:
        if os.path.ismount(mnt):
            subprocess.run(["fusermount3", "-u", mnt])
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
