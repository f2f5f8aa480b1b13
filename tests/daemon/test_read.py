#!/usr/bin/python3
"""fuse-read: a plain Python open() reader and `rollcache check` read
MOUNTPOINT/current/ and get the records of the cache byte for byte.

The daemon's own samplers fill the cache from a file:// source during
epoch E; once their pass is over (stats sampler.idle), `epoch next` makes
E+1 = exactly the records of the source, each once.
Proves: the view shows each sealed file under current/ with its exact
bytes (DESIGN invariant 1), records equal the source's (invariant 5), and
sequential, random and odd-sized reads all agree with the backing file.
"""
import os
import random

import rcfuse as t


def body(s):
    s.synth(records=300, size="3K", shards=3)
    src_recs = t.read_records_dir(s.src)
    s.mount("file://%s/" % s.src, "--limit", "8M", "--shard-size", "256K")
    t.wait_for(lambda: s.stats()["sampler"]["idle"], "the first sampler pass", timeout=60)
    p = t.run("epoch", s.mnt, "next")
    cur = os.path.join(s.mnt, "current")
    names = sorted(os.listdir(cur))
    if not names:
        t.fail("current/ is empty after next --wait: %s" % p.stderr)
    got = []
    for name in names:
        if not name.startswith("shard-") or not name.endswith(".tfrecord"):
            t.fail("unexpected name in current/: %r" % name)
        ident = name[len("shard-"):-len(".tfrecord")]
        backing = os.path.join(s.cache, "shards", ident + ".tfrecord")
        with open(backing, "rb") as f:
            want = f.read()
        with open(os.path.join(cur, name), "rb") as f:
            data = f.read()
        t.eq(len(data), len(want), name + " size")
        if data != want:
            t.fail("%s: bytes through the mount differ from %s" % (name, backing))
        t.eq(os.stat(os.path.join(cur, name)).st_size, len(want), name + " st_size")
        # random preads of odd sizes, including past the end
        rng = random.Random(name)
        with open(os.path.join(cur, name), "rb", buffering=0) as f:
            for _ in range(50):
                off = rng.randrange(0, len(want) + 10)
                n = rng.choice([1, 7, 4096, 65536, 200000])
                t.eq(os.pread(f.fileno(), n, off), want[off:off + n], "%s pread(%d, %d)" % (name, n, off))
        got += t.tfrecords(data)
    t.eq(sorted(got), sorted(src_recs), "records through the mount vs the source")
    t.run("check", cur)
    st = s.stats()
    t.eq(st["current"]["records"], len(got), "stats current.records")
    t.eq(st["current"]["files"], len(names), "stats current.files")
    if st["current"]["read_bytes"] < sum(os.path.getsize(os.path.join(cur, n)) for n in names):
        t.fail("stats current.read_bytes %d below the bytes read" % st["current"]["read_bytes"])
    # the human views agree with the JSON
    out = t.run("status", s.mnt).stdout
    for want in ("epoch    %d" % st["epoch"], "%d files, %d records" % (len(names), len(got))):
        if want not in out:
            t.fail("status output lacks %r:\n%s" % (want, out))
    out = t.run("epoch", s.mnt, "show").stdout
    if not out.startswith("epoch %d: %d files, %d records" % (st["epoch"], len(names), len(got))):
        t.fail("epoch show: %r" % out)
    # --watch redraws until interrupted, and exits 0 on SIGINT
    import signal
    import subprocess
    import time
    w = subprocess.Popen([t.RC, "status", s.mnt, "--watch"], stdout=subprocess.PIPE, text=True)
    time.sleep(2.5)
    w.send_signal(signal.SIGINT)
    wout, _ = w.communicate(timeout=10)
    t.eq(w.returncode, 0, "status --watch exit status after SIGINT")
    if wout.count("epoch    %d" % st["epoch"]) < 2:
        t.fail("status --watch did not redraw:\n%s" % wout)
    js = t.run("status", s.mnt, "--json").stdout
    import json
    t.eq(json.loads(js)["epoch"], st["epoch"], "status --json epoch")
    metrics = open(os.path.join(s.mnt, ".rollcache", "metrics")).read()
    if "\nrollcache_current_records %d\n" % len(got) not in metrics:
        t.fail("metrics lack rollcache_current_records %d:\n%s" % (len(got), metrics[:2000]))
    s.umount()


t.main(body, "read")
