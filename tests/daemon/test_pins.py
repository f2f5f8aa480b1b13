#!/usr/bin/python3
"""fuse-pins: a file open on the mount is pinned (DESIGN invariant 3): no
boundary makes it a victim while a handle is open, it stays readable and
byte-identical across boundaries, the stats say the room is held by open
files (reason `pinned`), and once it is closed the next boundary evicts it
and frees its space.

Schedule [epoch 0-] limit = admit (target 0): every boundary evicts every
unpinned resident file.  The cache is pre-filled with `rollcache ingest`;
the mount's source is empty, so nothing new arrives and the figures are
exact.
"""
import os

import rcfuse as t


def listed(s):
    return sorted(os.listdir(os.path.join(s.mnt, "epochs")), key=int)


def state(s, ident):
    return s.catalog("SELECT state FROM shards WHERE id = ?", ident)


def body(s):
    s.synth(records=60, size="4K", shards=3)
    # retire = boundary: victims leave at the boundary (retire = read keeps them
    # in the view until read: fuse-retire-read)
    cfg = s.config("[cache]\nlimit = 4M\nretire = boundary\n[sampler]\nshard_size = 64K\n"
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
        st = s.stats()
        t.eq(st["epoch"], e + 1, "epoch after one next")
        t.eq(state(s, ident), [(0,)], "catalog state of the open file after E+1 (0 = SEALED)")
        t.eq(st["last_boundary"]["reason"], "pinned", "reason of the short admit budget")
        t.eq(st["last_boundary"]["victims"], len(others), "victims: every file not open")
        for o in others:
            t.wait_for(lambda: not os.path.exists(o), "deletion of %s (evicted, not open)" % o)
        t.eq(sorted(os.listdir(cur)), [name], "current (E+1): the pinned file only")
        t.run("epoch", s.mnt, "next")
        st = s.stats()
        t.eq(st["epoch"], e + 2, "epoch after two next")
        t.eq(st["last_boundary"]["victims"], 0, "victims at E+2: the open file is pinned")
        got += f.read()
        t.eq(len(got), len(want), "bytes read from the pinned file")
        if got != want:
            t.fail("the pinned file's bytes changed")
        t.eq(os.pread(f.fileno(), 100, 10), want[10:110], "pread after E+2")
        t.eq(st["disk"]["sealed"], len(want), "sealed bytes: the pinned file only")
        t.eq(st["disk"]["draining"], 0, "nothing evicted-but-open")
    finally:
        f.close()
    # the release reaches the daemon after close() returns: wait for it
    t.wait_for(lambda: s.stats()["view"]["open_handles"] == 0, "the handle's release")
    t.run("epoch", s.mnt, "next")
    t.wait_for(lambda: not os.path.exists(backing), "the file's deletion after close + next")
    t.wait_for(lambda: state(s, ident) == [], "catalog GONE: the file's row deleted")
    st = s.stats()
    t.eq(st["last_boundary"]["reason"], "ok", "reason once nothing is open")
    t.eq(st["disk"]["sealed"], 0, "sealed bytes after evicting everything")
    t.eq(os.listdir(os.path.join(s.cache, "shards")), [], "shards/ after close")
    t.wait_for(lambda: listed(s) == [str(e + 3)], "only epoch %d listed at the end" % (e + 3))
    s.umount()


t.main(body, "pins")
