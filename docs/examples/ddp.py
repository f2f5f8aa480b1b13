#!/usr/bin/python3
"""Data-parallel training over a rollcache mount with DistributedDataParallel.

    python3 -m torch.distributed.run --nproc_per_node 2 docs/examples/ddp.py /mnt/train

Each process (torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE)
reads its share of every epoch's records from MOUNT/epochs/N - never
`current` - and every process gets the same number of steps, so no rank
waits forever in DDP's all-reduce.  Each epoch starts with set_epoch(e):
the first rank to get there asks the mount for the next epoch, the others
find it done (the mount advances once per epoch).  Model: one linear layer
fitting y / 1000 from x (the data of `rollcache synth --schema
"x:float32[8],y:int64[1]"`), gloo on CPU.

Checkpoints: --save-at E:S writes, after step S of epoch E, each rank's
model, optimizer and data position to --state DIR; --resume reads them and
goes on with the batch after it (the same records as without the stop).
--log DIR writes one JSON line per step with the ids of the records it
trained on (the tests check equal steps, coverage and the resume with it).
"""
import argparse
import datetime
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

# The installed package (meson install, pip); with RC_LIBDIR=BUILD_DIR (a
# checkout's build, as the tests run it) the checkout's package instead.
if os.environ.get("RC_LIBDIR"):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "python"))
import rollcache.data  # noqa: E402


def record_ids(x):
    """An id per row: synth's float32 values are k / 2^24, so x[:, 0] and
    x[:, 1] give 48 exact bits of the record."""
    k = (x[:, :2].double() * (1 << 24)).to(torch.int64)
    return (k[:, 0] * (1 << 24) + k[:, 1]).tolist()


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("data", help="the mount (or a directory of TFRecord files)")
    p.add_argument("--schema", default="x:float32[8],y:int64[1]")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--drop-last", action="store_true",
                   help="drop the epoch's remainder instead of padding it")
    p.add_argument("--timeout", type=float, default=120,
                   help="seconds for a collective, and for an empty mount to get data")
    p.add_argument("--log", help="directory for per-rank JSON lines (rank<R>.jsonl)")
    p.add_argument("--state", help="directory for checkpoints (rank<R>.pt)")
    p.add_argument("--save-at", help="EPOCH:STEP after which to save a checkpoint")
    p.add_argument("--resume", action="store_true", help="start from the --state checkpoint")
    return p.parse_args()


def main():
    a = parse_args()
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=a.timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    ds = rollcache.data.FeederDataset(a.data, schema=a.schema, batch_size=a.batch_size,
                                      shuffle=True, seed=a.seed, drop_last=a.drop_last,
                                      wait_timeout=a.timeout)
    loader = torch.utils.data.DataLoader(ds, batch_size=None)
    nx = int(a.schema.split("[", 1)[1].split("]", 1)[0])
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(nx, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    start = 0
    if a.resume:
        st = torch.load(os.path.join(a.state, "rank%d.pt" % rank))
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        ds.load_state_dict(st["data"])
        start = st["data"]["epoch"]
    save_at = tuple(int(v) for v in a.save_at.split(":")) if a.save_at else None
    log = None
    if a.log:
        os.makedirs(a.log, exist_ok=True)
        log = open(os.path.join(a.log, "rank%d.jsonl" % rank), "a")
    for epoch in range(start, a.epochs):
        ds.set_epoch(epoch)  # a resumed epoch keeps its position
        steps, loss = 0, torch.zeros(())
        for b in loader:
            x, y = b["x"], b["y"].float().squeeze(1) / 1000
            loss = F.mse_loss(model(x).squeeze(1), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            steps += 1
            step = ds.state_dict()["batch"]  # batches of this epoch done
            if log:
                log.write(json.dumps({"epoch": epoch, "mount_epoch": ds.feeder.mount_epoch,
                                      "step": step, "ids": record_ids(x)}) + "\n")
            if save_at == (epoch, step):
                os.makedirs(a.state, exist_ok=True)
                torch.save({"model": model.state_dict(), "opt": opt.state_dict(),
                            "data": ds.state_dict()}, os.path.join(a.state, "rank%d.pt" % rank))
        print("rank %d/%d: epoch %d (mount epoch %s): %d steps, loss %.4f"
              % (rank, world, epoch, ds.feeder.mount_epoch, steps, float(loss)), flush=True)
    if log:
        log.close()
    dist.barrier()
    ds.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
