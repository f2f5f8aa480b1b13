#!/usr/bin/python3
"""cli-report-stats-json: how `rollcache report` reads a mount's stats JSON and
writes its own, on the catalog of tests/eviction/report_fixture.c, no daemon.

tests/eviction/test_report.py checks the figures; this checks the JSON
around them:
  - given a mount point, the cache directory is the decoded "cache_dir" of
    .rollcache/stats: escaped quotes, backslashes and \\u escapes included;
  - --json carries that path back, escaped, and its keys in a fixed order;
  - a stats text without a cache_dir, or not JSON, exits 2 naming the cause;
  - a cache directory whose path is not UTF-8: the table works, --json exits 1
    saying why.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clitest import check, eq, finish  # noqa: E402
import clitest  # noqa: E402


def run(*args):
    return clitest.run(*args, text=False)  # the reports' bytes, as written


FIXTURE = sys.argv[1]

TOP_KEYS = ["cache_dir", "resident", "files_total", "files_read_full", "epochs"]
EPOCH_KEYS = ["epoch", "started", "policy", "limit", "admit", "min_uses",
              "start_files", "start_records", "start_bytes",
              "end_files", "end_records", "end_bytes",
              "admitted_files", "admitted_records", "admitted_bytes",
              "evicted_files", "evicted_records", "evicted_bytes",
              "evicted_unread_files", "evicted_unread_bytes",
              "seen_files", "seen_records", "read_bytes", "read_files"]


def make_cache(path):
    os.makedirs(path)
    p = subprocess.run([FIXTURE, path], capture_output=True, timeout=60)
    eq(p.returncode, 0, "report_fixture %r exit (%r)" % (path, p.stderr))


def fake_mount(root, name, text):
    mp = os.path.join(root, name)
    os.makedirs(os.path.join(mp, ".rollcache"))
    with open(os.path.join(mp, ".rollcache", "stats"), "w") as f:
        f.write(text)
    return mp


def escaped_cache_dir(root):
    cache = os.path.join(root, 'cache "q" \\ \u00fc')
    make_cache(cache)
    stats = json.dumps({"epoch": 2, "pid": 1, "source": "file:///x/", "cache_dir": cache,
                        "mountpoint": "/x"}, ensure_ascii=True)
    check("\\u00fc" in stats and '\\"q\\"' in stats and "\\\\" in stats,
          "the stats text escapes the path: %s" % stats)
    mp = fake_mount(root, "mnt", stats)
    p = run("report", mp, "--json")
    eq(p.returncode, 0, "report MOUNTPOINT --json exit (%r)" % p.stderr)
    if p.returncode != 0:
        return
    rep = json.loads(p.stdout, object_pairs_hook=lambda kv: kv)
    eq([k for k, _ in rep], TOP_KEYS, "report --json keys")
    top = dict(rep)
    eq(top["cache_dir"], cache, "report --json cache_dir, decoded from the stats")
    eq([k for k, _ in dict(top["resident"]).items()], ["files", "bytes", "records"],
       "resident keys")
    for e in top["epochs"]:
        eq([k for k, _ in e], EPOCH_KEYS, "epoch %r keys" % dict(e)["epoch"])
    direct = run("report", cache, "--json")
    eq(direct.stdout, p.stdout, "report MOUNTPOINT vs CACHE_DIR")
    p = run("report", mp)
    eq(p.returncode, 0, "report MOUNTPOINT exit (%r)" % p.stderr)
    eq((p.stdout.decode().splitlines() or [""])[0], "cache " + cache, "report table's first line")


def bad_stats(root):
    for name, text, words in (("nodir", '{"epoch": 1, "source": "file:///x/"}', "no cache_dir"),
                              ("notjson", '{"cache_dir": "/x"', "line 1"),
                              ("empty", '{"cache_dir": ""}', "no cache_dir")):
        mp = fake_mount(root, name, text)
        p = run("report", mp)
        eq(p.returncode, 2, "report on a %s stats: exit" % name)
        err = p.stderr.decode()
        check("names no cache_dir" in err and words in err,
              "report on a %s stats says why: %r" % (name, err))


def not_utf8(root):
    cache = os.path.join(os.fsencode(root), b"cache-\xff")
    make_cache(cache)
    p = run("report", cache)
    eq(p.returncode, 0, "report table on a non-UTF-8 path: exit (%r)" % p.stderr)
    p = run("report", cache, "--json")
    eq(p.returncode, 1, "report --json on a non-UTF-8 path: exit")
    check(b"not UTF-8" in p.stderr, "report --json on a non-UTF-8 path says why: %r" % p.stderr)


def columns_and_svg(root):
    """The table fits 80 columns (--wide: every column, the total on one line);
    the SVG's legend lies under the x axis label, one entry per row, inside
    the canvas, and the file renders (rsvg-convert, librsvg2-bin)."""
    import xml.etree.ElementTree as ET
    cache = os.path.join(root, "cols")
    make_cache(cache)
    svg = os.path.join(root, "r.svg")
    p = run("report", cache, "--svg", svg)
    eq(p.returncode, 0, "report --svg exit (%r)" % p.stderr)
    lines = p.stdout.decode().splitlines()
    eq([ln for ln in lines if len(ln) > 80], [], "report lines over 80 columns")
    check(lines[1].split()[:4] == ["epoch", "policy", "limit", "admit"], "header: %r" % lines[1])
    check(sum(ln.startswith("total:") for ln in lines) == 1, "one total: %r" % lines)
    wide = run("report", cache, "--wide").stdout.decode().splitlines()
    for col in ("start", "end", "+records", "unread"):
        check(col in wide[1].split(), "--wide header lacks %s: %r" % (col, wide[1]))
    check(any(len(ln) > 80 for ln in wide), "--wide is wider than 80 columns")

    ns = "{http://www.w3.org/2000/svg}"
    doc = ET.parse(svg).getroot()
    width, height = float(doc.get("width")), float(doc.get("height"))
    frame = [r for r in doc.iter(ns + "rect") if r.get("fill") == "none"][0]
    plot_bottom = float(frame.get("y")) + float(frame.get("height"))
    xlabel = [t for t in doc.iter(ns + "text") if t.text == "epoch"][0]
    swatches = [ln for ln in doc.iter(ns + "line") if ln.get("stroke-width") == "2"]
    texts = [t for t in doc.iter(ns + "text") if t.get("x") and t.get("y")
             and float(t.get("y")) > float(xlabel.get("y"))]
    eq(len(swatches), 4, "legend swatches")
    eq(len(texts), len(swatches), "legend labels")
    ys = sorted(float(t.get("y")) for t in texts)
    for a, b in zip(ys, ys[1:]):
        check(b - a >= 14, "legend rows %.0f and %.0f overlap (13 px text)" % (a, b))
    for t in texts:
        y, x = float(t.get("y")), float(t.get("x"))
        check(y - 13 > plot_bottom and y - 13 > float(xlabel.get("y")),
              "legend %r at y=%.0f covers the plot (bottom %.0f)" % (t.text, y, plot_bottom))
        # generous width of 13 px sans-serif: 8 px per character
        check(x + 8 * len(t.text) < width and y < height,
              "legend %r runs off the canvas" % t.text)
    png = os.path.join(root, "r.png")
    r = subprocess.run(["rsvg-convert", svg, "-o", png], capture_output=True, timeout=60)
    eq(r.returncode, 0, "rsvg-convert (%r)" % r.stderr)
    with open(png, "rb") as f:
        eq(f.read(8), b"\x89PNG\r\n\x1a\n", "rendered PNG")


def main():
    root = tempfile.mkdtemp(prefix="rc-report-stats-")
    try:
        for case in (escaped_cache_dir, bad_stats, not_utf8, columns_and_svg):
            case(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    finish()


main()
