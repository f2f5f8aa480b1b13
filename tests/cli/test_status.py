#!/usr/bin/python3
"""cli-status-stats-json: `rollcache status` and `epoch` on a crafted
.rollcache/stats, no daemon.

The commands read only MOUNTPOINT/.rollcache/stats (the JSON of
docs/mount.md), so a plain directory holding one stands in for a mount.
Proves, against figures chosen here:
  - every figure of `status` comes from the JSON (no metrics file exists):
    disk, draining, the catalog's bytes (and per listed object), ingest rate, the current epoch's admitted and evicted
    bytes from epochs[], reads, passthrough, the sum of errors.*;
  - strings are JSON-decoded: escaped quotes, backslashes and \\u escapes in
    the source come out whole, control characters are shown as '?';
  - "epoch": null (no epoch begun) shows epoch 0 with nothing admitted;
  - `status --json` prints the stats text as it is;
  - the recent warnings and errors ("recent") are shown newest first, two
    different ones each on its line, a repeat with its count; a stats JSON
    without "recent" shows its last_error;
  - `epoch show` and `epoch next` (which writes "next" to .rollcache/control);
  - errors: no .rollcache/ and a stats text that is not a JSON object exit 1
    naming the cause.
"""
import copy
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clitest import check, eq, run, finish  # noqa: E402


MiB = 1 << 20

STATS = {
    "epoch": 3, "limit": 4 * MiB, "used": 3 * MiB, "advance": "manual", "min_records": 1000,
    "pid": 0,
    "source": "file:///data/a\"b\\c/\u00fcn/", "cache_dir": "/nowhere", "mountpoint": "/nowhere",
    "uptime_s": 12.5,
    "resident": {"files": 12, "bytes": 3 * MiB, "records": 4321},
    "disk": {"sealed": 2 * MiB, "reserved": MiB // 2, "draining": MiB // 2, "draining_files": 1,
             "used": 3 * MiB, "peak": 3 * MiB, "limit": 4 * MiB, "catalog": 96 * 1000 + 7},
    "admission": {"admit": MiB, "admit_used": 0, "waiting_limit": 0, "waiting_admit": 0},
    "current": {"files": 7, "bytes": MiB, "records": 1234, "read_bytes": 5 * MiB,
                "files_read_full": 3},
    "view": {"epochs_listed": 2, "open_handles": 2, "passthrough": False,
             "passthrough_opens": 9, "passthrough_refused": 1},
    "schedule": {"entry": "[epoch 0-] limit 4.0 MiB", "policy": "lru", "limit": 4 * MiB,
                 "admit": MiB, "min_uses": 0},
    "last_boundary": {"victims": 2, "evicted_bytes": 2 * MiB, "admit": MiB,
                      "reason": "min_uses", "why": "2 files\nnot read yet"},
    "epochs": [
        {"epoch": 2, "started_ms": 1, "admitted_bytes": 7 * MiB, "admitted_records": 1,
         "evicted_bytes": 5 * MiB, "evicted_records": 1, "read_bytes": 0, "resident_files": 0,
         "resident_bytes": 0, "resident_records": 0, "limit": 4 * MiB, "admit": MiB,
         "policy": "fifo"},
        {"epoch": 3, "started_ms": 2, "admitted_bytes": MiB, "admitted_records": 1234,
         "evicted_bytes": 2 * MiB, "evicted_records": 9, "read_bytes": 5 * MiB,
         "resident_files": 5, "resident_bytes": 2 * MiB, "resident_records": 3087,
         "limit": 4 * MiB, "admit": MiB, "policy": "lru"},
    ],
    "sampler": {"present": True, "idle": False, "ingest_bytes_per_s": 2500000,
                "fetch_bytes_per_s": 2600000, "bytes_admitted": 0, "records_admitted": 0,
                "bytes_fetched": 0, "objects_done": 0, "requests": 0, "retries": 0,
                "budget_waits": 0, "records_recovered": 40, "stopped": False, "error": "",
                "listed_objects": 1000},
    "errors": {"http_4xx": 1, "http_408_429": 2, "http_5xx": 3, "timeouts": 4,
               "net_errors": 5, "truncated": 6, "records_lost": 7, "failed_objects": 8,
               "enospc": 0, "stats_flush": 9, "boundary": 10, "read": 11},
    "last_error": None,
}

WANT = """rollcache file:///data/a"b\\c/\u00fcn/ on {mp}
epoch    3 (advance manual, policy lru)
disk     [###############.....] 3.0 MiB / 4.0 MiB (75%), draining 512.0 KiB
catalog  93.8 KiB beside the limit, 96 B per listed object
ingest   2.5 MB/s; admitted 1.0 MiB, evicted 2.0 MiB this epoch
current  7 files, 1234 records; 4321 records resident; 2 open handles
reads    5.0 MiB this epoch; passthrough off (9 opens passed through)
errors   66; 2 files?not read yet
"""


def fake_mount(root, name, stats):
    """A directory with .rollcache/stats holding stats (a dict, or a text as is)."""
    mp = os.path.join(root, name)
    os.makedirs(os.path.join(mp, ".rollcache"))
    text = stats if isinstance(stats, str) else json.dumps(stats, indent=2, ensure_ascii=True)
    with open(os.path.join(mp, ".rollcache", "stats"), "w") as f:
        f.write(text)
    return mp, text


def every_figure(root):
    mp, text = fake_mount(root, "full", STATS)
    p = run("status", mp)
    eq(p.returncode, 0, "status exit (%s)" % p.stderr.strip())
    for got, want in zip(p.stdout.splitlines(), WANT.format(mp=mp).splitlines()):
        eq(got, want, "status line")
    eq(len(p.stdout.splitlines()), len(WANT.splitlines()), "status lines")
    p = run("status", mp, "--json")
    eq((p.returncode, p.stdout), (0, text), "status --json: the stats text as it is")
    p = run("epoch", mp, "show")
    eq(p.stdout, "epoch 3: 7 files, 1234 records; admitted 1.0 MiB, evicted 2.0 MiB this epoch; "
       "disk 3.0 MiB\n", "epoch show")
    eq(run("epoch", mp).stdout, p.stdout, "epoch without an action shows")


def columns(root):
    """status fits 80 columns (a long source and path are cut with ...);
    --wide prints them whole, with a bar of 40."""
    st = copy.deepcopy(STATS)
    st["source"] = "s3://bucket/" + "very-long-prefix/" * 8
    mp, _ = fake_mount(root, "long-" + "x" * 60, st)
    p = run("status", mp)
    eq(p.returncode, 0, "status exit (%s)" % p.stderr.strip())
    long_lines = [ln for ln in p.stdout.splitlines() if len(ln) > 80]
    eq(long_lines, [], "status lines over 80 columns")
    check(p.stdout.splitlines()[0].endswith("..."), "cut line ends with ...: %r" % p.stdout)
    p = run("status", mp, "--wide")
    first = p.stdout.splitlines()[0]
    eq(first, "rollcache %s on %s" % (st["source"], mp), "status --wide first line")
    check("[" + "#" * 30 + "." * 10 + "]" in p.stdout, "--wide bar of 40: %r" % p.stdout)


def passthrough_on(root):
    st = copy.deepcopy(STATS)
    st["view"]["passthrough"] = True
    st["last_boundary"]["why"] = ""
    st["errors"] = {k: 0 for k in st["errors"]}
    mp, _ = fake_mount(root, "pt", st)
    lines = run("status", mp).stdout.splitlines() + [""] * 7
    eq(lines[6], "reads    5.0 MiB this epoch; passthrough on (9 opens passed through)",
       "reads line, passthrough on")
    eq(lines[7], "errors   0", "errors line without a why")


def no_epoch_yet(root):
    st = copy.deepcopy(STATS)
    st["epoch"] = None
    mp, _ = fake_mount(root, "null", st)
    p = run("status", mp)
    eq(p.returncode, 0, "status with epoch null: exit (%s)" % p.stderr.strip())
    lines = p.stdout.splitlines() + [""] * 7
    eq(lines[1], "epoch    0 (advance manual, policy lru)", "epoch null")
    eq(lines[4], "ingest   2.5 MB/s; admitted 0 B, evicted 0 B this epoch",
       "epoch null: no row of the current epoch")


def epoch_next(root):
    mp, _ = fake_mount(root, "next", STATS)
    control = os.path.join(mp, ".rollcache", "control")
    open(control, "w").close()
    p = run("epoch", mp, "next")
    eq(p.returncode, 0, "epoch next exit (%s)" % p.stderr.strip())
    with open(control) as f:
        eq(f.read(), "next", "what epoch next writes to .rollcache/control")
    check(p.stdout.startswith("epoch 3: "), "epoch next shows the epoch: %r" % p.stdout)


def last_error(root):
    """A failure after start-up: the samplers stopped, the last error with its
    time (local, as the machine shows it) and reason; counted in errors."""
    st = copy.deepcopy(STATS)
    st["sampler"]["stopped"] = True
    st["sampler"]["error"] = "writing a shard: No space left on device"
    st["errors"]["enospc"] = 1
    ms = 1764099600123
    st["last_error"] = {"level": "error", "unix_ms": ms,
                        "message": "writing a shard: No space left on device"}
    mp, _ = fake_mount(root, "last", st)
    p = run("status", mp)
    eq(p.returncode, 0, "status exit (%s)" % p.stderr.strip())
    lines = p.stdout.splitlines() + [""] * 9
    eq(lines[7], "errors   67; 2 files?not read yet", "errors line counts enospc")
    eq(lines[8], "sampler  STOPPED (see last)", "stopped samplers said")
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms // 1000))
    eq(lines[9], "last     %s error: writing a shard: No space left on device" % when,
       "last error line")


def recent_problems(root):
    """The recent warnings and errors: newest first under `last`, each with
    its local time and level, a repeat with its count, cut to 80 columns."""
    st = copy.deepcopy(STATS)
    ms = [1764099600123, 1764099660456, 1764099720789]
    st["recent"] = [
        {"level": "warn", "message": "sampler: GET a.tfrecord: HTTP 503, retry 1", "unix_ms": ms[0],
         "count": 3},
        {"level": "error", "message": "boundary: catalog write: disk I/O error\x1b",
         "unix_ms": ms[1], "count": 1},
        {"level": "warn", "message": "scrub: " + "long line " * 12, "unix_ms": ms[2], "count": 1},
    ]
    st["last_error"] = {k: st["recent"][-1][k] for k in ("level", "message", "unix_ms")}
    mp, _ = fake_mount(root, "recent", st)
    p = run("status", mp)
    eq(p.returncode, 0, "status exit (%s)" % p.stderr.strip())
    lines = p.stdout.splitlines()
    when = [time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t // 1000)) for t in ms]
    eq(lines[8:], [
        ("last     %s warn: scrub: " % when[2] + "long line " * 12)[:77] + "...",
        "         %s error: boundary: catalog write: disk I/O error?" % when[1],
        "         %s warn x3: sampler: GET a.tfrecord: HTTP 503, retry 1" % when[0],
    ], "the recent problems, newest first")
    eq([ln for ln in lines if len(ln) > 80], [], "status lines over 80 columns")


def errors(root):
    p = run("status", os.path.join(root, "nothing"))
    eq(p.returncode, 1, "status on a directory without .rollcache/: exit")
    check("is not a rollcache mount" in p.stderr, "status on no mount says so: %r" % p.stderr)
    for name, text, words in (("cut", '{"epoch": 1,', "line 1"),
                              ("array", "[1, 2]", "not a JSON object")):
        mp, _ = fake_mount(root, name, text)
        for cmd in (("status", mp), ("status", mp, "--json"), ("epoch", mp, "show")):
            p = run(*cmd)
            eq(p.returncode, 1, "%s on a %s stats: exit" % (cmd[0], name))
            check("stats is not the stats JSON of a mount" in p.stderr and words in p.stderr,
                  "%s on a %s stats: %r" % (" ".join(cmd[:1] + cmd[2:]), name, p.stderr))
            eq(p.stdout, "", "%s on a %s stats: nothing on stdout" % (cmd[0], name))


def main():
    root = tempfile.mkdtemp(prefix="rc-status-")
    try:
        for case in (every_figure, columns, passthrough_on, no_epoch_yet, epoch_next, last_error,
                     recent_problems, errors):
            case(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    finish()


main()
