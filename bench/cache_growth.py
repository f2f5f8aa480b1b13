#!/usr/bin/python3
"""bench/cache_growth.py - what a mount costs as the cache grows (docs/scale.md).

bench/scale.py holds the cache at 64M and grows the dataset; this holds the
dataset and grows the cache, so a figure that moves here moves with the
files resident, not with what is listed.  The source is a local tree
(file://, so filling a large cache takes seconds, not the synthetic HTTP
store's minutes) of --objects raw files of --size bytes in folders of
1,000; each --limits value is one case with a fresh cache:

  mount      `rollcache mount file://SRC/ MNT --format raw --retire boundary
             --limit L` until `current` is epoch >= 1
  fill       then until the samplers are held by the budget (or idle) and
             admitted nothing for --settle seconds; up to 4 unmeasured
             boundaries first bring the cache to >= 90% of L
  boundary   seconds of `rollcache epoch MNT next --wait` on a full cache,
             --boundaries times, and the victims the stats say it chose
             (with retire = boundary each evicts about the epoch's admit,
             half the limit by default; --admit sets it: a small one
             makes boundaries of few victims, but the four warm-up
             boundaries then fill only 4 x admit of the cache)
  status     `rollcache status MNT`, the median of 5
  RSS        the daemon's VmHWM after the fill and at the end (every
             boundary included)
  warm       the same mount over the cache left by `rollcache umount`:
             seconds until `current` exists, and its VmHWM once the cache is
             full again

Then the slope per resident file between consecutive cases.  Timings depend
on the machine and its load (printed); memory figures do not.  Nothing is
asserted.  77 without /dev/fuse.

Usage (from the source tree, after a build):
  /usr/bin/python3 bench/cache_growth.py [--build build] [--objects 262144]
      [--size 4096] [--limits 64M,256M,512M] [--boundaries 3] [--admit SIZE]
      [--work DIR]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from scale import Failed, MountHarness, loadavg, parse_size, pid_alive, proc_kb  # noqa: E402

MiB = 1 << 20


def make_source(root, n, size):
    """n files of size bytes in folders of 1,000, made once (root.done)."""
    if os.path.exists(root + ".done"):
        return
    shutil.rmtree(root, ignore_errors=True)
    rnd = os.urandom(size + 4096)
    for i in range(n):
        d = os.path.join(root, "d%05d" % (i // 1000))
        if i % 1000 == 0:
            os.makedirs(d, exist_ok=True)
        off = (i * 7919) % 4096  # distinct bytes per object, no urandom per file
        with open(os.path.join(d, "o%08d.bin" % i), "wb") as f:
            f.write(rnd[off:off + size])
    open(root + ".done", "w").close()


class Case(MountHarness):
    def __init__(self, a, src, limit):
        self.a, self.src, self.limit = a, src, limit
        self.rc_bin = os.path.join(a.build, "cli", "rollcache")
        self.root = tempfile.mkdtemp(prefix="rc-growth-%d-" % (limit // MiB), dir=a.work)
        self.cache = os.path.join(self.root, "cache")
        self.mnt = os.path.join(self.root, "mnt")
        os.makedirs(self.mnt)
        self.pid = None
        self.pids, self.notes = [], []
        self.row = {"limit_mib": limit // MiB, "load_start": loadavg()}

    def mount(self):
        dt, self.pid = self.mount_url(
            "file://%s/" % self.src, "--limit", self.limit, "--format", "raw", "--retire",
            "boundary", *(["--admit", self.a.admit] if self.a.admit else []))
        return dt

    def umount(self):
        p = self.rc("umount", self.mnt, check=False)
        if p.returncode:
            print("  note: umount exit %d: %s" % (p.returncode, p.stderr.strip()[-300:]))
        self.wait(lambda: not pid_alive(self.pid), "the daemon's exit", self.a.timeout)

    def run(self):
        r = self.row
        r["mount_s"] = self.mount()
        st, _ = self.fill()
        r["resident_files"] = st["resident"]["files"]
        r["hwm_full"] = proc_kb(self.pid, "VmHWM")
        bs, vs = [], []
        for _ in range(self.a.boundaries):
            self.wait_full()
            t0 = time.monotonic()
            self.rc("epoch", self.mnt, "next", "--wait")
            bs.append(time.monotonic() - t0)
            vs.append(self.stats()["last_boundary"]["victims"])
            print("    boundary: %.2f s, %d victims" % (bs[-1], vs[-1]), flush=True)
        r["boundary_s"], r["victims"] = bs, vs
        r["status_s"] = self.status_s()
        r["hwm_peak"] = proc_kb(self.pid, "VmHWM")
        self.umount()
        r["warm_mount_s"] = self.mount()
        self.wait_full()
        r["warm_hwm"] = proc_kb(self.pid, "VmHWM")
        self.umount()
        r["load_end"] = loadavg()
        for note in self.notes:
            print("  note: " + note)
        return r

    def close(self):
        if self.pid and pid_alive(self.pid):
            subprocess.run(["fusermount3", "-u", self.mnt], capture_output=True)
            try:
                self.wait(lambda: not pid_alive(self.pid), "the daemon's exit", self.a.timeout)
            except Failed:
                pass
        shutil.rmtree(self.root, ignore_errors=True)


COLS = [("limit_mib", "limit MiB", "%d"), ("resident_files", "resident files", "%d"),
        ("mount_s", "mount s", "%.2f"), ("hwm_full", "RSS full MiB", "%.0f"),
        ("hwm_peak", "RSS peak MiB", "%.0f"), ("boundary_s", "boundaries s", "%s"),
        ("victims", "victims", "%s"), ("status_s", "status ms", "%.0f"),
        ("warm_mount_s", "warm mount s", "%.2f"), ("warm_hwm", "warm RSS MiB", "%.0f"),
        ("load_start", "load", "%s")]


def cell(key, fmt, v):
    if v is None:
        return "-"
    if key in ("hwm_full", "hwm_peak", "warm_hwm"):
        return fmt % (v / MiB)
    if key == "status_s":
        return fmt % (v * 1000)
    if key == "boundary_s":
        return ", ".join("%.2f" % x for x in v)
    if key == "victims":
        return ", ".join("%d" % x for x in v)
    return fmt % v


def main():
    p = argparse.ArgumentParser(description="rollcache as the cache grows (docs/scale.md)")
    p.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    p.add_argument("--objects", type=int, default=262144)
    p.add_argument("--size", type=int, default=4096)
    p.add_argument("--limits", default="64M,256M,512M")
    p.add_argument("--boundaries", type=int, default=3)
    p.add_argument("--admit", default="",
                   help="the epoch's admit (default: half the limit): a small one makes "
                        "boundaries of few victims over a large cache")
    p.add_argument("--settle", type=float, default=1.5)
    p.add_argument("--timeout", type=float, default=1800)
    p.add_argument("--work", default=None)
    a = p.parse_args()
    a.build = os.path.abspath(a.build)
    if not os.path.exists("/dev/fuse"):
        print("SKIP: /dev/fuse is missing")
        return 77
    work = a.work or tempfile.gettempdir()
    os.makedirs(work, exist_ok=True)
    a.work = work
    src = os.path.join(work, "rc-growth-src-%d-%d" % (a.objects, a.size))
    print("rollcache cache growth: %s, %d CPUs, load %s, %s; %d objects of %d B"
          % (a.build, os.cpu_count(), loadavg(), time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                               time.gmtime()),
             a.objects, a.size), flush=True)
    make_source(src, a.objects, a.size)
    rows = []
    for lim in [parse_size(x) for x in a.limits.split(",") if x.strip()]:
        c = Case(a, src, lim)
        try:
            print("limit %dM: running, load %s" % (lim // MiB, loadavg()), flush=True)
            rows.append(c.run())
            print("  " + json.dumps(rows[-1]), flush=True)
        except Failed as e:
            print("  FAILED: %s" % e, flush=True)
        finally:
            c.close()
    print("\n| " + " | ".join(h for _, h, _ in COLS) + " |")
    print("|" + "---|" * len(COLS))
    for r in rows:
        print("| " + " | ".join(cell(k, f, r.get(k)) for k, _, f in COLS) + " |")
    print("\nslope per resident file between cases:")
    for x, y in zip(rows, rows[1:]):
        d = y["resident_files"] - x["resident_files"]
        if d <= 0:
            continue
        print("  %d -> %d files: RSS peak %.1f B, warm RSS %.1f B, boundary (slowest) %.2f us,"
              " warm mount %.2f us, status %.3f us" % (
                  x["resident_files"], y["resident_files"],
                  (y["hwm_peak"] - x["hwm_peak"]) / d, (y["warm_hwm"] - x["warm_hwm"]) / d,
                  (max(y["boundary_s"]) - max(x["boundary_s"])) / d * 1e6,
                  (y["warm_mount_s"] - x["warm_mount_s"]) / d * 1e6,
                  (y["status_s"] - x["status_s"]) / d * 1e6))
    print("(the source tree %s is kept for the next run)" % src)
    return 0


if __name__ == "__main__":
    sys.exit(main())
