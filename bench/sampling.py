#!/usr/bin/python3
"""bench/sampling.py - what the model sees per byte downloaded (issue 12).

Serves a `rollcache synth` dataset from nginx (tests/servers/nginx.sh, with
an access log of the bytes it sent), mounts it with rollcache, and for each
configuration runs EPOCHS epochs of:

    rollcache epoch MNT next --wait          (the mount advances)
    read every file of MNT/epochs/N once     (like the feeder: each file to the end)

The reader parses the TFRecord framing and hashes every payload, so it
counts, independently of rollcache's own figures:

    view       records and bytes of epochs/N (what the reader sees)
    dup        records that appear twice in one epoch's view (must be 0)
    distinct   distinct records seen so far (by payload hash)
    downloaded records downloaded so far = nginx body bytes / framed record size,
               at the end of the epoch and right after its boundary (before
               the view is read: what the view could hold)
    d/d        distinct / records downloaded before the view (1.00 is the
               bound until the dataset has been covered once)
    disk       peak bytes on disk, `du` of the cache every 100 ms (<= limit)
    nginx      body bytes nginx sent (access log) vs the sampler's bytes_fetched

and prints, per configuration, one table row per epoch and a summary line;
--simulate also runs `rollcache simulate` with the same config and prints
its view/distinct/downloaded beside the mount's, epoch by epoch (the i-th
view read against the simulator's epoch i), and each figure's worst
deviation.  --csv FILE appends every
row as CSV (bench/sampling_plot.py draws distinct vs downloaded from it).

Usage (from the source tree, after a build):
  /usr/bin/python3 bench/sampling.py [--build build] [--records 32768]
      [--record-size 64K] [--objects 64] [--limit 512M] [--admits 128M,256M]
      [--epochs 10] [--policies fifo,lru,uses,random,none,grow] [--retire read]
      [--simulate] [--csv FILE] [--keep DIR]
The default is the dataset of issue 12 (2 GiB: 64 objects x 512 records of
64 KiB); --records 4096 --record-size 16K --limit 16M --admits 4M makes a
quick run.
"""
import argparse
import csv
import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
NGINX = os.path.join(SRC, "tests", "servers", "nginx.sh")

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def size(s):
    m = re.fullmatch(r"(\d+)([KMG]?)", s)
    if not m:
        raise argparse.ArgumentTypeError("%s: expected a size such as 64K" % s)
    return int(m.group(1)) * UNITS.get(m.group(2), 1)


def fmt(n):
    return "%.0fM" % (n / 2**20) if n >= 2**20 else "%dK" % (n >> 10)


class Rc:
    def __init__(self, build):
        self.bin = os.path.join(build, "cli", "rollcache")
        if not os.access(self.bin, os.X_OK):
            sys.exit("sampling.py: %s: build first (meson compile -C %s)" % (self.bin, build))

    def __call__(self, *args, timeout=600, check=True):
        p = subprocess.run([self.bin] + [str(a) for a in args], capture_output=True, text=True,
                           timeout=timeout)
        if check and p.returncode:
            raise RuntimeError("rollcache %s: %s" % (" ".join(map(str, args)), p.stderr.strip()))
        return p.stdout


def payload_hashes(path):
    """sha1 of every record payload of a TFRecord file (framing checked)."""
    with open(path, "rb") as f:
        return data_hashes(f.read(), path)


def data_hashes(data, path):
    """sha1 of every record payload in data, the bytes of the TFRecord file path."""
    out = []
    off = 0
    while off < len(data):
        if off + 12 > len(data):
            raise RuntimeError("%s: torn header at %d" % (path, off))
        (n,) = struct.unpack_from("<Q", data, off)
        body = data[off + 12:off + 12 + n]
        if len(body) != n:
            raise RuntimeError("%s: torn record at %d" % (path, off))
        out.append(hashlib.sha1(body).digest())
        off += 12 + n + 4
    return out


def du(path):
    total = 0
    for sub in ("shards", "objects", "tmp"):
        d = os.path.join(path, sub)
        if os.path.isdir(d):
            for n in os.listdir(d):
                try:
                    total += os.lstat(os.path.join(d, n)).st_size
                except FileNotFoundError:
                    pass
    return total


def nginx_body_bytes(state, until_ms=None):
    """Body bytes nginx sent; with until_ms, of requests that ended by then
    (wall-clock ms; the log's last field is $msec)."""
    total = 0
    try:
        with open(os.path.join(state, "access.log")) as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 2 and parts[1].isdigit():
                    if until_ms is not None and float(parts[-1]) * 1000 > until_ms:
                        continue
                    total += int(parts[1])
    except FileNotFoundError:
        pass
    return total


def config_text(a, policy, admit):
    # `next --wait` waits for a full cache, or until the samplers are blocked on
    # the epoch's admit (or have nothing more): each epoch gets its whole budget
    common = ("[cache]\nlimit = %d\nretire = %s\nmin_records = %d\nwait_timeout = 60s\n"
              "[sampler]\nshard_size = %d\n" % (a.limit, a.retire,
                                                 a.limit // (a.record_size + 16), a.shard_size))
    if policy == "grow":  # half the cache for three epochs, then all of it
        return common + ("[epoch 0-2]\nlimit = %d\nadmit = %d\npolicy = fifo\n"
                         "[epoch 3-]\nlimit = %d\nadmit = %d\npolicy = lru\n"
                         % (a.limit // 2, admit // 2, a.limit, admit))
    extra = "min_uses = 1\n" if policy == "random" else ""
    return common + ("[epoch 0-]\nlimit = %d\nadmit = %d\npolicy = %s\n%s"
                     % (a.limit, admit, policy, extra))


def run_one(a, rc, url, nginx_state, root, policy, admit):
    name = "%s-admit%s" % (policy, fmt(admit))
    d = os.path.join(root, name)
    os.makedirs(d)
    cfg = os.path.join(d, "rc.ini")
    with open(cfg, "w") as f:
        f.write(config_text(a, policy, admit))
    cache, mnt = os.path.join(d, "cache"), os.path.join(d, "mnt")
    os.makedirs(mnt)
    body0 = nginx_body_bytes(nginx_state)
    rc("mount", url, mnt, "--cache-dir", cache, "--config", cfg)
    peak = [0]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], du(cache))
            time.sleep(0.1)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    framed = a.record_size + 16
    seen_set = set()
    rows = []
    try:
        for _ in range(a.epochs):
            rc("epoch", mnt, "next", "--wait", timeout=900)
            with open(os.path.join(mnt, ".rollcache", "stats")) as f:
                st = json.load(f)
            e = st["epoch"]
            # downloaded before the view: requests nginx finished by the
            # boundary that made it (transfers go on at once for the next one)
            started = {x["epoch"]: x["started_ms"] for x in st["epochs"]}[e]
            time.sleep(0.05)  # the log line of a request ending at the boundary
            at_view = nginx_body_bytes(nginx_state, started) - body0
            cur = os.path.join(mnt, "epochs", str(e))
            view = []
            view_bytes = 0
            for n in sorted(os.listdir(cur)):
                p = os.path.join(cur, n)
                try:
                    hs = payload_hashes(p)
                    view_bytes += os.path.getsize(p)
                except FileNotFoundError:
                    continue  # retired (retire = read) before we got to it: cannot happen
                view += hs
            dup = len(view) - len(set(view))
            seen_set.update(view)
            body = nginx_body_bytes(nginx_state) - body0
            with open(os.path.join(mnt, ".rollcache", "stats")) as f:
                st = json.load(f)
            row = {
                "config": name, "epoch": e, "view_records": len(view),
                "view_bytes": view_bytes, "dup": dup, "distinct": len(seen_set),
                "downloaded": body // framed, "downloaded_at_view": at_view // framed,
                "nginx_body_bytes": body, "nginx_at_view": at_view,
                "sampler_bytes_fetched": st["sampler"]["bytes_fetched"],
                "disk_peak": peak[0], "limit": a.limit,
            }
            rows.append(row)
            print("  %-18s e%-2d view %6d rec %6.1f MiB (%.2f x limit) dup %d  distinct %7d  "
                  "downloaded %7d (%7d before the view)  d/d %.2f  disk peak %.1f MiB  "
                  "nginx %.1f MiB sampler %.1f MiB"
                  % (name, e, len(view), view_bytes / 2**20, view_bytes / a.limit, dup,
                     len(seen_set), body // framed, at_view // framed,
                     len(seen_set) / max(1, at_view // framed), peak[0] / 2**20, body / 2**20,
                     st["sampler"]["bytes_fetched"] / 2**20), flush=True)
        # rollcache's own accounting beside the independent counts (the last
        # epoch's reads reach the catalog with the next flush, once a second)
        time.sleep(1.2)
        rep = json.loads(rc("report", mnt, "--json"))
        seen = rep["epochs"][-1]["seen_records"] if rep.get("epochs") else 0
        with open(os.path.join(mnt, ".rollcache", "stats")) as f:
            fetched = json.load(f)["sampler"]["bytes_fetched"]
        body = nginx_body_bytes(nginx_state) - body0
        print("  %-18s report seen %d vs distinct by hash %d (%+.2f%%); sampler bytes_fetched %d "
              "vs nginx body bytes %d (%+.2f%%)"
              % (name, seen, len(seen_set), 100.0 * (seen - len(seen_set)) / max(1, len(seen_set)),
                 fetched, body, 100.0 * (fetched - body) / max(1, body)), flush=True)
        for r in rows:
            r["report_seen_final"] = seen
    finally:
        stop.set()
        th.join()
        rc("umount", mnt, check=False)
    return rows


def simulate(a, rc, root, policy, admit):
    cfg = os.path.join(root, "sim-%s-%d.ini" % (policy, admit))
    with open(cfg, "w") as f:
        f.write(config_text(a, policy, admit))
    # the mount's first view the reader reads is epoch 2 (epoch 0 starts
    # empty, first_epoch makes epoch 1 from the first shard): the simulator
    # numbers its epochs from there, with the schedule's entries at them
    out = rc("simulate", "--config", cfg, "--dataset", a.records * a.record_size,
             "--record-size", a.record_size, "--epochs", a.epochs + 1, "--first", 2, "--csv")
    return out


def compare_simulated(a, rows, csv_text):
    """The mount's views against `rollcache simulate --first 2` of the same
    config, epoch by epoch (the same epoch numbers: the first view read is
    epoch 2 in both).  Prints each figure's worst deviation and sets it on
    the rows."""
    sim = [x for x in csv.DictReader(ln for ln in csv_text.splitlines() if ln)
           if x["run"].startswith("sim-")]  # simulate --csv: its header, then its rows
    framed = a.record_size + 16
    worst = {"view": 0.0, "distinct": 0.0, "downloaded": 0.0}
    by_epoch = {int(x["epoch"]): x for x in sim}
    for i, r in enumerate(rows):
        x = by_epoch.get(r["epoch"])
        if x is None:
            continue
        pairs = {
            "view": (r["view_records"], int(x["resident_records"])),
            "distinct": (r["distinct"], int(x["distinct"])),
        }
        # bytes downloaded by the end of epoch i (the simulator counts the
        # admit fetched during it): what nginx had sent by the boundary that
        # ended it, the next view's at_view (the last epoch has none)
        if i + 1 < len(rows):
            pairs["downloaded"] = (rows[i + 1]["nginx_at_view"], int(x["downloaded_bytes"]))
        for k, (real, model) in pairs.items():
            d = (real - model) / model if model else 0.0
            r["sim_" + k] = model
            if abs(d) > abs(worst[k]):
                worst[k] = d
        dl = pairs.get("downloaded", (0, 0))
        print("  %-18s e%-2d vs simulated e%s: view %d / %s, distinct %d / %s, "
              "downloaded by its end %.1f / %.1f MiB" % (r["config"], r["epoch"], x["epoch"],
                                                          r["view_records"],
                                                          x["resident_records"], r["distinct"],
                                                          x["distinct"], dl[0] / 2**20,
                                                          dl[1] / 2**20))
    for r in rows:
        for k, v in worst.items():
            r["sim_worst_" + k] = round(v, 4)
    print("  %-18s simulate vs mount, worst epoch: view %+.1f%%, distinct %+.1f%%, "
          "downloaded %+.1f%% (framed record %d B)" % (rows[0]["config"] if rows else "",
                                                      100 * worst["view"],
                                                      100 * worst["distinct"],
                                                      100 * worst["downloaded"], framed),
          flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(SRC, "build"))
    ap.add_argument("--records", type=int, default=32768)
    ap.add_argument("--record-size", type=size, default=64 << 10)
    ap.add_argument("--objects", type=int, default=64)
    ap.add_argument("--limit", type=size, default=512 << 20)
    ap.add_argument("--admits", default="128M,256M")
    ap.add_argument("--shard-size", type=size, default=16 << 20)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--policies", default="fifo,lru,uses,random,none,grow")
    ap.add_argument("--retire", default="read", choices=["read", "boundary"])
    ap.add_argument("--simulate", action="store_true")
    ap.add_argument("--csv")
    ap.add_argument("--keep", help="work directory to keep (default: a temporary one)")
    a = ap.parse_args()
    rc = Rc(a.build)
    root = a.keep or tempfile.mkdtemp(prefix="rc-bench-sampling-")
    os.makedirs(root, exist_ok=True)
    data, state = os.path.join(root, "data"), os.path.join(root, "nginx")
    if not os.path.isdir(data):
        rc("synth", data, "--records", a.records, "--record-size", a.record_size,
           "--shards", a.objects, "--seed", 7)
    env = dict(os.environ, NGINX_ACCESS_LOG="1")
    url = subprocess.run([NGINX, "start", data, state], capture_output=True, text=True,
                         env=env, check=True).stdout.strip().splitlines()[-1]
    print("dataset: %d records of %s in %d objects (%.0f MiB) at %s; limit %s, retire = %s"
          % (a.records, fmt(a.record_size), a.objects, a.records * a.record_size / 2**20, url,
             fmt(a.limit), a.retire), flush=True)
    all_rows = []
    try:
        for admit in [size(x) for x in a.admits.split(",")]:
            for policy in a.policies.split(","):
                rows = run_one(a, rc, url, state, root, policy, admit)
                all_rows += rows
                if a.simulate:
                    compare_simulated(a, rows, simulate(a, rc, root, policy, admit))
    finally:
        subprocess.run([NGINX, "stop", state], capture_output=True)
        if not a.keep:
            shutil.rmtree(root, ignore_errors=True)
    if a.csv and all_rows:
        fields = list(dict.fromkeys(k for r in all_rows for k in r))  # rows differ in sim_*
        new = not os.path.exists(a.csv)
        with open(a.csv, "a", newline="") as f:
            w = csv.DictWriter(f, fieldnames=fields, restval="")
            if new:
                w.writeheader()
            w.writerows(all_rows)


if __name__ == "__main__":
    main()
