#!/usr/bin/python3
"""fuse-auto-advance: with `advance = auto` the epoch advances by itself once
every file of the current epoch has been read to the end (DESIGN
[cache] advance), and not before; the read statistics reach the catalog
(reads and full_reads per shard, batched off the read path).
"""
import os

import rcfuse as t


def body(s):
    s.synth(records=60, size="4K", shards=3)
    t.run("ingest", "file://%s/" % s.src, "--cache-dir", s.cache, "--limit", "4M",
          "--shard-size", "64K")
    # a small readahead, so that reading a few bytes does not fetch a whole shard
    s.mount("file://%s/" % s.empty, "--limit", "4M", "--shard-size", "64K", "--advance", "auto",
            "-o", "readahead_kb=16")
    st = s.stats()
    e = st["epoch"]
    t.eq(st["advance"], "auto", "advance in stats")
    cur = os.path.join(s.mnt, "epochs", str(e))
    names = sorted(os.listdir(cur))
    if len(names) < 2:
        t.fail("expected several files, got %r" % names)
    # all files but one read to the end, the last one only half: no advance
    for n in names[:-1]:
        with open(os.path.join(cur, n), "rb") as f:
            f.read()
    with open(os.path.join(cur, names[-1]), "rb", buffering=0) as f:
        f.read(1000)
    t.eq(s.stats()["epoch"], e, "epoch before every file was read to the end")
    with open(os.path.join(cur, names[-1]), "rb") as f:
        f.read()
    t.wait_for(lambda: s.stats()["epoch"] == e + 1, "the automatic advance to %d" % (e + 1))
    # statistics flushed into the catalog: each file read, full reads counted
    rows = s.catalog("SELECT id, reads, full_reads FROM shards WHERE state = 0 ORDER BY id")
    t.eq(len(rows), len(names), "resident shards in the catalog")
    for ident, reads, full in rows:
        if reads < 1 or full < 1:
            t.fail("shard %d: reads %d, full_reads %d after reading it to the end"
                   % (ident, reads, full))
    # epoch e+1 holds the same files, now in the page cache: reading them all
    # again from the cache still counts (release-time accounting), so the
    # epoch advances again
    cur = os.path.join(s.mnt, "epochs", str(e + 1))
    for n in sorted(os.listdir(cur)):
        with open(os.path.join(cur, n), "rb") as f:
            f.read()
    t.wait_for(lambda: s.stats()["epoch"] == e + 2, "the automatic advance to %d" % (e + 2))
    s.umount()


def fresh(s):
    """A new cache starts with an empty epoch 0: with advance = auto the
    daemon advances once the samplers have brought data and can add no more
    (or min_records are resident), without anyone reading."""
    s.synth(records=60, size="4K", shards=3)
    # first_epoch 0: the auto advance of an empty epoch is what is tested here
    # (with first_epoch the first sealed shard is epoch 1: fuse-first-epoch-nginx)
    s.mount("file://%s/" % s.src, "--limit", "4M", "--shard-size", "64K", "--advance", "auto",
            "--first-epoch", "0")
    t.eq(s.stats()["current"]["files"], 0, "files in epoch 0 of a new cache")
    t.wait_for(lambda: s.stats()["current"]["records"] == 60, "epoch 1 with all 60 records",
               timeout=30)
    s.umount()


import sys  # noqa: E402
t.main(fresh if sys.argv[1:] == ["fresh"] else body, "auto")
