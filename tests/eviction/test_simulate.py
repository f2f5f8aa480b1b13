#!/usr/bin/python3
"""test_simulate.py - `rollcache simulate` end to end (cli/cmd_simulate.c).

Drives $RC_BIN with /usr/bin/python3 only:
  - fifo's rolling window gives exact figures in the table;
  - a config file with a gap in the schedule exits 2 naming file:line;
  - --svg and --svg-downloads write well-formed SVG whose polylines stay
    inside the plot, one per series;
  - --csv gives one line per run and epoch that keeps the invariants.
"""
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

RC = os.environ.get("RC_BIN")
if not RC or not os.access(RC, os.X_OK):
    print("FAIL: RC_BIN (%s) is not the rollcache executable: run the test through "
          "meson test, which sets it" % RC)
    sys.exit(1)

failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what)


def run(*args):
    return subprocess.run([RC, "simulate", *args], capture_output=True, text=True, timeout=60)


def rows(out):
    """Table rows as lists of fields (epoch first)."""
    return [l.split() for l in out.splitlines() if re.match(r"^\s+\d+ \w+ ", l)]


with tempfile.TemporaryDirectory() as tmp:
    # 1. fifo, admit = limit/2, retire = boundary: each epoch reads what the
    # one before admitted.
    r = run("--limit", "40M", "--admit", "20M", "--policy", "fifo", "--dataset", "400M",
            "--record-size", "1M", "--shard-size", "4M", "--epochs", "6", "--retire", "boundary")
    check(r.returncode == 0, f"fifo run exit {r.returncode}: {r.stderr}")
    t = rows(r.stdout)
    check(len(t) == 6, f"6 rows, got {len(t)}")
    for e, f in enumerate(t):
        # epoch policy resident fresh evicted unread distinct coverage bound downloaded
        check(f[1] == "fifo", f"epoch {e}: policy {f[1]}")
        check(f[2] == "20" and f[3] == "20", f"epoch {e}: resident/fresh {f[2]}/{f[3]}")
        check(f[6] == str(20 * (e + 1)), f"epoch {e}: distinct {f[6]} != {20 * (e + 1)}")
        check(f[7] == f[8], f"epoch {e}: coverage {f[7]} != bound {f[8]}")
    check("evicted before read 0 records" in r.stdout, "fifo wasted downloads")

    # 1b. the same with the default (retire = read): once full, every view is
    # the whole cache and holds the epoch before's admit.
    r = run("--limit", "40M", "--admit", "20M", "--policy", "fifo", "--dataset", "400M",
            "--record-size", "1M", "--shard-size", "4M", "--epochs", "6")
    check(r.returncode == 0, f"fifo read run exit {r.returncode}: {r.stderr}")
    t = rows(r.stdout)
    check(len(t) == 6, f"retire read: 6 rows, got {len(t)}")
    for e, f in enumerate(t[1:], 1):
        check(f[2] == "40" and f[3] == "20", f"retire read: epoch {e}: resident/fresh {f[2]}/{f[3]}")
    check("evicted before read 0 records" in r.stdout, "fifo wasted downloads (retire read)")

    # 1c. a dataset that fits (30M in a 40M cache): no victims, nothing
    # downloaded twice (DESIGN "Epochs" step 2).
    r = run("--limit", "40M", "--policy", "fifo", "--dataset", "30M", "--record-size", "1M",
            "--shard-size", "2M", "--epochs", "8", "--csv")
    check(r.returncode == 0, f"fits run exit {r.returncode}: {r.stderr}")
    import csv
    import io
    fits = list(csv.DictReader(io.StringIO(r.stdout)))
    check(all(ln["evicted_records"] == "0" for ln in fits), f"fits: evicted {fits}")
    check(int(fits[-1]["downloaded_bytes"]) == 30 << 20,
          f"fits: downloaded {fits[-1]['downloaded_bytes']} != the dataset's {30 << 20}")
    check(fits[-1]["resident_records"] == "30", f"fits: resident {fits[-1]['resident_records']}")

    # 2. A gap in the schedule names the file line.
    ini = os.path.join(tmp, "gap.ini")
    with open(ini, "w") as fh:
        fh.write("[cache]\nlimit = 20G\n\n[epoch 0]\nlimit = 4G\n\n[epoch 5-]\npolicy = lru\n")
    r = run("--config", ini, "--dataset", "10G", "--record-size", "1M")
    check(r.returncode == 2, f"gap: exit {r.returncode}")
    check(f"{ini}:7: [epoch 5-] leaves a gap after [epoch 0] at line 4" in r.stderr,
          f"gap message: {r.stderr!r}")

    # 3. SVG output: well-formed, series inside the plot box.
    svg, svg_dl = os.path.join(tmp, "a.svg"), os.path.join(tmp, "b.svg")
    r = run("--limit", "20G", "--policy", "fifo,lru,none", "--dataset", "200G",
            "--record-size", "1M", "--epochs", "12", "--svg", svg, "--svg-downloads", svg_dl)
    check(r.returncode == 0, f"svg run exit {r.returncode}: {r.stderr}")
    ns = "{http://www.w3.org/2000/svg}"
    for path, want in ((svg, 6), (svg_dl, 4)):
        root = ET.parse(path).getroot()
        check(root.tag == ns + "svg", f"{path}: root {root.tag}")
        box = [r for r in root.iter(ns + "rect") if r.get("fill") == "none"][0]
        x0, y0 = float(box.get("x")), float(box.get("y"))
        x1, y1 = x0 + float(box.get("width")), y0 + float(box.get("height"))
        lines = list(root.iter(ns + "polyline"))
        check(len(lines) == want, f"{path}: {len(lines)} series, want {want}")
        for pl in lines:
            for pt in pl.get("points").split():
                x, y = map(float, pt.split(","))
                check(x0 - 0.05 <= x <= x1 + 0.05 and y0 - 0.05 <= y <= y1 + 0.05,
                      f"{path}: point {pt} outside the plot")
        texts = "".join(t.text or "" for t in root.iter(ns + "text"))
        check("lru" in texts and "none" in texts, f"{path}: legend lacks a run")

    # 4. --csv: one line per run and epoch; distinct never above the bound,
    # resident + budget never above the limit, fifo never wastes.
    r = run("--limit", "20G", "--policy", "fifo,lru", "--dataset", "200G", "--record-size",
            "1M", "--epochs", "8", "--csv", "--retire", "boundary")
    check(r.returncode == 0, f"csv exit {r.returncode}: {r.stderr}")
    lines = list(csv.DictReader(io.StringIO(r.stdout)))
    check(len(lines) == 16, f"csv: {len(lines)} lines, want 16")
    for ln in lines:
        check(int(ln["distinct"]) <= int(ln["bound"]), f"csv: distinct above bound: {ln}")
        check(int(ln["resident_bytes"]) + int(ln["budget"]) <= int(ln["limit"]),
              f"csv: above the limit: {ln}")
        # no policy evicts a shard before it was in a view (the plan keeps
        # fresh shards out of its soft phase), and the reader reads the view
        check(ln["evicted_unread"] == "0", f"csv: {ln['run']} wasted: {ln}")
    check(any(int(ln["evicted_records"]) > 0 for ln in lines if ln["run"] == "lru"),
          "csv: lru never evicted anything")

print("ok" if not failures else f"{failures} failure(s)")
sys.exit(1 if failures else 0)
