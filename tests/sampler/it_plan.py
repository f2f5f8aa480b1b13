#!/usr/bin/python3
"""sampler-plan-*: the sampling plan (DESIGN "Sampling", invariant 8) through
`rollcache ingest` runs against real peers and real SQLite catalogs.

  coverage-nginx    three ingest runs, the limit raised each time: every
                    record downloaded is distinct until the dataset was
                    covered once (no (object_id, object_offset) twice among
                    resident files, objects.fetches == 1 for every object),
                    bytes_fetched == the objects' bytes (no fetch without room)
  full-nginx        a full cache: the next run downloads nothing
  raw-nginx         format=raw: one file per object under its key, no `~`
                    copies, and a second run downloads nothing
  kill9-file        SIGKILL during ingest (strategy=records, objects, raw), then
                    resume: the pass neither skips nor repeats a unit, and an
                    object cut part-way is finished, its records resident once
  kill9-raw-many-file  format=raw, 1,000 small objects sealed by group
                    commit, SIGKILL four times mid-run: after each kill,
                    before any reconciliation, every SEALED row's file is on
                    disk with its size and its object's bytes, and its plan
                    mark and fetch count committed with it (DESIGN 2, 8);
                    after the last run no orphan file, tmp/ empty, every
                    object resident once (DESIGN 6)
  relist-file       objects added mid-pass are fetched in the rest of the pass
  records-faults-server  strategy=records: ranged GETs covering several records,
                    every sidecar fetched once over two runs (the server's
                    request log, tests/servers/faults.py)
  records-paged-file  strategy=records over more objects than the sampler keeps
                    indexes of (SMP_IDX_CACHE_OBJECTS, sampler_i.h): each
                    sample row's ordinal is its record's line in the sidecar;
                    after a pass, with the ordinals of half the rows and the
                    objects' record bytes cleared (a catalog of before
                    version 9), the next pass finds every record resident
                    through the indexes it pages in, fetches none again and
                    writes the ordinals back

Usage: it_plan.py SCENARIO
"""
import collections
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rcsamp  # noqa: E402


def db(cache):
    return sqlite3.connect("file:%s?mode=ro" % os.path.join(cache, "catalog.db"), uri=True)


def resident_samples(cache):
    c = db(cache)
    rows = c.execute("SELECT s.object_id, s.object_offset FROM samples s "
                     "JOIN shards f ON f.id = s.shard_id WHERE f.state != 2").fetchall()
    c.close()
    return rows


def expect_no_duplicate_units(cache, what):
    rows = resident_samples(cache)
    dup = [k for k, n in collections.Counter(rows).items() if n > 1]
    if dup:
        rcsamp.fail("%s: %d records resident twice (DESIGN 8), e.g. %r" % (what, len(dup), dup[:3]))
    return rows


def fetches(cache):
    c = db(cache)
    rows = dict(c.execute("SELECT key, fetches FROM objects WHERE state = 0").fetchall())
    c.close()
    return rows


def dataset_bytes(root, keys):
    return sum(os.path.getsize(os.path.join(root, k)) for k in keys)


def coverage_nginx(work):
    root = os.path.join(work, "www")
    data = rcsamp.make_dataset(root, 12, 40, 200, 900, seed=5)
    keys = sorted(data)
    total = dataset_bytes(root, keys)
    srv = rcsamp.Server("nginx.sh", [root], os.path.join(work, "nginx"))
    try:
        cache = os.path.join(work, "cache")
        fetched = 0
        for i, frac in enumerate((0.34, 0.67, 1.2)):
            _, st, _ = rcsamp.ingest(srv.url, cache, str(int(total * frac)),
                                     ["--shard-size", "64K"])
            fetched += st["bytes_fetched"]
            expect_no_duplicate_units(cache, "run %d" % i)
            f = fetches(cache)
            again = {k: n for k, n in f.items() if n > 1}
            if again:
                rcsamp.fail("run %d: objects fetched again before the pass ended: %r" % (i, again))
        f = fetches(cache)
        if sorted(f) != keys or set(f.values()) != {1}:
            rcsamp.fail("after the pass every object is fetched once: %r" % f)
        rcsamp.expect_equal_sets(rcsamp.cache_payloads(cache),
                                 collections.Counter(p for v in data.values() for p in v),
                                 "three runs")
        # the listing's bytes aside, every byte downloaded was an object's byte, once
        if not total <= fetched <= total + 64 * 1024:
            rcsamp.fail("downloaded %d bytes for %d bytes of objects" % (fetched, total))
        print("ok: %d objects, %d bytes fetched for %d" % (len(keys), fetched, total))
    finally:
        srv.stop()


def full_nginx(work):
    root = os.path.join(work, "www")
    data = rcsamp.make_dataset(root, 10, 30, 500, 1000, seed=6)
    total = dataset_bytes(root, data)
    srv = rcsamp.Server("nginx.sh", [root], os.path.join(work, "nginx"))
    try:
        cache = os.path.join(work, "cache")
        lim = str(total // 2)
        _, st1, _ = rcsamp.ingest(srv.url, cache, lim, ["--shard-size", "16K"])
        if not st1.get("full"):
            rcsamp.fail("the first run did not fill the cache: %r" % st1)
        if st1["bytes_fetched"] > st1["bytes_admitted"] + 64 * 1024:
            rcsamp.fail("fetched %d bytes but admitted %d: fetched without room" % (
                st1["bytes_fetched"], st1["bytes_admitted"]))
        _, st2, _ = rcsamp.ingest(srv.url, cache, lim, ["--shard-size", "16K"])
        listing = st2["bytes_fetched"]  # the autoindex pages; an object is >= 15 KB
        if st2["records_admitted"] != 0 or st2["objects_done"] != 0 or listing > 12000:
            rcsamp.fail("a full cache downloaded again: %r" % st2)
        expect_no_duplicate_units(cache, "full")
        print("ok: first run %d bytes, second %d (listing only)" % (st1["bytes_fetched"], listing))
    finally:
        srv.stop()


def raw_nginx(work):
    root = os.path.join(work, "www")
    os.makedirs(os.path.join(root, "img"))
    for i in range(40):
        with open(os.path.join(root, "img", "img%05d.jpg" % i), "wb") as f:
            f.write(os.urandom(30000 + 17 * i))
    srv = rcsamp.Server("nginx.sh", [root], os.path.join(work, "nginx"))
    try:
        cache = os.path.join(work, "cache")
        for run in range(3):
            _, st, _ = rcsamp.ingest(srv.url, cache, "1G", ["--format", "raw"])
            # after the first run: the listing (< 8 KB) and no object (>= 30 KB)
            if run > 0 and (st["objects_done"] or st["bytes_fetched"] > 8000):
                rcsamp.fail("run %d fetched resident raw objects again: %r" % (run, st))
        c = db(cache)
        names = [r[0] for r in c.execute("SELECT name FROM shards WHERE state != 2")]
        c.close()
        if len(names) != 40 or any("~" in n for n in names):
            rcsamp.fail("raw files %d, names with ~: %r" % (
                len(names), [n for n in names if "~" in n][:3]))
        if set(fetches(cache).values()) != {1}:
            rcsamp.fail("raw objects fetched more than once: %r" % fetches(cache))
        print("ok: 40 raw objects, one file each")
    finally:
        srv.stop()


def kill9_file(work):
    src = os.path.join(work, "src")
    data = rcsamp.make_dataset(src, 30, 60, 400, 1200, seed=7)
    for k in sorted(data):  # sidecars: strategy=records
        with open(os.path.join(src, k), "rb") as f:
            blob = f.read()
        with open(os.path.join(src, k + ".idx"), "w") as f:
            for off, p in rcsamp.parse(blob, check=False):
                f.write("%d %d\n" % (off, len(p) + 16))
    want = collections.Counter(p for v in data.values() for p in v)
    # strategy=objects: objects large enough that a kill cuts transfers part-way
    big = os.path.join(work, "big")
    big_data = rcsamp.make_dataset(big, 12, 500, 2000, 6000, seed=8)
    big_want = collections.Counter(p for v in big_data.values() for p in v)
    for mode, extra in (("records", ["--strategy", "records"]), ("objects", []),
                        ("raw", ["--format", "raw"])):
        cache = os.path.join(work, "cache-" + mode)
        src = big if mode == "objects" else os.path.join(work, "src")
        args = [rcsamp.rc_bin(), "ingest", "file://" + src + "/", "--cache-dir", cache,
                "--limit", "1G", "--shard-size", "32K", "--connections", "2", "--quiet"] + extra
        kills = 0
        delays = (0.05, 0.1, 0.15, 0.25, 0.4) if mode == "objects" else (0.15, 0.3, 0.45, 0.6, 0.8)
        for delay in delays:
            p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(delay)
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                kills += 1
            p.wait()
        rcsamp.ingest("file://" + src + "/", cache, "1G", ["--shard-size", "32K"] + extra)
        rows = expect_no_duplicate_units(cache, mode + " after kill -9")
        if mode != "raw":
            # every record resident exactly once: none skipped, none repeated (an
            # object whose transfer a kill cut is fetched again, its resident
            # records skipped: never taken as whole)
            rcsamp.expect_equal_sets(rcsamp.cache_payloads(cache),
                                     big_want if mode == "objects" else want,
                                     mode + " after kill -9")
        else:
            objs = {r[0] for r in rows}
            if len(objs) != len(rows) or len(rows) != len(data):  # sidecars are not objects
                rcsamp.fail("raw after kill -9: %d files for %d objects" % (len(rows), len(objs)))
        c = db(cache)
        plan = c.execute("SELECT pass, n_units FROM plans").fetchall()
        c.close()
        if mode == "objects" and kills < 3:
            rcsamp.fail("objects: only %d of 5 runs were killed mid-ingest" % kills)
        print("ok: %s: %d kills, plan %r" % (mode, kills, plan))


def raw_sealed_state(cache, src):
    """Checks a cache left by kill -9, before reconciliation (DESIGN 2):
    every SEALED raw row names a file of its size holding its object's bytes,
    and its plan mark and fetch count were committed with it.  Returns
    (rows, files on disk in objects/ without a row)."""
    c = db(cache)
    if not c.execute("SELECT 1 FROM sqlite_master WHERE name = 'plans'").fetchone():
        c.close()  # killed before the schema was made: nothing may be sealed
        files = os.listdir(os.path.join(cache, "objects"))
        if files:
            rcsamp.fail("objects/ holds %r before the catalog has a schema" % files[:3])
        return [], []
    rows = c.execute("SELECT f.id, f.bytes, o.key, o.fetches FROM shards f "
                     "JOIN objects o ON o.id = f.object_id "
                     "WHERE f.state = 0 AND f.kind = 1").fetchall()
    units = dict(c.execute("SELECT object_id, first_unit FROM plan_objects").fetchall())
    obj_of = dict(c.execute("SELECT id, object_id FROM shards WHERE state = 0").fetchall())
    marks = {u for (u,) in c.execute("SELECT unit FROM plan_marks WHERE pass = 0")}
    plan = c.execute("SELECT pass, taken FROM plans").fetchone()
    taken = plan[1] if plan and plan[1] else b""
    fetched = c.execute("SELECT COUNT(*) FROM objects WHERE fetches > 0").fetchone()[0]
    c.close()
    # a row's unit is marked (or saved in the plan's taken bitmap since), and
    # a marked unit has its row: marks commit with the rows (DESIGN 8)
    row_units = {units[o] for o in obj_of.values()}
    if plan and plan[0] > 0:
        row_units = marks = set()  # the pass is over: a new one has no taken unit yet
    for u in row_units:
        if u not in marks and not (u >> 3 < len(taken) and taken[u >> 3] >> (u & 7) & 1):
            rcsamp.fail("unit %d has a SEALED file but is not taken in the plan" % u)
    if marks - row_units:
        rcsamp.fail("units %r are marked without a SEALED file" % sorted(marks - row_units)[:3])
    for fid, size, key, fetches in rows:
        path = os.path.join(cache, "objects", str(fid))
        if not os.path.exists(path):
            rcsamp.fail("SEALED row %d (%s) has no file after kill -9 (DESIGN 2)" % (fid, key))
        with open(path, "rb") as f:
            got = f.read()
        with open(os.path.join(src, key), "rb") as f:
            want = f.read()
        if len(got) != size or got != want:
            rcsamp.fail("objects/%d: %d bytes, row says %d, %s has %d (DESIGN 2)" % (
                fid, len(got), size, key, len(want)))
        if fetches != 1:
            rcsamp.fail("%s: fetches=%d for one resident file" % (key, fetches))
    if fetched != len(rows):
        rcsamp.fail("%d SEALED rows, but %d fetched objects: not committed in the rows' "
                    "transactions" % (len(rows), fetched))
    ids = {str(r[0]) for r in rows}
    orphans = [n for n in os.listdir(os.path.join(cache, "objects")) if n not in ids]
    return rows, orphans


def kill9_raw_many_file(work):
    src = os.path.join(work, "src")
    n = 1000
    blob = os.urandom(1024 + 4096)
    for i in range(n):
        d = os.path.join(src, "c%02d" % (i % 15))
        os.makedirs(d, exist_ok=True)
        size = 64 + (i * 37) % 960
        with open(os.path.join(d, "o%05d.bin" % i), "wb") as f:
            f.write(blob[(i * 131) % 4096:][:size] + i.to_bytes(4, "little"))
    cache = os.path.join(work, "cache")
    args = [rcsamp.rc_bin(), "ingest", "file://" + src + "/", "--cache-dir", cache,
            "--limit", "1G", "--format", "raw", "--quiet"]
    kills = orphans_seen = 0
    sealed = []
    for delay in (0.2, 0.35, 0.5, 0.65):
        p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
            kills += 1
        p.wait()
        if os.path.exists(os.path.join(cache, "catalog.db")):
            rows, orphans = raw_sealed_state(cache, src)
            sealed.append(len(rows))
            orphans_seen += len(orphans)
    rcsamp.ingest("file://" + src + "/", cache, "1G", ["--format", "raw"])
    rows, orphans = raw_sealed_state(cache, src)
    if orphans:
        rcsamp.fail("after reconciliation, %d files without a row, e.g. %r (DESIGN 6)" % (
            len(orphans), orphans[:3]))
    left = os.listdir(os.path.join(cache, "tmp"))
    if left:
        rcsamp.fail("tmp/ not emptied: %r" % left[:3])
    keys = collections.Counter(r[2] for r in rows)
    if len(keys) != n or set(keys.values()) != {1}:
        rcsamp.fail("after kill -9: %d objects resident for %d, some twice: %r" % (
            len(keys), n, [k for k, v in keys.items() if v > 1][:3]))
    print("ok: %d kills, SEALED rows after each %r, %d renamed files without a row seen "
          "before reconciliation, %d objects once each at the end" % (
              kills, sealed, orphans_seen, n))


def relist_file(work):
    src = os.path.join(work, "src")
    names = ["a%02d.tfrecord" % i for i in range(10)]
    data = rcsamp.make_dataset(src, 10, 20, 500, 900, seed=8, names=names)
    total = dataset_bytes(src, names)
    cache = os.path.join(work, "cache")
    rcsamp.ingest("file://" + src + "/", cache, str(total // 2), ["--shard-size", "16K"])
    before = set(k for k, n in fetches(cache).items() if n)
    new = ["b%02d.tfrecord" % i for i in range(10)]
    data.update(rcsamp.make_dataset(src, 10, 20, 500, 900, seed=9, names=new))
    rcsamp.ingest("file://" + src + "/", cache, "1G", ["--shard-size", "16K"])
    f = fetches(cache)
    if set(f) != set(names + new) or set(f.values()) != {1}:
        rcsamp.fail("after the relist every object once in the pass: %r" % f)
    c = db(cache)
    plan = c.execute("SELECT pass, n_units FROM plans").fetchall()
    firsts = dict(c.execute("SELECT o.key, p.first_unit FROM plan_objects p "
                            "JOIN objects o ON o.id = p.object_id").fetchall())
    c.close()
    if any(firsts[k] < 10 for k in new):
        rcsamp.fail("new objects must get new unit numbers: %r" % firsts)
    if plan[0][1] != 20:
        rcsamp.fail("plan %r, want 20 units" % plan)
    expect_no_duplicate_units(cache, "relist")
    rcsamp.expect_equal_sets(rcsamp.cache_payloads(cache),
                             collections.Counter(p for v in data.values() for p in v), "relist")
    print("ok: %d objects before the relist, all 20 once after; plan %r" % (len(before), plan))


def records_faults_server(work):
    root = os.path.join(work, "www")
    data = rcsamp.make_dataset(root, 6, 100, 300, 700, seed=10)
    keys = sorted(data)
    rcsamp.write_sidecars(root, keys)
    total = dataset_bytes(root, keys)
    srv = rcsamp.Server("faults.py",
                        [root, "--plan", "ok"], os.path.join(work, "srv"))
    try:
        cache = os.path.join(work, "cache")
        for frac in (0.5, 1.2):
            rcsamp.ingest(srv.url, cache, str(int(total * frac)),
                          ["--strategy", "records", "--shard-size", "16K"])
        with urllib.request.urlopen(srv.url + "__stats", timeout=10) as r:
            counts = json.load(r)["counts"]
        idx = {k: n for k, n in counts.items() if k.endswith(".idx")}
        if sorted(idx) != [k + ".idx" for k in keys] or set(idx.values()) != {1}:
            rcsamp.fail("sidecars fetched %r, want each once over two runs" % idx)
        gets = sum(n for k, n in counts.items() if k in data)
        records = sum(len(v) for v in data.values())
        if gets * 4 > records:
            rcsamp.fail("%d GETs for %d records: runs of records were not fetched together" % (
                gets, records))
        expect_no_duplicate_units(cache, "records")
        rcsamp.expect_equal_sets(rcsamp.cache_payloads(cache),
                                 collections.Counter(p for v in data.values() for p in v),
                                 "records")
        print("ok: %d GETs for %d records, sidecars once each" % (gets, records))
    finally:
        srv.stop()


def records_paged_file(work):
    src = os.path.join(work, "src")
    data = rcsamp.make_dataset(src, 24, 40, 200, 700, seed=11)  # 24 > SMP_IDX_CACHE_OBJECTS
    keys = sorted(data)
    rcsamp.write_sidecars(src, keys)
    lines = {}  # key -> {offset: (line, framed size)}
    for k in keys:
        with open(os.path.join(src, k + ".idx")) as f:
            lines[k] = {int(a): (i, int(b)) for i, (a, b) in
                        enumerate(ln.split() for ln in f if ln.strip())}
    want_bytes = {k: sum(v[1] for v in lines[k].values()) for k in keys}
    records = sum(len(v) for v in data.values())
    want = collections.Counter(p for v in data.values() for p in v)
    total = dataset_bytes(src, keys)
    cache = os.path.join(work, "cache")
    extra = ["--strategy", "records", "--shard-size", "16K"]

    def plan_bytes():
        c = db(cache)
        b = dict(c.execute("SELECT o.key, p.record_bytes FROM plan_objects p "
                           "JOIN objects o ON o.id = p.object_id").fetchall())
        c.close()
        return b

    # two runs cover the dataset: the pass ends (the plan rolls to the next)
    _, st1, _ = rcsamp.ingest("file://" + src + "/", cache, str(total // 2), extra)
    _, st2, _ = rcsamp.ingest("file://" + src + "/", cache, "1G", extra)
    if not st1.get("full") or st1["records_admitted"] + st2["records_admitted"] != records:
        rcsamp.fail("two runs admitted %d + %d records of %d" % (
            st1["records_admitted"], st2["records_admitted"], records))
    expect_no_duplicate_units(cache, "two runs")

    def expect_ordinals(what):
        c = db(cache)
        rows = c.execute("SELECT o.key, s.object_offset, s.ordinal FROM samples s "
                         "JOIN objects o ON o.id = s.object_id").fetchall()
        c.close()
        wrong = [r for r in rows if r[2] != lines[r[0]][r[1]][0]]
        if len(rows) != records or wrong:
            rcsamp.fail("%s: %d of %d samples without their sidecar line as ordinal, e.g. %r" % (
                what, len(wrong), len(rows), wrong[:3]))
    expect_ordinals("two runs")
    if plan_bytes() != want_bytes:
        rcsamp.fail("plan_objects.record_bytes %r, want %r" % (plan_bytes(), want_bytes))
    # half the rows as a catalog before version 9 has them: looked up in the indexes
    c = sqlite3.connect(os.path.join(cache, "catalog.db"))
    c.execute("UPDATE samples SET ordinal = NULL WHERE object_offset % 2 = 0")
    c.execute("UPDATE plan_objects SET record_bytes = NULL")
    c.commit()
    c.close()
    # a new pass: every record is resident, none is fetched again
    _, st3, _ = rcsamp.ingest("file://" + src + "/", cache, "1G", extra)
    if st3["records_admitted"] != 0 or st3["objects_done"] != 0:
        rcsamp.fail("the third run fetched resident records again: %r" % st3)
    expect_no_duplicate_units(cache, "third run")
    rcsamp.expect_equal_sets(rcsamp.cache_payloads(cache), want, "third run")
    if plan_bytes() != want_bytes:
        rcsamp.fail("record_bytes not written again from the indexes: %r" % plan_bytes())
    expect_ordinals("the third run (the ordinals looked up, written back)")
    print("ok: %d objects, %d records over two runs with their ordinals; the third run "
          "found all resident" % (len(keys), records))


SCENARIOS = {
    "coverage-nginx": coverage_nginx,
    "full-nginx": full_nginx,
    "raw-nginx": raw_nginx,
    "kill9-file": kill9_file,
    "kill9-raw-many-file": kill9_raw_many_file,
    "relist-file": relist_file,
    "records-faults-server": records_faults_server,
    "records-paged-file": records_paged_file,
}


def main():
    rcsamp.rc_bin()
    if len(sys.argv) != 2 or sys.argv[1] not in SCENARIOS:
        rcsamp.fail("usage: it_plan.py " + "|".join(SCENARIOS))
    work = rcsamp.tmpdir("plan")
    try:
        SCENARIOS[sys.argv[1]](work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
