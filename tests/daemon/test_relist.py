#!/usr/bin/python3
"""fuse-relist-zero-file: `relist = 0` lists the source only when the mount
starts.

A file:// dataset of 2 objects, small enough to fit the cache, is mounted
with `relist = 0`; once every record is resident a third object is added at
the source.  Three `epoch next --wait` later the samplers have listed 2
objects (`sampler.listed_objects`) and none of the new records is in the
view or the cache.  The same mount command again lists the source at its
start: the new object's records come in.  (The default, `relist = 1`, sees
such an object at the next epoch: fuse-stale-objects-*.)
"""
import os
import shutil
import tempfile

import rcfuse as t


def body(s):
    s.synth(records=40, size="2K", shards=2)
    cfg = s.config("[cache]\nlimit = 8M\n[sampler]\nshard_size = 64K\n"
                   "[source]\nrelist = 0\n")
    url = "file://%s/" % s.src
    s.mount(url, "--config", cfg)
    cur = os.path.join(s.mnt, "current")
    for _ in range(10):
        t.run("epoch", s.mnt, "next", "--wait", timeout=60)
        if s.stats()["current"]["records"] == 40:
            break
    t.eq(s.stats()["current"]["records"], 40, "every record resident before the addition")
    tmp = tempfile.mkdtemp(prefix="rc-relist-")
    try:
        t.run("synth", tmp, "--records", "10", "--record-size", "3K", "--shards", "1",
              "--seed", "7")
        name = os.listdir(tmp)[0]
        added = t.tfrecords(open(os.path.join(tmp, name), "rb").read())
        shutil.copyfile(os.path.join(tmp, name), os.path.join(s.src, "zz-" + name))
    finally:
        shutil.rmtree(tmp)
    for _ in range(3):
        t.run("epoch", s.mnt, "next", "--wait", timeout=60)
    st = s.stats()
    t.eq(st["sampler"]["listed_objects"], 2, "objects listed with relist = 0")
    seen = set(t.read_records_dir(cur))
    if seen & set(added):
        t.fail("relist = 0: records of an object added after the mount's start are in the view")
    t.eq(len(seen), 40, "records in the view with relist = 0")
    s.umount()
    s.mount(url, "--config", cfg)  # lists at its start
    t.eq(s.stats()["sampler"]["listed_objects"], 3, "objects listed by a new mount")
    for _ in range(10):
        t.run("epoch", s.mnt, "next", "--wait", timeout=60)
        if s.stats()["current"]["records"] == 50:
            break
    seen = set(t.read_records_dir(cur))
    if not set(added) <= seen:
        t.fail("the new mount did not fetch the added object: %d of its %d records in the view"
               % (len(set(added) & seen), len(added)))
    s.umount()


t.main(body, "relist-zero")
