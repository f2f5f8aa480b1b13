#!/usr/bin/python3
"""fuse-pins: a file opened in epoch E stays readable and byte-identical
after advancing to E+2 and after its eviction; its disk space is freed when
it is closed, and epoch E leaves the view then (DESIGN invariant 3, "Epochs"
step 4).

Schedule [epoch 0-] limit = admit (target 0): every boundary evicts every
resident file, so the open file is certainly evicted at E+1.  The cache is
pre-filled with `rollcache ingest`; the mount's source is empty, so nothing
new arrives and the figures are exact.
"""
import os

import rcfuse as t


def listed(s):
    return sorted(os.listdir(os.path.join(s.mnt, "epochs")), key=int)


def body(s):
    s.synth(records=60, size="4K", shards=3)
    cfg = s.config("[cache]\nlimit = 4M\n[sampler]\nshard_size = 64K\n"
                   "[epoch 0-]\nlimit = 4M\nadmit = 4M\npolicy = fifo\n")
    t.run("ingest", "file://%s/" % s.src, "--cache-dir", s.cache, "--config", cfg)
    s.mount("file://%s/" % s.empty, "--config", cfg)
    e = s.stats()["epoch"]
    cur = os.path.join(s.mnt, "current")
    t.eq(os.readlink(cur), "epochs/%d" % e, "current link")
    names = sorted(os.listdir(cur))
    if len(names) < 2:
        t.fail("expected several files in epoch %d, got %r" % (e, names))
    name = names[0]
    ident = int(name[len("shard-"):-len(".tfrecord")])
    backing = os.path.join(s.cache, "shards", "%d.tfrecord" % ident)
    with open(backing, "rb") as fh:
        want = fh.read()
    others = [os.path.join(s.cache, "shards", n[len("shard-"):]) for n in names[1:]]

    f = open(os.path.join(s.mnt, "epochs", str(e), name), "rb", buffering=0)
    try:
        half = len(want) // 2
        got = f.read(half)
        t.run("epoch", s.mnt, "next")
        t.eq(s.stats()["epoch"], e + 1, "epoch after one next")
        t.eq(s.catalog("SELECT state FROM shards WHERE id = ?", ident), [(1,)],
             "catalog state of the open file after E+1 (1 = EVICTING)")
        t.eq(os.path.exists(backing), True, "backing file of the open evicted file exists")
        t.eq(str(e) in listed(s), True, "epoch %d listed while a handle into it is open" % e)
        t.eq(os.listdir(cur), [], "current (E+1) after evicting everything")
        t.run("epoch", s.mnt, "next")
        st = s.stats()
        t.eq(st["epoch"], e + 2, "epoch after two next")
        t.eq(os.readlink(cur), "epochs/%d" % (e + 2), "current link after two next")
        got += f.read()
        t.eq(len(got), len(want), "bytes read from the evicted open file")
        if got != want:
            t.fail("the evicted open file's bytes changed")
        t.eq(os.pread(f.fileno(), 100, 10), want[10:110], "pread after E+2")
        # invariant 3 protects the open file only: the other evicted files of
        # epoch e (no longer current, not open) are gone, their bytes freed
        for o in others:
            t.wait_for(lambda: not os.path.exists(o), "deletion of %s (evicted, not open)" % o)
        t.eq(s.stats()["disk"]["draining"], len(want), "draining bytes: the open file only")
        try:
            open(os.path.join(s.mnt, "epochs", str(e), names[1]), "rb")
            t.fail("opening a deleted file of the held epoch succeeded")
        except FileNotFoundError:
            pass
    finally:
        f.close()
    t.wait_for(lambda: not os.path.exists(backing), "the evicted file's deletion after close")
    t.wait_for(lambda: str(e) not in listed(s), "epoch %d to leave the view" % e)
    # the release reaches the daemon after close() returns; the file goes
    # first, then its row: wait (bounded) for the row too
    t.wait_for(lambda: s.catalog("SELECT state FROM shards WHERE id = ?", ident) == [(2,)],
               "catalog state GONE (2) after close")
    st = s.stats()
    t.eq(st["disk"]["draining"], 0, "draining bytes after close")
    t.eq(st["disk"]["sealed"], 0, "sealed bytes after evicting everything")
    t.eq(os.listdir(os.path.join(s.cache, "shards")), [], "shards/ after close")
    t.eq(listed(s), [str(e + 2)], "epochs listed at the end")
    s.umount()


t.main(body, "pins")
