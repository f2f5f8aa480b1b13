#!/usr/bin/python3
"""eviction-report-cli: `rollcache report` on a catalog written through the
catalog API (report_fixture.c, a crafted run of three epochs and one not begun) - no daemon.

Proves, against the figures the fixture wrote (and Python's sqlite3 reading
the same file as an independent oracle):
  - --json gives each epoch's schedule entry, resident at start and end,
    admitted/evicted files, records and bytes, files evicted unread, the
    cumulative `seen` records and bytes read, exactly;
  - the table has one line per epoch and a total line with the same figures;
  - --svg writes an SVG document;
  - the report opens the catalog read-only: catalog.db is byte-identical after;
  - the same run with the second victim deleted too (report_fixture --reap):
    no row of either victim is left in catalog.db, and --json gives the same
    figures (the epochs counters keep what their rows were counted for);
  - errors: a directory that is neither a mount nor a cache exits 2 naming
    what to give; a damaged catalog exits 1; unknown options exit 2.
"""
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

RC = os.environ.get("RC_BIN", "rollcache")
FIXTURE = sys.argv[1]


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def eq(got, want, what):
    if got != want:
        fail("%s: got %r, expected %r" % (what, got, want))


def run(*args):
    return subprocess.run([RC] + list(args), capture_output=True, text=True, timeout=60)


# epoch -> expected figures (see report_fixture.c)
WANT = {
    0: dict(started=True, policy="fifo", limit=1000, admit=500,
            start_files=0, start_records=0, start_bytes=0,
            end_files=2, end_records=5, end_bytes=300,
            admitted_files=2, admitted_records=5, admitted_bytes=300,
            evicted_files=0, evicted_records=0, evicted_bytes=0,
            evicted_unread_files=0, evicted_unread_bytes=0,
            seen_files=1, seen_records=0, read_bytes=0, read_files=0),
    1: dict(started=True, policy="lru", limit=1000, admit=400,
            start_files=2, start_records=5, start_bytes=300,
            end_files=3, end_records=6, end_bytes=450,
            admitted_files=1, admitted_records=1, admitted_bytes=150,
            evicted_files=0, evicted_records=0, evicted_bytes=0,
            evicted_unread_files=0, evicted_unread_bytes=0,
            seen_files=2, seen_records=2, read_bytes=150, read_files=2),
    2: dict(started=True, policy="none", limit=900, admit=0,
            start_files=1, start_records=1, start_bytes=150,
            end_files=3, end_records=7, end_bytes=290,  # the current epoch: now
            admitted_files=1, admitted_records=4, admitted_bytes=80,
            evicted_files=2, evicted_records=5, evicted_bytes=300,
            evicted_unread_files=1, evicted_unread_bytes=200,
            seen_files=2, seen_records=2, read_bytes=300, read_files=2),
    3: dict(started=False, policy="", limit=0, admit=0,
            start_files=0, start_records=0, start_bytes=0,
            end_files=None, end_records=None, end_bytes=None,
            admitted_files=1, admitted_records=2, admitted_bytes=60,
            evicted_files=0, evicted_records=0, evicted_bytes=0,
            evicted_unread_files=0, evicted_unread_bytes=0,
            seen_files=2, seen_records=2, read_bytes=0, read_files=0),
}


def main():
    root = tempfile.mkdtemp(prefix="rc-report-")
    try:
        cache = os.path.join(root, "cache")
        os.makedirs(cache)
        p = subprocess.run([FIXTURE, cache], capture_output=True, text=True, timeout=60)
        eq(p.returncode, 0, "report_fixture exit (%s)" % p.stderr.strip())
        db = os.path.join(cache, "catalog.db")
        with open(db, "rb") as f:
            before = hashlib.sha256(f.read()).hexdigest()

        svg = os.path.join(root, "r.svg")
        p = run("report", cache, "--json", "--svg", svg)
        eq(p.returncode, 0, "report --json exit (%s)" % p.stderr.strip())
        rep = json.loads(p.stdout)
        eq(rep["cache_dir"], cache, "cache_dir")
        eq(rep["resident"], {"files": 3, "bytes": 290, "records": 7}, "resident now")
        eq((rep["files_total"], rep["files_read_full"]), (5, 2), "files total / read to the end")
        eq([e["epoch"] for e in rep["epochs"]], [0, 1, 2, 3], "epochs")
        for e in rep["epochs"]:
            got = {k: e[k] for k in WANT[e["epoch"]]}
            eq(got, WANT[e["epoch"]], "epoch %d" % e["epoch"])
        with open(svg) as f:
            text = f.read()
        if not text.startswith("<?xml") and "<svg" not in text[:400]:
            fail("--svg: not an SVG document: %r" % text[:80])

        # the oracle: the same file through Python's sqlite3
        con = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
        rows = con.execute("SELECT number, admitted_bytes, evicted_bytes, read_bytes, "
                           "resident_records FROM epochs ORDER BY number").fetchall()
        seen = con.execute("SELECT count(*) FROM served").fetchone()[0]
        con.close()
        eq([(e["epoch"], e["admitted_bytes"], e["evicted_bytes"], e["read_bytes"],
             e["start_records"]) for e in rep["epochs"]], rows, "report vs sqlite3")
        eq(rep["epochs"][-1]["seen_records"], seen, "last seen vs sqlite3")

        p = run("report", "--wide", cache)  # the full table, its total on one line
        eq(p.returncode, 0, "report (table) exit")
        lines = p.stdout.splitlines()
        body = [ln for ln in lines if ln.strip()[:1].isdigit()]
        eq(len(body), 4, "table lines (%s)" % p.stdout)
        eq(body[2].split()[:2], ["2", "none"], "epoch 2 table line")
        if not body[3].endswith("(not begun)"):
            fail("epoch 3 table line does not say it was not begun: %s" % body[3])
        total = [ln for ln in lines if ln.startswith("total:")]
        eq(len(total), 1, "total line")
        for frag in ("admitted 12 records", "evicted 5 records", "1 files unread",
                     "resident now 3 files, 7 records", "read 4 files (450 B through the daemon)", "seen 2 records",
                     "2 of 5 files read to the end", "seen/admitted 0.17"):
            if frag not in total[0]:
                fail("total line lacks %r: %s" % (frag, total[0]))

        with open(db, "rb") as f:
            eq(hashlib.sha256(f.read()).hexdigest(), before, "catalog.db changed by report")

        # both victims GONE: their rows are deleted, the report unchanged
        reaped = os.path.join(root, "reaped")
        os.makedirs(reaped)
        p = subprocess.run([FIXTURE, reaped, "--reap"], capture_output=True, text=True,
                           timeout=60)
        eq(p.returncode, 0, "report_fixture --reap exit (%s)" % p.stderr.strip())
        con = sqlite3.connect("file:%s?mode=ro" % os.path.join(reaped, "catalog.db"), uri=True)
        eq(con.execute("SELECT id FROM shards ORDER BY id").fetchall(), [(3,), (4,), (5,)],
           "rows left after both victims went")
        eq(con.execute("SELECT count(*) FROM samples WHERE shard_id IN (1, 2)").fetchone()[0],
           0, "samples of the victims")
        eq(con.execute("SELECT unread_files, unread_bytes FROM epochs WHERE number = 2")
           .fetchall(), [(1, 200)], "epoch 2's victims deleted unread")
        con.close()
        p = run("report", reaped, "--json")
        eq(p.returncode, 0, "report --json (reaped) exit (%s)" % p.stderr.strip())
        rep2 = json.loads(p.stdout)
        rep2["cache_dir"] = rep["cache_dir"]
        eq(rep2, rep, "report after the victims' rows went")
        # a read-only WAL reader may leave an empty -wal and the -shm index
        # (SQLite cannot remove them read-only); nothing is written to them
        left = sorted(os.listdir(cache))
        if left not in (["catalog.db"], ["catalog.db", "catalog.db-shm", "catalog.db-wal"]):
            fail("files left in the cache dir: %r" % left)
        if "catalog.db-wal" in left:
            eq(os.path.getsize(os.path.join(cache, "catalog.db-wal")), 0, "-wal bytes")

        empty = os.path.join(root, "empty")
        os.makedirs(empty)
        p = run("report", empty)
        eq(p.returncode, 2, "report on a plain directory: exit")
        if "neither a rollcache mount" not in p.stderr:
            fail("report on a plain directory: message %r" % p.stderr)
        bad = os.path.join(root, "bad")
        os.makedirs(bad)
        with open(os.path.join(bad, "catalog.db"), "wb") as f:
            f.write(b"not a database at all" * 100)
        p = run("report", bad)
        eq(p.returncode, 1, "report on a damaged catalog: exit (%s)" % p.stderr.strip())
        if "not a SQLite database" not in p.stderr:
            fail("report on a damaged catalog: message %r" % p.stderr)
        eq(run("report", cache, "--bogus").returncode, 2, "unknown option: exit")
        eq(run("report").returncode, 2, "no argument: exit")
        p = run("report", "--help")
        eq(p.returncode, 0, "--help exit")
        if "seen" not in p.stdout:
            fail("--help does not say what seen counts")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("ok")


main()
