#!/usr/bin/python3
"""bench/scale.py - what a mount costs as the dataset grows (docs/scale.md).

For each case, a synthetic HTTP store (bench/scale_store.py: N keys made on
the fly, no disk) and a real `rollcache mount` over it with only the cache
limit, the cache dir and the case's format/strategy set (everything else
the defaults, `relist = 1` among them; `retire` below).  Cases:

  raw      N raw objects of --object-size bytes (format = raw); N listed = N
  records  N TFRecord records of --record-size payload bytes,
           --per-object records per object, with .idx sidecars
           (strategy = records); N listed = N records

Each case measures, in order:

  mount      `rollcache mount` until it returned and `current` is epoch >= 1
             (the first listing is inside it)
  listing    the first listing, seen by the store: from the MANIFEST
             request to the first object GET after it (transfer, parse,
             the catalog's sync, the plan's merge, sidecars); relist: the
             median of the later ones
  retire     the mounts run with --retire boundary (--retire read: the
             default setting): a boundary's victims leave at once, so each
             boundary of a full cache evicts about the epoch's admit with no
             reader.  With retire = read and nobody reading, victims leave
             only at the next boundary and the boundaries alternate between
             about admit and about 0 victims.  --read reads every file of
             current/ once after each boundary, as a training epoch does
             (docs/scale.md says why it is off by default)
  fill       then, before each boundary, wait until the samplers are held
             by the budget (or idle) and have admitted nothing for a while:
             the cache is as full as this epoch lets it be.  Up to 4
             unmeasured boundaries first bring the cache to >= 90% of its
             limit; then --boundaries measured ones:
  boundary   seconds of `rollcache epoch MNT next --wait`, and the victims
             the stats say it chose (last_boundary.victims)
  RSS        the daemon's VmHWM (/proc/PID/status: the kernel's peak of
             resident memory over the process's life) after the listing and
             at the end: it covers the listing and every boundary
  status     `rollcache status MNT`: the median of 5 runs
  catalog    after `rollcache umount`: catalog.db + catalog.db-wal (after a
             TRUNCATE checkpoint), in bytes per listed unit
  warm       the same mount command over that cache again: seconds until
             `current` exists, and its VmHWM once its listing is done
  ingest     `rollcache ingest` of the same source into a new cache of the
             same limit: seconds and peak RSS (/usr/bin/time's %M, else the
             VmHWM of its pid polled)

--world-size W mounts and ingests as rank 0 of W nodes (a node of a
many-node job): N listed is still what the store lists, of which the node
keeps about N/W (docs/sampler.md); --check runs with 1.

Then one table (--csv FILE writes it too) and, per case kind, the growth
between consecutive sizes: the slope per listed unit of every figure.
Every size runs with the same cache limit, so a figure that grows with N
grows with what is listed, not with the cache.

Timings depend on the machine and its load (/proc/loadavg is printed with
each case); memory and byte figures do not.

--check runs a small raw case (--objects, default 2000, a 4M cache) and a
small records case and asserts the harness's own readings: the store's
listing equals the catalog's object count and the sampler's
listed_objects, every RSS read is > 0, every boundary completed and the
epoch moved by one each, the measured boundaries had victims, the store's
TFRecord objects passed the sampler's CRCs (no corrupt record, no failed
object), ingest filled its cache.  Timings are never asserted.  Exit 1 on a
failed check; 77 without /dev/fuse.

Usage (from the source tree, after a build):
  /usr/bin/python3 bench/scale.py [--build build] [--raw 100000,1000000]
      [--records 100000,1000000] [--limit 64M] [--object-size 4096]
      [--record-size 256] [--per-object 1000] [--boundaries 3]
      [--listing auto|manifest|autoindex] [--folder 100000] [--world-size 1]
      [--retire boundary|read] [--read] [--csv FILE] [--work DIR] [--keep]
  /usr/bin/python3 bench/scale.py --check [--objects 2000]
"""
import argparse
import csv
import json
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
STORE = os.path.join(HERE, "scale_store.py")
PY = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
MiB = 1 << 20


def parse_size(s):
    s = str(s).strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    if s and s[-1] in mult:
        return int(float(s[:-1]) * mult[s[-1]])
    return int(s)


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def proc_kb(pid, field):
    """A kB field of /proc/PID/status in bytes; 0 when the process is gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def pid_alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def is_mounted(mp):
    mp = os.path.realpath(mp)
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == mp for line in f)


class Failed(Exception):
    pass


class Store:
    """bench/scale_store.py in its own process."""

    def __init__(self, args):
        self.p = subprocess.Popen([PY, STORE] + [str(x) for x in args], stdout=subprocess.PIPE,
                                  text=True)
        line = self.p.stdout.readline().split()
        if len(line) < 4 or line[0] != "PORT":
            self.stop()
            raise Failed("scale_store.py did not start: %r" % line)
        self.port, self.listing = int(line[1]), line[3]
        self.url = "http://127.0.0.1:%d/data/" % self.port

    def stats(self):
        import urllib.request
        with urllib.request.urlopen("http://127.0.0.1:%d/.scale/stats" % self.port,
                                    timeout=30) as r:
            return json.load(r)

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


class MountHarness:
    """What a harness does with one mount (scale.py, cache_growth.py): run
    rollcache, read the stats, wait for a condition, mount until the first
    epoch is there, wait until the cache is as full as the epoch lets it be,
    fill it with unmeasured boundaries.  The subclass sets a (the arguments:
    timeout, settle), rc_bin, cache, mnt, limit, pids and notes."""

    # -- rollcache ---------------------------------------------------------

    def rc(self, *args, timeout=3600, check=True):
        p = subprocess.run([self.rc_bin] + [str(x) for x in args], capture_output=True,
                           text=True, timeout=timeout)
        if check and p.returncode:
            raise Failed("rollcache %s: exit %d: %s" % (" ".join(map(str, args)), p.returncode,
                                                      p.stderr.strip()[-2000:]))
        return p

    def stats(self):
        with open(os.path.join(self.mnt, ".rollcache", "stats")) as f:
            return json.load(f)

    def wait(self, cond, what, timeout):
        t0 = time.monotonic()
        while True:
            v = cond()
            if v:
                return v
            if time.monotonic() - t0 > timeout:
                raise Failed("%s: not after %.0f s" % (what, timeout))
            time.sleep(0.05)

    def mount_url(self, url, *opts):
        """Mounts url with opts; returns (seconds until current/ is epoch >= 1,
        daemon pid)."""
        t0 = time.monotonic()
        self.rc("mount", url, self.mnt, "--cache-dir", self.cache, *opts)

        def up():
            try:
                st = self.stats()
            except (OSError, ValueError):
                return None
            ok = (st.get("epoch") or 0) >= 1 and os.path.exists(os.path.join(self.mnt,
                                                                              "current"))
            return st if ok else None
        st = self.wait(up, "the first epoch", self.a.timeout)
        dt = time.monotonic() - t0
        self.pids.append(st["pid"])
        return dt, st["pid"]

    def wait_full(self):
        """Waits until the samplers are held by the budget (or idle) and admitted
        nothing for --settle seconds: as full as this epoch lets the cache be."""
        last, since, t0 = None, time.monotonic(), time.monotonic()
        while True:
            st = self.stats()
            adm = st["admission"]
            held = adm["waiting_admit"] + adm["waiting_limit"] > 0 or st["sampler"]["idle"]
            mark = (st["sampler"]["bytes_admitted"], st["resident"]["files"])
            now = time.monotonic()
            if mark != last:
                last, since = mark, now
            if held and now - since >= self.a.settle:
                return st
            if now - t0 > self.a.timeout:
                self.notes.append("fill wait ended by --timeout")
                return st
            time.sleep(0.1)


    def status_s(self):
        """`rollcache status`: the median of 5 runs, in seconds."""
        ts = []
        for _ in range(5):
            t0 = time.monotonic()
            self.rc("status", self.mnt)
            ts.append(time.monotonic() - t0)
        return statistics.median(ts)

    def fill(self, after_boundary=None):
        """Up to 4 boundaries, unmeasured, until the cache holds >= 90% of
        self.limit (after_boundary() after each); returns (the stats then,
        the boundaries it took)."""
        warm = 0
        while True:
            st = self.wait_full()
            if st["resident"]["bytes"] >= 0.9 * self.limit or warm >= 4:
                return st, warm
            self.rc("epoch", self.mnt, "next", "--wait")
            warm += 1
            if after_boundary:
                after_boundary()


class Case(MountHarness):
    """One size of one kind: the store, a cache dir, a mount point."""

    def __init__(self, a, kind, n, limit):
        self.a, self.kind, self.n, self.limit = a, kind, n, limit
        self.rc_bin = os.path.join(a.build, "cli", "rollcache")
        self.root = tempfile.mkdtemp(prefix="rc-scale-%s-%d-" % (kind, n), dir=a.work)
        self.cache = os.path.join(self.root, "cache")
        self.mnt = os.path.join(self.root, "mnt")
        os.makedirs(self.mnt)
        if kind == "raw":
            self.objects = n
            store_args = ["--objects", n, "--format", "raw", "--size", a.object_size]
            self.mode = ["--format", "raw", "--retire", a.retire]
        else:
            self.objects = max(1, n // a.per_object)
            store_args = ["--objects", self.objects, "--format", "tfrecord",
                          "--records", a.per_object, "--record-size", a.record_size]
            self.mode = ["--strategy", "records", "--retire", a.retire]
        # rank 0 of --world-size nodes: the node keeps its share of the listing
        self.share = ["--rank", "0", "--world-size", str(a.world_size)] if a.world_size > 1 else []
        self.mode += self.share
        self.store = Store(store_args + ["--listing", a.listing, "--folder", a.folder])
        self.pids = []
        self.row = {"case": kind, "n": n, "objects": self.objects, "limit": limit,
                    "world_size": a.world_size, "listing": self.store.listing,
                    "load_start": loadavg()}
        self.notes = []

    # -- rollcache ---------------------------------------------------------

    def mount(self):
        """Mounts; returns (seconds until current/ is epoch >= 1, daemon pid)."""
        return self.mount_url(self.store.url, "--limit", self.limit, *self.mode)

    def umount(self, pid):
        """rollcache umount, then waits for the daemon's exit: `umount` gives up
        after 30 s (said in the notes) while a large daemon may still be
        closing its catalog."""
        t0 = time.monotonic()
        p = self.rc("umount", self.mnt, timeout=600, check=False)
        if p.returncode:
            self.notes.append("umount exit %d: %s" % (p.returncode, p.stderr.strip()[-300:]))
        self.wait(lambda: not pid_alive(pid), "the daemon's exit after umount", self.a.timeout)
        self.row.setdefault("umount_s", []).append(time.monotonic() - t0)

    def listing_done(self, k):
        """Waits for the store's listing k (0-based) to be sent and then
        followed by an object GET, or (nothing left to fetch: all resident)
        by the samplers' idle or held state."""
        def done():
            ls = self.store.stats()["listings"]
            if len(ls) <= k or ls[k][1] is None:
                return None
            if ls[k][2] is not None:
                return ls[k]
            st = self.stats()
            adm = st["admission"]
            if st["sampler"]["idle"] or adm["waiting_admit"] + adm["waiting_limit"] > 0:
                return ls[k]
            return None
        return self.wait(done, "listing %d and what follows it" % k, self.a.timeout)

    def read_view(self):
        """Reads every file of current/ once, to its end, as a training epoch
        does (with retire = read this is what frees the victims' room)."""
        if not self.a.read:
            return 0
        cur = os.path.realpath(os.path.join(self.mnt, "current"))
        n = 0
        for root, dirs, files in os.walk(cur):
            for name in files:
                try:
                    with open(os.path.join(root, name), "rb", buffering=0) as f:
                        while f.read(1 << 20):
                            pass
                    n += 1
                except FileNotFoundError:
                    pass  # retired meanwhile: already read in this epoch
        return n

    def catalog_size(self):
        db = os.path.join(self.cache, "catalog.db")
        con = sqlite3.connect(db, timeout=30)
        try:
            con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            objs = con.execute("SELECT count(*) FROM objects WHERE state = 0").fetchone()[0]
        finally:
            con.close()
        size = os.path.getsize(db)
        wal = db + "-wal"
        if os.path.exists(wal):
            size += os.path.getsize(wal)
        return size, objs

    # -- the measurements --------------------------------------------------

    def run(self):
        r, a = self.row, self.a
        r["mount_s"], pid = self.mount()
        first = self.listing_done(0)
        r["listing_s"] = (first[2] or first[1]) - first[0]
        r["hwm_listing"] = proc_kb(pid, "VmHWM")
        st0 = self.stats()
        r["listed_objects"] = st0["sampler"]["listed_objects"]
        st, warm = self.fill(self.read_view)
        r["warmup_boundaries"] = warm
        r["resident_files"] = st["resident"]["files"]
        r["resident_bytes"] = st["resident"]["bytes"]
        bs, vs, ok = [], [], []
        for _ in range(a.boundaries):
            st = self.wait_full()
            e0 = st["epoch"]
            t0 = time.monotonic()
            self.rc("epoch", self.mnt, "next", "--wait")
            bs.append(time.monotonic() - t0)
            st = self.stats()
            vs.append(st["last_boundary"]["victims"])
            ok.append(st["epoch"] == e0 + 1)
            why = st["last_boundary"].get("wait") or "min_records resident"
            print("    boundary %d: %.2f s, %d victims; the wait: %s"
                  % (st["epoch"], bs[-1], vs[-1], why), flush=True)
            self.read_view()
        r["boundary_s"] = bs
        r["boundary_max"] = max(bs) if bs else None
        r["victims"] = vs
        r["boundaries_ok"] = ok
        r["status_s"] = self.status_s()
        st = self.stats()
        r["hwm_peak"] = proc_kb(pid, "VmHWM")
        r["rss_end"] = proc_kb(pid, "VmRSS")
        ls = self.store.stats()["listings"]
        rel = [x[2] - x[0] for x in ls[1:] if x[2] is not None]
        r["relists"] = len(rel)
        r["relist_s"] = statistics.median(rel) if rel else None
        r["corrupt"] = st["errors"]["corrupt"] + st["errors"]["records_lost"]
        r["failed_objects"] = st["errors"]["failed_objects"]
        r["resident_records"] = st["resident"]["records"]
        self.umount(pid)
        r["catalog_bytes"], r["catalog_objects"] = self.catalog_size()
        r["catalog_per_unit"] = r["catalog_bytes"] / self.n
        # warm mount: the same command over the cache just left
        nlist = len(self.store.stats()["listings"])
        r["warm_mount_s"], pid = self.mount()
        self.listing_done(nlist)
        r["warm_hwm"] = proc_kb(pid, "VmHWM")
        self.umount(pid)
        r["load_end"] = loadavg()
        self.ingest()
        return r

    def ingest(self):
        r = self.row
        cache = os.path.join(self.root, "ingest-cache")
        cmd = [self.rc_bin, "ingest", self.store.url, "--cache-dir", cache, "--limit",
               str(self.limit), "--quiet"] + self.mode[:2] + self.share
        tv = "/usr/bin/time"
        t0 = time.monotonic()
        if os.access(tv, os.X_OK):
            out = os.path.join(self.root, "time.out")
            p = subprocess.run([tv, "-f", "%M", "-o", out] + cmd, capture_output=True,
                               text=True, timeout=self.a.timeout)
            with open(out) as f:
                peak = int(f.read().split()[-1]) * 1024
        else:
            p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 text=True)
            peak = 0
            while p.poll() is None:
                peak = max(peak, proc_kb(p.pid, "VmHWM"))
                time.sleep(0.05)
            p.stderr = p.stderr.read()
        r["ingest_s"] = time.monotonic() - t0
        r["ingest_peak"] = peak
        r["ingest_rc"] = p.returncode
        if p.returncode:
            self.notes.append("ingest exit %d: %s" % (p.returncode, p.stderr.strip()[-500:]))
        con = sqlite3.connect("file:%s?mode=ro" % os.path.join(cache, "catalog.db"), uri=True)
        try:
            r["ingest_bytes"] = con.execute(  # sealed files (CFS_SHARD_SEALED)
                "SELECT coalesce(sum(bytes), 0) FROM shards WHERE state = 0").fetchone()[0]
        finally:
            con.close()

    def close(self):
        if is_mounted(self.mnt):
            subprocess.run(["fusermount3", "-u", self.mnt], capture_output=True)
        if is_mounted(self.mnt):
            subprocess.run(["fusermount3", "-u", "-z", self.mnt], capture_output=True)
        for pid in self.pids:
            for _ in range(100):
                if not pid_alive(pid):
                    break
                time.sleep(0.1)
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
        self.store.stop()
        if not self.a.keep:
            shutil.rmtree(self.root, ignore_errors=True)


# ---- output ----------------------------------------------------------------

COLUMNS = [  # key, header, format
    ("case", "case", "%s"), ("n", "N", "%d"), ("limit", "limit", "%s"),
    ("mount_s", "mount s", "%.2f"), ("listing_s", "list s", "%.2f"),
    ("relist_s", "relist s", "%.2f"), ("hwm_listing", "RSS list MB", "%.0f"),
    ("hwm_peak", "RSS peak MB", "%.0f"), ("boundary_s", "boundaries s", "%s"),
    ("victims", "victims", "%s"), ("status_s", "status ms", "%.0f"),
    ("catalog_per_unit", "catalog B/N", "%.1f"), ("warm_mount_s", "warm mount s", "%.2f"),
    ("warm_hwm", "warm RSS MB", "%.0f"), ("ingest_peak", "ingest RSS MB", "%.0f"),
    ("ingest_s", "ingest s", "%.1f"), ("load_start", "load", "%s"),
]


def cell(r, key, fmt):
    v = r.get(key)
    if v is None:
        return "-"
    if key in ("hwm_listing", "hwm_peak", "warm_hwm", "ingest_peak"):
        return fmt % (v / MiB)
    if key == "status_s":
        return fmt % (v * 1000)
    if key == "limit":
        return "%dM" % (v // MiB)
    if key == "boundary_s":
        return "/".join("%.2f" % x for x in v)
    if key == "victims":
        return "/".join("%d" % x for x in v)
    if key == "load_start":
        return v.split()[0]
    return fmt % v


def print_table(rows):
    hdr = [h for _, h, _ in COLUMNS]
    body = [[cell(r, k, f) for k, _, f in COLUMNS] for r in rows]
    w = [max(len(x) for x in col) for col in zip(hdr, *body)]
    for line in [hdr] + body:
        print("  ".join(x.rjust(n) for x, n in zip(line, w)))


GROWTH = [  # key, name, unit and scale of the slope per listed unit
    ("hwm_listing", "RSS after listing", "B", 1), ("hwm_peak", "RSS peak", "B", 1),
    ("catalog_bytes", "catalog", "B", 1), ("boundary_max", "slowest boundary", "us", 1e6),
    ("status_s", "status", "us", 1e6), ("mount_s", "mount", "us", 1e6),
    ("listing_s", "listing", "us", 1e6), ("warm_mount_s", "warm mount", "us", 1e6),
    ("warm_hwm", "warm RSS", "B", 1), ("ingest_peak", "ingest RSS", "B", 1),
]


def growth(rows):
    """Slopes per listed unit between consecutive sizes of each kind (same limit)."""
    out = []
    for kind in sorted({r["case"] for r in rows}):
        rs = sorted((r for r in rows if r["case"] == kind), key=lambda r: r["n"])
        for lo, hi in zip(rs, rs[1:]):
            if lo["limit"] != hi["limit"] or hi["n"] == lo["n"]:
                continue
            for key, name, unit, scale in GROWTH:
                v0, v1 = lo.get(key), hi.get(key)
                if v0 is None or v1 is None:
                    continue
                slope = (v1 - v0) / (hi["n"] - lo["n"]) * scale
                ratio = v1 / v0 if v0 else float("inf")
                kindof = ("grows with N listed" if ratio >= 1.5 else
                          "flat in N: set by the cache or fixed")
                out.append({"case": kind, "from": lo["n"], "to": hi["n"], "figure": name,
                            "at_from": v0, "at_to": v1, "slope": slope, "unit": unit,
                            "ratio": ratio, "verdict": kindof})
    return out


def print_growth(g):
    for x in g:
        print("  %-8s %-18s %9d -> %-9d x%-6.2f %10.3f %s per listed unit  (%s)"
              % (x["case"], x["figure"], x["from"], x["to"], x["ratio"], x["slope"], x["unit"],
                 x["verdict"]))


# ---- the self-check --------------------------------------------------------


def check_row(r, fails):
    def expect(cond, what):
        if not cond:
            fails.append("%s N=%d: %s" % (r["case"], r["n"], what))
    objs = r["objects"]
    expect(r["catalog_objects"] == objs, "catalog objects %s != the store's %d"
           % (r["catalog_objects"], objs))
    expect(r["listed_objects"] == objs, "sampler.listed_objects %s != the store's %d"
           % (r["listed_objects"], objs))
    for k in ("hwm_listing", "hwm_peak", "warm_hwm", "ingest_peak", "rss_end"):
        expect(r.get(k, 0) > 0, "%s read as %r" % (k, r.get(k)))
    expect(len(r["boundary_s"]) == len(r["boundaries_ok"]) and all(r["boundaries_ok"]),
           "a boundary did not move the epoch by one: %r" % r["boundaries_ok"])
    expect(sum(r["victims"]) > 0, "no victims in the measured boundaries %r (the cache never "
           "filled: resident %d of %d bytes)" % (r["victims"], r["resident_bytes"], r["limit"]))
    expect(r["catalog_bytes"] > 0, "catalog of %r bytes" % r["catalog_bytes"])
    expect(r["listing_s"] >= 0, "listing ended before it began: %r" % r["listing_s"])
    expect(r["corrupt"] == 0 and r["failed_objects"] == 0,
           "the store's objects were refused: corrupt/lost %d, failed objects %d"
           % (r["corrupt"], r["failed_objects"]))
    expect(r["resident_records"] > 0, "no record resident")
    expect(r["ingest_rc"] == 0, "ingest exit %r" % r["ingest_rc"])


def main():
    p = argparse.ArgumentParser(description="rollcache at growing dataset sizes (docs/scale.md)")
    p.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    p.add_argument("--raw", default="100000,1000000", help="raw object counts ('' for none)")
    p.add_argument("--records", default="100000,1000000",
                   help="TFRecord record counts, strategy=records ('' for none)")
    p.add_argument("--limit", default="64M")
    p.add_argument("--object-size", type=int, default=4096)
    p.add_argument("--record-size", type=int, default=256)
    p.add_argument("--per-object", type=int, default=1000, help="records per TFRecord object")
    p.add_argument("--listing", choices=("auto", "manifest", "autoindex"), default="auto",
                   help="the store's listing (auto: MANIFEST up to the sampler's 64 MiB cap)")
    p.add_argument("--folder", type=int, default=100000, help="objects per folder of the store")
    p.add_argument("--boundaries", type=int, default=3)
    p.add_argument("--world-size", type=int, default=1,
                   help="mount and ingest as rank 0 of this many nodes (N listed stays N)")
    p.add_argument("--retire", choices=("boundary", "read"), default="boundary")
    p.add_argument("--read", action="store_true",
                   help="read every file of each epoch's view between boundaries")
    p.add_argument("--settle", type=float, default=1.5,
                   help="seconds without admission that mean the cache is full")
    p.add_argument("--timeout", type=float, default=1800, help="bound of each wait")
    p.add_argument("--csv")
    p.add_argument("--work", default=None, help="scratch directory (default: $TMPDIR)")
    p.add_argument("--keep", action="store_true")
    p.add_argument("--check", action="store_true", help="small self-check (the suite runs it)")
    p.add_argument("--objects", type=int, default=2000, help="--check: raw objects")
    a = p.parse_args()
    a.build = os.path.abspath(a.build)
    rc_bin = os.path.join(a.build, "cli", "rollcache")
    if not os.access(rc_bin, os.X_OK):
        sys.exit("scale.py: %s: build first (ninja -C %s)" % (rc_bin, a.build))
    if not os.path.exists("/dev/fuse"):
        print("SKIP: /dev/fuse is missing")
        return 77
    if a.work:
        os.makedirs(a.work, exist_ok=True)
    limit = parse_size(a.limit)
    if a.check:
        # a cache of a quarter of the raw data: boundaries with victims from the second on
        a.settle = min(a.settle, 1.0)
        a.timeout = min(a.timeout, 120)
        a.boundaries = 2
        a.per_object = 200
        a.world_size = 1
        nrec = 40 * a.per_object
        quarter = [a.objects * a.object_size // 4, nrec * (a.record_size + 16) // 4]
        lim = [max(MiB, x // MiB * MiB) for x in quarter]
        cases = [("raw", a.objects, lim[0]), ("records", nrec, lim[1])]
    else:
        cases = [("raw", int(x), limit) for x in a.raw.split(",") if x.strip()]
        cases += [("records", int(x), limit) for x in a.records.split(",") if x.strip()]
    print("rollcache scale: %s, %d CPUs, load %s, %s" % (
        rc_bin, os.cpu_count(), loadavg(), time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())),
        flush=True)
    rows, fails = [], []
    for kind, n, lim in cases:
        c = Case(a, kind, n, lim)
        try:
            print("%s N=%d (%d objects, listing %s, limit %dM, rank 0 of %d): running, load %s"
                  % (kind, n, c.objects, c.store.listing, lim // MiB, a.world_size, loadavg()),
                  flush=True)
            t0 = time.monotonic()
            r = c.run()
            r["case_s"] = time.monotonic() - t0
            rows.append(r)
            print("  done in %.0f s: %s" % (r["case_s"], json.dumps(
                {k: v for k, v in r.items() if k not in ("case", "n")})), flush=True)
            for note in c.notes:
                print("  note: " + note, flush=True)
            if a.check:
                check_row(r, fails)
        except Failed as e:
            fails.append("%s N=%d: %s" % (kind, n, e))
            print("  FAILED: %s\n  measured before: %s" % (e, json.dumps(c.row)), flush=True)
            for note in c.notes:
                print("  note: " + note, flush=True)
        finally:
            c.close()
    print()
    print_table(rows)
    g = growth(rows)
    if g:
        print("\ngrowth between sizes (same cache limit):")
        print_growth(g)
    if a.csv:
        keys = []
        for r in rows:
            keys += [k for k in r if k not in keys]
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys)
            w.writeheader()
            for r in rows:
                w.writerow({k: (json.dumps(v) if isinstance(v, list) else v)
                            for k, v in r.items()})
    if fails:
        print("\nFAIL:\n  " + "\n  ".join(fails))
        return 1
    if a.check:
        print("\nok: the harness's readings are sane")
    return 0


if __name__ == "__main__":
    sys.exit(main())
