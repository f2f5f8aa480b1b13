#!/usr/bin/python3
"""bench/listing_parse.py - what reading a JSON autoindex of N keys costs a node.

The synthetic store (bench/scale_store.py --listing autoindex, --objects N
raw keys in folders of 10^5) serves nginx's JSON autoindex.  Then, in
alternated rounds:

  store    every page fetched with curl, one after another (what the store
           itself takes to make and send them)
  ingest   `rollcache ingest URL --cache-dir DIR --limit 1M --format raw
           --world-size 64 --rank 0 --quiet` under /usr/bin/time: its wall
           time and its CPU (user + sys).  A 1M cache fills at once, so
           nearly all of it is the listing: transfer, decoding, the share
           kept (1/64 of the keys), the catalog's merge.  With --base
           BUILD, the same with that build (the "before" of a change).

Prints each round and the medians.  Nothing is asserted; times depend on
the machine and its load (printed).

Usage (from the source tree, after a build):
  /usr/bin/python3 bench/listing_parse.py [--build build] [--base OTHER_BUILD]
      [--objects 10000000] [--rounds 2] [--work DIR]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from scale import Store, loadavg  # noqa: E402


def store_pages(url):
    """Seconds to fetch every page of the autoindex with curl, in turn."""
    t0 = time.monotonic()
    with urllib.request.urlopen(url, timeout=600) as r:
        root = r.read().decode()
    dirs = [line.split('"')[3] for line in root.splitlines() if '"directory"' in line]
    for d in dirs:
        subprocess.run(["curl", "-s", "-o", "/dev/null", url + d + "/"], check=True)
    return time.monotonic() - t0, len(dirs)


def ingest(build, url, work):
    """(wall s, CPU s) of one ingest as rank 0 of 64 into a new 1M cache."""
    cache = tempfile.mkdtemp(prefix="rc-lp-", dir=work)
    out = os.path.join(work, "time.out")
    try:
        subprocess.run(["/usr/bin/time", "-f", "%e %U %S", "-o", out,
                        os.path.join(build, "cli", "rollcache"), "ingest", url, "--cache-dir",
                        os.path.join(cache, "c"), "--limit", "1M", "--format", "raw",
                        "--world-size", "64", "--rank", "0", "--quiet"],
                       check=True, capture_output=True)
        with open(out) as f:
            e, u, s = (float(x) for x in f.read().split()[-3:])
        return e, u + s
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    p.add_argument("--base", default=None, help="another build to time in the same rounds")
    p.add_argument("--objects", type=int, default=10000000)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--work", default=None)
    a = p.parse_args()
    builds = [("this", os.path.abspath(a.build))]
    if a.base:
        builds.append(("base", os.path.abspath(a.base)))
    work = tempfile.mkdtemp(prefix="rc-listing-parse-", dir=a.work)
    store = Store(["--objects", a.objects, "--format", "raw", "--listing", "autoindex"])
    print("rollcache listing parse: %d keys (%s), %d CPUs, load %s, %s" % (
        a.objects, store.listing, os.cpu_count(), loadavg(),
        time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())), flush=True)
    got = {name: [] for name, _ in builds}
    pages = []
    try:
        for r in range(a.rounds):
            order = builds if r % 2 == 0 else builds[::-1]
            s, n = store_pages(store.url)
            pages.append(s)
            print("round %d (load %s): the store's %d pages by curl %.1f s" % (
                r + 1, loadavg(), n, s), flush=True)
            for name, build in order:
                e, cpu = ingest(build, store.url, work)
                got[name].append((e, cpu))
                print("  %s: ingest %.1f s wall, %.1f s CPU" % (name, e, cpu), flush=True)
    finally:
        store.stop()
        shutil.rmtree(work, ignore_errors=True)
    print("medians: the store's pages %.1f s" % statistics.median(pages))
    for name, _ in builds:
        e = statistics.median(x[0] for x in got[name])
        cpu = statistics.median(x[1] for x in got[name])
        print("  %s: ingest %.1f s wall, %.1f s CPU (%.2f us of CPU a key)" % (
            name, e, cpu, cpu / a.objects * 1e6))
    if a.base:
        this = statistics.median(x[1] for x in got["this"])
        base = statistics.median(x[1] for x in got["base"])
        print("  CPU: base / this = %.1fx" % (base / this))
    return 0


if __name__ == "__main__":
    sys.exit(main())
