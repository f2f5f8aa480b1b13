#!/usr/bin/python3
"""fuse-one-process-torch: one PyTorch process over a rolling mount with the
defaults (only --limit, a cache a quarter of the dataset), the way a user
starts: `rollcache mount SRC MNT --limit ...`, then a training loop.

Three loops of 4 epochs each, on one mount (the cache rolls on between them):
  - FeederDataset in a DataLoader(batch_size=None), with set_epoch(e);
  - the same without set_epoch (each loop is the next epoch);
  - the Feeder itself, iterated directly.
Each epoch: no error (under retire = read a file read in full leaves the
listing, so nothing may read a file twice or count records by reading),
the batches equal len() taken before the loop and at least one (but in
the first epoch of the new cache, its first small shard), and no
record arrives twice in an epoch (records told apart by the first values
of x, which synth draws at random per record).
Fails when python3-torch is missing (scripts/deps.sh installs it).
"""
import os
import sys

import rcfuse as t

try:
    import torch
except ImportError:
    t.missing("python3-torch is not installed (the one-process loop needs it)",
              "run scripts/deps.sh (apt-get install python3-torch)")

sys.path.insert(0, os.path.join(t.SRCDIR, "python"))
import rollcache  # noqa: E402
from rollcache.data import FeederDataset  # noqa: E402

SCHEMA = "x:float32[1024],y:int64[1]"
BATCH = 16
EPOCHS = 4


def run_loop(s, how):
    # the feeder on the mount's current epoch; each loop asks for the next;
    # shuffled: four files read side by side, so files are read to their
    # end (and retired) while len() may still be asked
    f = rollcache.Feeder(os.path.join(s.mnt, "current"), schema=SCHEMA, batch_size=BATCH,
                         shuffle=True, seed=1, framework="torch", drop_last=True)
    ds = FeederDataset(feeder=f)
    seen_epochs = []
    try:
        for e in range(EPOCHS):
            if how == "set_epoch":
                ds.set_epoch(e)
            want = len(ds) if how != "feeder" else len(f)
            got = 0
            keys = []
            it = torch.utils.data.DataLoader(ds, batch_size=None) if how != "feeder" else f
            for b in it:
                got += 1
                keys += [tuple(r) for r in b["x"][:, :3].tolist()]
            t.eq(got, want, "%s: epoch %d: batches vs len() before the loop" % (how, e))
            if got == 0 and (e > 0 or how != "set_epoch"):  # a new cache's first epoch
                t.fail("%s: epoch %d: no batch" % (how, e))  # holds one small shard
            if len(keys) != len(set(keys)):
                t.fail("%s: epoch %d: a record twice in one epoch" % (how, e))
            seen_epochs.append(len(keys))
            print("%s: epoch %d: %d batches (len %d), %d records" % (how, e, got, want,
                                                                    len(keys)), flush=True)
    finally:
        ds.close()
    return seen_epochs


def body(s):
    t.run("synth", s.src, "--records", 1024, "--record-size", "4K", "--shards", 16,
          "--schema", SCHEMA)  # ~4.2 MiB: four times the cache
    s.mount("file://%s/" % s.src, "--limit", "1M")
    st = s.stats()
    t.eq(st["retire"], "read", "retire mode with the defaults")
    for how in ("set_epoch", "no_set_epoch", "feeder"):
        run_loop(s, how)
    st = s.stats()
    t.eq(st["errors"]["read"], 0, "errors.read")
    s.umount()


t.main(body, "one-process-torch")
