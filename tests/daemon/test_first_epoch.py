#!/usr/bin/python3
"""fuse-first-epoch-nginx: a mount over an empty cache makes its first epoch
from the first sealed shard (`first_epoch`), against a real nginx.

A `rollcache synth` dataset is served by nginx (JSON autoindex); the cache
is new; nobody runs `epoch next`.  Proves (behaviour, never timing):
  - the mount starts on the empty epoch 0 and reaches epoch 1 by itself;
    epoch 1 holds the first sealed shard, of at most first_epoch bytes plus
    one record; every record in it is a record of the source, none twice,
    and `rollcache check` passes on it;
  - the epoch after it (`epoch next --wait`) keeps that shard and holds
    shards larger than first_epoch: the small shard is only the first;
  - a re-mount of the same, now non-empty, cache publishes what it holds
    and makes no automatic first epoch: once the samplers have sealed more,
    the epoch is still the one the mount started in;
  - with first_epoch = 0 a new cache keeps its empty epoch 0 while shards
    are sealed, until `epoch next`, as with no first_epoch at all.
"""
import os

import rcfuse as t

FIRST = 64 << 10  # first_epoch
SHARD = 1 << 20  # shard_size
RECORD = 8 << 10  # record size in synth (framing adds 16 bytes)


def files_of(s, epoch):
    d = os.path.join(s.mnt, "epochs", str(epoch))
    return {n: os.path.getsize(os.path.join(d, n)) for n in os.listdir(d)}


def shard_id(name):
    return int(name.split("-")[1].split(".")[0])


def body(s):
    s.synth(records=1024, size="8K", shards=8)  # ~8.4 MB in 8 objects
    src_recs = set(t.read_records_dir(s.src))
    url = t.start_nginx(s)[0]
    # limit 6M < the dataset, 2M admitted per epoch: a re-mount still has room to fill
    common = ["--limit", "6M", "--admit", "2M", "--shard-size", str(SHARD), "--min-records",
              "100", "--connections", "4"]
    args = common + ["--first-epoch", str(FIRST)]

    # 1. a new cache: epoch 1 is the first sealed shard, with no `epoch next`
    s.mount(url, *args)
    t.wait_for(lambda: s.stats()["epoch"] >= 1, "the first epoch without `epoch next`",
               timeout=20)
    t.eq(s.stats()["epoch"], 1, "epoch after the first shard (one automatic advance)")
    ep1 = files_of(s, 1)
    if not ep1:
        t.fail("epoch 1 is empty")
    # the first shard sealed has the lowest id; the next one (shard_size) may
    # have been sealed before the snapshot on a busy machine
    name = min(ep1, key=shard_id)
    if ep1[name] > FIRST + RECORD + 16:
        t.fail("the first shard %s has %d bytes, more than first_epoch %d + one record"
               % (name, ep1[name], FIRST))
    recs = t.read_records_dir(os.path.join(s.mnt, "epochs", "1"))
    if not recs:
        t.fail("epoch 1 holds no record")
    t.eq(len([r for r in recs if r not in src_recs]), 0,
         "records of epoch 1 that are not records of the source (invariant 5)")
    t.eq(len(set(recs)), len(recs), "distinct records in epoch 1 (invariant 8)")
    t.run("check", os.path.join(s.mnt, "epochs", "1"))
    rows = s.catalog("SELECT number FROM epochs ORDER BY number")
    t.eq([r[0] for r in rows][:2], [0, 1], "epochs recorded in the catalog")

    # 2. the next epoch: the first shard stays, later shards are larger
    t.run("epoch", s.mnt, "next", "--wait", timeout=60)
    ep2 = files_of(s, s.stats()["epoch"])
    if name not in ep2:
        t.fail("the first shard %s left the view of the next epoch: %s" % (name, ep2))
    if not [n for n, b in ep2.items() if b > FIRST + RECORD + 16]:
        t.fail("no shard after the first is larger than first_epoch: %s" % ep2)
    held = s.stats()["resident"]["files"]
    s.umount()

    # 3. a re-mount of a non-empty cache: no automatic first epoch
    s.mount(url, *args)
    e0 = s.stats()["epoch"]
    # the samplers go on with the epoch's admit: they seal more, or - when a
    # busy machine let them use it all before the umount - wait for room, or
    # have nothing more to fetch; none of it may start an epoch by itself
    last = [None]

    def settled():
        st = last[0] = s.stats()
        adm = st["admission"]
        return (st["resident"]["files"] > held or adm["waiting_admit"] or
                adm["waiting_limit"] or st["sampler"].get("idle"))
    try:
        t.wait_for(settled, "the samplers to seal more, wait or idle after the re-mount",
                   timeout=20)
    except AssertionError:
        t.fail("after the re-mount: resident %r (held %d), admission %r, sampler %r"
               % (last[0]["resident"], held, last[0]["admission"], last[0]["sampler"]))
    t.eq(s.stats()["epoch"], e0, "epoch of a re-mounted cache while its samplers work")
    s.umount()

    # 4. first_epoch = 0 on a new cache: epoch 0 stays empty until `epoch next`
    s.cache = os.path.join(s.root, "cache-off")
    s.mount(url, *common, "--first-epoch", "0")
    t.wait_for(lambda: s.stats()["resident"]["files"] >= 1,
               "a sealed shard with first_epoch = 0", timeout=20)
    st = s.stats()
    t.eq((st["epoch"], st["current"]["files"]), (0, 0),
         "epoch and its files with first_epoch = 0 after a shard was sealed")
    t.run("epoch", s.mnt, "next")
    t.eq(s.stats()["epoch"], 1, "epoch after `epoch next` with first_epoch = 0")
    s.umount()


t.main(body, "first-epoch")
