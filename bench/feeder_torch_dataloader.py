#!/usr/bin/python3
"""Peer baseline: a PyTorch DataLoader (Debian python3-torch) over the same
TFRecord files: an IterableDataset whose workers split the files, decode each
tf.Example with python3-protobuf + numpy, and the default collate + pin_memory.

usage: feeder_torch_dataloader.py PATH --schema SPEC --batch N
          [--workers 2] [--epochs E] [--warmup W] [--step-ms MS] [--max-batches N]

Wait per batch = time the consumer spends in next() on the loader.
"""
import argparse
import time
import warnings

import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

import feeder_peer_common as pc

_EX = None


class TFRecordExamples(IterableDataset):
    def __init__(self, files, feats):
        self.files, self.feats = files, feats

    def __iter__(self):
        global _EX
        if _EX is None:
            _EX = pc.load_example_pb2().Example
        wi = get_worker_info()
        files = self.files if wi is None else self.files[wi.id::wi.num_workers]
        for path in files:
            for payload in pc.records(path):
                d = pc.decode(_EX, payload, self.feats)
                yield {k: torch.from_numpy(v) for k, v in d.items()}, len(payload)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--schema", required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--step-ms", type=float, default=0)
    ap.add_argument("--max-batches", type=int, default=1 << 60)
    a = ap.parse_args()
    warnings.filterwarnings("ignore", message=".*pin_memory.*")
    feats = pc.parse_schema(a.schema)
    ds = TFRecordExamples(pc.list_files(a.path), feats)
    dl = DataLoader(ds, batch_size=a.batch, num_workers=a.workers, pin_memory=True)
    m = pc.Meter()

    def epoch(measure):
        it = iter(dl)
        nb = 0
        while nb < a.max_batches:
            t = time.monotonic()
            try:
                batch, sizes = next(it)
            except StopIteration:
                break
            if measure:
                m.waits.append(time.monotonic() - t)
                m.records += len(sizes)
                m.bytes += int(sizes.sum())
            del batch
            if measure and a.step_ms:
                time.sleep(a.step_ms / 1e3)
            nb += 1
        del it  # workers exit and are waited for: their CPU time is counted

    for _ in range(a.warmup):
        epoch(False)
    m.start()
    for _ in range(a.epochs):
        epoch(True)
    m.stop()
    m.report("peer: torch DataLoader: %s" % a.path,
             "(torch %s, %d workers, pin_memory=%s, batch %d, step %.0f ms)"
             % (torch.__version__, a.workers,
                "True (pinning active)" if torch.cuda.is_available() else "True (no CUDA: torch skips it)",
                a.batch, a.step_ms))


if __name__ == "__main__":
    main()
