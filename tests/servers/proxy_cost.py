#!/usr/bin/python3
"""proxy_cost.py - what checking every signature costs: `rollcache ingest`
of the same objects from one s3rver, through sigv4_proxy.py and straight.

  RC_BIN=build/cli/rollcache tests/servers/proxy_cost.py [--objects N]
      [--size BYTES] [--runs R] [--connections C]

Starts one s3rver behind the proxy (tests/servers/s3rver.sh), uploads N
random raw objects, then alternates R ingests through the proxy and R
straight to s3rver (its own URL), each into a fresh cache, and prints the
median and min wall time of each, and the requests the proxy verified per
ingest.  A figure, not a test: nothing is asserted.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--objects", type=int, default=200)
    ap.add_argument("--size", type=int, default=256 * 1024)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--connections", type=int, default=8)
    a = ap.parse_args()
    rc = os.environ.get("RC_BIN", os.path.join(HERE, "..", "..", "build", "cli", "rollcache"))
    work = tempfile.mkdtemp(prefix="proxy-cost-")
    state = os.path.join(work, "s3")
    try:
        data = os.path.join(work, "data")
        os.makedirs(data)
        for i in range(a.objects):
            with open(os.path.join(data, "o%05d.bin" % i), "wb") as f:
                f.write(os.urandom(a.size))
        p = subprocess.run([os.path.join(HERE, "s3rver.sh"), "start", "bucket", state],
                           capture_output=True, text=True, check=True)
        proxy = p.stdout.split()[-1]
        with open(os.path.join(state, "s3rver_url")) as f:
            bare = f.read().split()[-1]
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        subprocess.run([os.path.join(HERE, "s3put.py"), proxy, "bucket", data, "ds/"],
                       check=True, capture_output=True, env=env)
        env.update(AWS_ACCESS_KEY_ID="S3RVER", AWS_SECRET_ACCESS_KEY="S3RVER",
                   AWS_SHARED_CREDENTIALS_FILE=os.path.join(work, "none"),
                   AWS_CONFIG_FILE=os.path.join(work, "none"))

        def verified():
            with urllib.request.urlopen(proxy + "/__sigv4_proxy/stats", timeout=10) as r:
                return json.load(r)["verified"]

        times = {"proxy": [], "straight": []}
        reqs = []
        for run in range(a.runs):
            for name, url in (("proxy", proxy), ("straight", bare)):
                cache = os.path.join(work, "c-%s-%d" % (name, run))
                v0 = verified()
                t0 = time.monotonic()
                subprocess.run([rc, "ingest", "s3://bucket/ds/", "--endpoint", url,
                                "--cache-dir", cache, "--limit", "4G", "--format", "raw",
                                "--connections", str(a.connections), "--quiet"],
                               check=True, capture_output=True, env=env)
                times[name].append(time.monotonic() - t0)
                if name == "proxy":
                    reqs.append(verified() - v0)
                shutil.rmtree(cache)
        mb = a.objects * a.size / 1e6
        print("%d objects x %d bytes (%.1f MB), %d connections, %d runs each" % (
            a.objects, a.size, mb, a.connections, a.runs))
        print("%-9s %9s %9s %9s" % ("path", "median s", "min s", "MB/s"))
        for name in ("straight", "proxy"):
            med = statistics.median(times[name])
            print("%-9s %9.3f %9.3f %9.1f" % (name, med, min(times[name]), mb / med))
        print("requests verified by the proxy per ingest: %s" % sorted(set(reqs)))
    finally:
        subprocess.run([os.path.join(HERE, "s3rver.sh"), "stop", state], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
