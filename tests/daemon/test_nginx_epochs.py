#!/usr/bin/python3
"""fuse-nginx-epochs: end to end against a real nginx (Debian nginx-light).

A `rollcache synth` dataset larger than the cache is served by nginx (JSON
autoindex); the mount's samplers fill the cache over http://; three epochs
are advanced with `epoch next --wait`.  Proves:
  - resident records grow at each of the three epochs (the cache grows
    toward its limit, DESIGN "Epochs");
  - disk usage of the cache directory, sampled all along by a thread, never
    exceeds `limit` (invariant 4);
  - every record served through the mount is a record of the source
    (invariant 5), and `rollcache check` passes on current/;
  - stats JSON agrees with the catalog (catalog.db read with the sqlite3
    CLI): resident files/bytes/records, per-epoch admitted/evicted bytes,
    the current epoch's membership, and the budget's sealed bytes.
"""
import json
import os
import shutil
import subprocess
import time

import rcfuse as t

LIMIT = 3 << 20


def sqlite(db, sql):
    sq = shutil.which("sqlite3")
    if not sq:
        t.missing("the sqlite3 CLI is not installed", "run scripts/deps.sh (apt-get install sqlite3)")
    p = subprocess.run([sq, "-readonly", "-json", db, sql], capture_output=True, text=True,
                       timeout=30)
    if p.returncode != 0:
        t.fail("sqlite3 %s: %s" % (sql, p.stderr))
    return json.loads(p.stdout or "[]")


def body(s):
    s.synth(records=480, size="8K", shards=12)  # ~3.9 MB > LIMIT
    src_recs = set(t.read_records_dir(s.src))
    url, _ = t.start_nginx(s)

    cfg = s.config("[cache]\nlimit = 3M\nmin_records = 100000\n"
                   "[sampler]\nshard_size = 128K\nconnections = 4\n"
                   "[epoch 0-]\nlimit = 3M\nadmit = 768K\npolicy = fifo\n")
    disk = t.DiskPeak(s)
    s.mount(url, "--config", cfg)

    resident = []
    for _ in range(3):
        t.run("epoch", s.mnt, "next", "--wait", timeout=120)
        st = s.stats()
        resident.append(st["current"]["records"])
        if st["used"] > LIMIT:
            t.fail("stats used %d > limit %d" % (st["used"], LIMIT))
    for a, b in zip(resident, resident[1:]):
        if not b > a:
            t.fail("resident records did not grow each epoch: %r" % resident)
    peak = disk.stop()
    if peak > LIMIT:
        t.fail("disk usage peaked at %d bytes > limit %d" % (peak, LIMIT))
    if peak == 0:
        t.fail("the disk sampler saw nothing")
    print("resident records per epoch %r, disk peak %d of limit %d" % (resident, peak, LIMIT))

    cur = os.path.join(s.mnt, "current")
    served = t.read_records_dir(cur)
    t.eq(len(served), resident[-1], "records served from current/ vs stats")
    t.eq(len(set(served) - src_recs), 0, "records served that are not in the source")
    t.run("check", cur)

    # stats JSON vs the catalog; the samplers may still seal a shard: retry
    db = os.path.join(s.cache, "catalog.db")
    for attempt in range(20):
        st = s.stats()
        rows = sqlite(db, "SELECT COUNT(*) AS files, COALESCE(SUM(bytes),0) AS bytes, "
                          "COALESCE(SUM(records),0) AS records FROM shards WHERE state = 0")[0]
        eps = {r["number"]: r for r in sqlite(db, "SELECT * FROM epochs")}
        st2 = s.stats()
        if st["resident"] == st2["resident"]:
            break
        time.sleep(0.2)
    t.eq(st["resident"], {"files": rows["files"], "bytes": rows["bytes"],
                          "records": rows["records"]}, "stats resident vs catalog")
    t.eq(st["disk"]["sealed"], rows["bytes"], "budget sealed bytes vs catalog")
    for e in st["epochs"]:
        r = eps.get(e["epoch"])
        if r is None:
            t.fail("epoch %d in stats but not in the catalog" % e["epoch"])
        for k_stats, k_db in (("admitted_bytes", "admitted_bytes"),
                              ("evicted_bytes", "evicted_bytes"),
                              ("resident_files", "resident_files")):
            if e["epoch"] < st["epoch"] or k_stats != "admitted_bytes":
                t.eq(e[k_stats], r[k_db], "epoch %d %s stats vs catalog" % (e["epoch"], k_stats))
    t.eq(sorted(eps), sorted(e["epoch"] for e in st["epochs"]), "epochs in stats vs catalog")
    names = sorted(os.listdir(cur))
    ids = sorted(int(n[len("shard-"):-len(".tfrecord")]) for n in names)
    in_db = [r["id"] for r in sqlite(db, "SELECT id FROM shards WHERE state IN (0, 1) ORDER BY id")]
    for i in ids:
        if i not in in_db:
            t.fail("file %d shown in current/ but not resident in the catalog" % i)
    t.eq(st["current"]["files"], len(names), "stats current.files vs current/")
    # each boundary admitted at most `admit` (768K) for its epoch
    for e in st["epochs"]:
        if e["admitted_bytes"] > 768 << 10 and e["epoch"] > 0:
            t.fail("epoch %d admitted %d > admit" % (e["epoch"], e["admitted_bytes"]))
    s.umount()


t.main(body, "nginx-epochs")
