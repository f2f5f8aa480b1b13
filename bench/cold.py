#!/usr/bin/python3
"""bench/cold.py - cold fill: a mount's first download against curl --parallel.

Serves one `rollcache synth` dataset from nginx (tests/servers/nginx.sh,
access log on) and, RUNS times alternating, in one process:

  curl   curl --parallel --parallel-max N of every object of the dataset,
         to /dev/null and (--curl-files) to files in a directory on the
         file system of the cache, then also with an fsync of each file
         (durable, as the cache's sealed shards are); wall time
  mount  for each build of --builds: `rollcache mount URL MNT --cache-dir
         DIR --limit L --admit A --connections N` over an empty cache, the
         time from the start of the mount command until the sealed bytes
         (`.rollcache/stats` disk.sealed, polled every 10 ms) reach 90% of
         A (A = L unless --admit says otherwise: epoch 0 admits no more);
         then unmounted and the cache removed

L is the dataset's size unless --limit says otherwise, so the mount
downloads about the bytes curl does.  Printed per run: MB/s of each
(curl: dataset bytes / wall time; mount: 0.9 A / time to 90%), the MB the
mount had fetched 1 s and sealed 2 s after its start, its requests and mean request size
(sampler.requests, sampler.bytes_fetched at 90%), the body bytes nginx sent
to it by then, the daemon's minor page faults by then (/proc/PID/stat); then the medians and the ratios mount / curl of the medians.
The load average is printed at the start and at the end.

Usage (after a build):
  /usr/bin/python3 bench/cold.py [--builds build[,build2...]] [--size 512M]
      [--record-size 64K] [--files 32] [--connections 8] [--runs 3]
      [--limit SIZE] [--admit SIZE] [--curl-files] [--request-rate N] [--work DIR]
Several builds (the tree before and after a change) alternate in the same
run, so they meet the same load.  --request-rate N makes nginx serve each
connection at most N requests a second (limit_req keyed by $connection;
later requests wait, none is refused): a stand-in for a store where every
request costs a round trip (this machine has no netem to delay loopback).
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
SERVERS = os.path.join(SRC, "tests", "servers")
UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
FULL = 0.9  # the fill the mount is timed to


def size(s):
    m = re.fullmatch(r"(\d+)([KMG]?)", s.strip())
    if not m:
        raise argparse.ArgumentTypeError("%s: expected a size such as 256M" % s)
    return int(m.group(1)) * UNITS.get(m.group(2), 1)


def sh(*args, **kw):
    return subprocess.run([str(a) for a in args], check=True, capture_output=True, text=True, **kw)


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


class Nginx:
    def __init__(self, root, state, rate=0):
        self.state = state
        env = dict(os.environ, NGINX_ACCESS_LOG="1")
        self.url = sh(os.path.join(SERVERS, "nginx.sh"), "start", root, state,
                      env=env).stdout.split()[-1]
        if rate:
            self.limit_rate(rate)

    def limit_rate(self, rate):
        """At most `rate` requests a second on each connection (limit_req keyed
        by $connection; later ones wait, none is refused): a stand-in for a
        store where every request costs a round trip.  Restarts nginx on the
        same port with that configuration."""
        conf = os.path.join(self.state, "nginx.conf")
        with open(conf) as f:
            text = f.read()
        loc = "location / { autoindex on; autoindex_format json; }"
        if "http {" not in text or loc not in text:
            sys.exit("cold.py: tests/servers/nginx.sh's configuration changed: "
                     "cannot add limit_req")
        text = text.replace("http {", "http {\n  limit_req_zone $connection zone=rc:1m "
                            "rate=%dr/s;" % rate, 1)
        text = text.replace(loc, "location / { autoindex on; autoindex_format json; "
                            "limit_req zone=rc burst=1000000; }")
        self.stop()
        with open(conf, "w") as f:
            f.write(text)
        pid = os.path.join(self.state, "nginx.pid")
        if os.path.exists(pid):
            os.unlink(pid)
        sh("/usr/sbin/nginx", "-p", self.state, "-e", os.path.join(self.state, "error.log"),
           "-c", conf)
        deadline = time.monotonic() + 10
        while not (os.path.exists(pid) and os.path.getsize(pid)):
            if time.monotonic() > deadline:
                sys.exit("cold.py: nginx did not start again with limit_req")
            time.sleep(0.05)

    def body_sent(self):
        """Body bytes nginx sent so far ($body_bytes_sent, access log)."""
        total = 0
        try:
            with open(os.path.join(self.state, "access.log")) as f:
                for line in f:
                    parts = line.split()
                    if len(parts) >= 2 and parts[1].isdigit():
                        total += int(parts[1])
        except FileNotFoundError:
            pass
        return total

    def stop(self):
        subprocess.run([os.path.join(SERVERS, "nginx.sh"), "stop", self.state])


def unmount(rc, mnt):
    subprocess.run([rc, "umount", mnt], capture_output=True)
    for _ in range(50):
        if not os.path.ismount(mnt):
            return
        if subprocess.run(["fusermount3", "-u", "-q", mnt]).returncode == 0:
            return
        time.sleep(0.1)
    subprocess.run(["fusermount3", "-u", "-z", "-q", mnt])


def run_curl(a, nginx, names, work, to_files):
    """Wall seconds of curl --parallel fetching every object."""
    out = tempfile.mkdtemp(prefix="cold-curl-", dir=work)
    cfg = os.path.join(out, "curl.cfg")
    with open(cfg, "w") as f:
        for i, n in enumerate(names):
            f.write('url = "%s%s"\n' % (nginx.url, n))
            f.write('output = "%s"\n' % (os.path.join(out, "o%d" % i) if to_files else "/dev/null"))
    t0 = time.monotonic()
    sh("curl", "--silent", "--show-error", "--fail", "--parallel", "--parallel-max",
       a.connections, "--config", cfg)
    dt = time.monotonic() - t0
    dts = None
    if to_files:  # and durable, as a sealed shard is: fsync of each file
        for i in range(len(names)):
            fd = os.open(os.path.join(out, "o%d" % i), os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)
        dts = time.monotonic() - t0
    shutil.rmtree(out, ignore_errors=True)
    return dt, dts


def stats(mnt):
    with open(os.path.join(mnt, ".rollcache", "stats")) as f:
        return json.load(f)


def minor_faults(cache):
    """Minor page faults of the daemon that holds CACHE/lock (its pid), all threads so far."""
    with open(os.path.join(cache, "lock")) as f:
        pid = f.read().split()[0]
    with open("/proc/%s/stat" % pid) as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])  # field 10, minflt


def run_mount(a, build, nginx, work, limit):
    """Seconds from `rollcache mount` to 90% of the limit sealed, and what came with it."""
    rc = os.path.join(os.path.abspath(build), "cli", "rollcache")
    d = tempfile.mkdtemp(prefix="cold-mount-", dir=work)
    mnt, cache = os.path.join(d, "mnt"), os.path.join(d, "cache")
    os.makedirs(mnt)
    sent0 = nginx.body_sent()
    admit = a.admit or limit
    want = int(FULL * min(admit, limit))
    row = {}
    try:
        t0 = time.monotonic()
        sh(rc, "mount", nginx.url, mnt, "--cache-dir", cache, "--limit", str(limit), "--admit",
           str(admit), "--connections", a.connections)
        at1 = at2 = None
        deadline = t0 + a.timeout
        while True:
            st = stats(mnt)
            now = time.monotonic()
            sealed, sm = st["disk"]["sealed"], st["sampler"]
            if at1 is None and now - t0 >= 1.0:
                at1 = st["sampler"]["bytes_fetched"]
            if at2 is None and now - t0 >= 2.0:
                at2 = sealed
            if sealed >= want:
                break
            if now > deadline:
                raise RuntimeError("%s: %.0f s and only %d of %d bytes sealed" %
                                   (build, a.timeout, sealed, want))
            time.sleep(0.01)
        dt = now - t0
        row = {
            "s": dt, "mbps": want / dt / 1e6,
            "at1": (at1 if at1 is not None else sm["bytes_fetched"]) / 1e6,
            "at2": (at2 if at2 is not None else sealed) / 1e6,
            "requests": sm["requests"], "fetched": sm["bytes_fetched"],
            "admitted": sm["bytes_admitted"], "peak": st["disk"]["peak"],
            "minflt": minor_faults(cache),
        }
    finally:
        unmount(rc, mnt)
        row["sent"] = nginx.body_sent() - sent0
        shutil.rmtree(d, ignore_errors=True)
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--builds", default="build", help="comma-separated build directories")
    p.add_argument("--size", type=size, default=size("512M"), help="dataset bytes")
    p.add_argument("--record-size", default="64K")
    p.add_argument("--files", type=int, default=32)
    p.add_argument("--connections", default="8")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--limit", type=size, default=None, help="cache limit (default: dataset)")
    p.add_argument("--admit", type=size, default=None,
                   help="the epoch's admit (default: the limit); the fill timed is 90%% of it")
    p.add_argument("--curl-files", action="store_true",
                   help="also time curl writing files next to the cache")
    p.add_argument("--request-rate", type=int, default=0,
                   help="nginx serves each connection at most this many requests a second")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds one fill may take")
    p.add_argument("--work", default=None, help="work directory (default: a new one in /var/tmp)")
    a = p.parse_args()
    builds = [b for b in a.builds.split(",") if b]
    for b in builds:
        if not os.access(os.path.join(b, "cli", "rollcache"), os.X_OK):
            sys.exit("cold.py: %s/cli/rollcache: not built (meson compile -C %s)" % (b, b))
    if not os.path.exists("/dev/fuse"):
        sys.exit("cold.py: no /dev/fuse: cannot mount")
    work = a.work or tempfile.mkdtemp(prefix="rc-cold-", dir="/var/tmp")
    os.makedirs(work, exist_ok=True)
    ds = os.path.join(work, "ds")
    rs = size(a.record_size)
    records = max(a.files, a.size // (rs + 16))
    rc0 = os.path.join(os.path.abspath(builds[0]), "cli", "rollcache")
    sh(rc0, "synth", ds, "--records", records, "--record-size", a.record_size, "--shards",
       a.files)
    names = sorted(os.listdir(ds))
    total = sum(os.path.getsize(os.path.join(ds, n)) for n in names)
    limit = a.limit or total
    nginx = Nginx(ds, os.path.join(work, "nginx"), a.request_rate)
    print("dataset: %d files, %d records of %s, %.1f MB; limit %d bytes, admit %d; "
          "%s connections" % (len(names), records, a.record_size, total / 1e6, limit,
                              a.admit or limit, a.connections))
    if a.request_rate:
        print("nginx: at most %d requests a second on each connection (limit_req)" %
              a.request_rate)
    print("load average at start: %s" % loadavg(), flush=True)
    res = {"curl": [], "curl-files": [], "curl-fsync": []}
    for b in builds:
        res[b] = []
    try:
        for i in range(a.runs):
            dt, _ = run_curl(a, nginx, names, work, False)
            res["curl"].append(total / dt / 1e6)
            print("run %d  curl > /dev/null       %7.1f MB/s  (%.2f s)" %
                  (i, res["curl"][-1], dt), flush=True)
            if a.curl_files:
                dt, dts = run_curl(a, nginx, names, work, True)
                res["curl-files"].append(total / dt / 1e6)
                res["curl-fsync"].append(total / dts / 1e6)
                print("run %d  curl -o files          %7.1f MB/s  (%.2f s; with fsync %.1f MB/s, "
                      "%.2f s)" % (i, res["curl-files"][-1], dt, res["curl-fsync"][-1], dts),
                      flush=True)
            for b in builds:
                r = run_mount(a, b, nginx, work, limit)
                res[b].append(r["mbps"])
                print("run %d  mount %-16s %7.1f MB/s  (%.2f s to 90%%; %.0f MB fetched at 1 s, "
                      "%.0f MB sealed at 2 s; %d requests, %.2f MB each; nginx sent %.0f MB, "
                      "fetched %.0f MB, peak %.0f MB of %.0f; %d page faults)" %
                      (i, b, r["mbps"], r["s"], r["at1"], r["at2"], r["requests"],
                       r["fetched"] / max(1, r["requests"]) / 1e6, r["sent"] / 1e6,
                       r["fetched"] / 1e6, r["peak"] / 1e6, limit / 1e6, r["minflt"]),
                      flush=True)
    finally:
        nginx.stop()
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)
    print("load average at end: %s" % loadavg())
    cm = statistics.median(res["curl"])
    print("median curl > /dev/null: %.1f MB/s" % cm)
    fm = statistics.median(res["curl-files"]) if res["curl-files"] else None
    sm = statistics.median(res["curl-fsync"]) if res["curl-fsync"] else None
    if fm:
        print("median curl -o files: %.1f MB/s; with fsync: %.1f MB/s" % (fm, sm))
    for b in builds:
        m = statistics.median(res[b])
        print("median mount %s: %.1f MB/s, %.2fx curl > /dev/null%s" %
              (b, m, m / cm, ", %.2fx curl -o files, %.2fx curl -o files + fsync" %
               (m / fm, m / sm) if fm else ""))


if __name__ == "__main__":
    main()
