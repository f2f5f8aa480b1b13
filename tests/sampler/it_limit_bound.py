#!/usr/bin/python3
"""sampler-limit-bound-file: DESIGN invariant 4 under a real ingest from a
file:// source ten times larger than the cache limit.

Proves: the bytes in the cache directory's shards/, objects/ and tmp/,
sampled continuously while ingest runs, never exceed `limit`; ingest stops
when the budget is spent (stats say full) rather than overshooting; what was
admitted is whole, CRC-valid records of the source; the cache fills to
within one shard of the limit.
"""
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rcsamp  # noqa: E402

LIMIT = 3 << 20
SHARD = 256 << 10


def usage(cache):
    total = 0
    for sub in ("shards", "objects", "tmp"):
        d = os.path.join(cache, sub)
        try:
            with os.scandir(d) as it:
                for e in it:
                    try:
                        total += e.stat(follow_symlinks=False).st_size
                    except FileNotFoundError:
                        pass
        except FileNotFoundError:
            pass
    return total


def main():
    rcsamp.rc_bin()
    work = rcsamp.tmpdir("limit")
    try:
        src = os.path.join(work, "src")
        os.makedirs(src)
        # 30 MiB of 8 KiB records: the CRC is computed once per distinct payload
        payloads = [bytes([i]) * 8000 + b"#%d" % i for i in range(16)]
        framed = [rcsamp.frame(p) for p in payloads]
        for o in range(30):
            with open(os.path.join(src, "obj-%02d.tfrecord" % o), "wb") as f:
                for j in range(128):
                    f.write(framed[(o + j) % len(framed)])
        cache = os.path.join(work, "cache")
        stats = os.path.join(work, "st.json")
        p = subprocess.Popen([rcsamp.rc_bin(), "ingest", "file://" + src + "/", "--cache-dir", cache,
                              "--limit", str(LIMIT), "--shard-size", str(SHARD), "--connections", "4",
                              "--stats", stats, "--quiet"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        peak, samples = 0, 0
        deadline = time.monotonic() + 90
        while p.poll() is None and time.monotonic() < deadline:
            u = usage(cache)
            samples += 1
            peak = max(peak, u)
            if u > LIMIT:
                p.kill()
                rcsamp.fail("cache holds %d bytes > limit %d (sample %d)" % (u, LIMIT, samples))
        out, err = p.communicate(timeout=30)
        if p.returncode != 0:
            rcsamp.fail("ingest exited %d: %s" % (p.returncode, err))
        final = usage(cache)
        peak = max(peak, final)
        import json
        with open(stats) as f:
            st = json.load(f)
        if not st["full"]:
            rcsamp.fail("ingest did not report a full cache: %r" % st)
        if final > LIMIT or st["bytes_admitted"] > LIMIT:
            rcsamp.fail("final usage %d / admitted %d > limit %d" % (final, st["bytes_admitted"], LIMIT))
        if final < LIMIT - SHARD:
            rcsamp.fail("cache filled only %d of %d bytes" % (final, LIMIT))
        got = rcsamp.cache_payloads(cache)  # raises on any bad framing or CRC
        if not set(got) <= set(payloads):
            rcsamp.fail("admitted a record that is not in the source")
        print("ok: %d samples of disk usage, peak %d <= limit %d; %d records admitted" % (
            samples, peak, LIMIT, sum(got.values())))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
