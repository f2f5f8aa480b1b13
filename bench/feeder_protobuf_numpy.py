#!/usr/bin/python3
"""Peer baseline: python3-protobuf + numpy decoding TFRecord tf.Examples in a
plain loop (what a script without TensorFlow does), batching with np.stack.

usage: feeder_protobuf_numpy.py PATH --schema SPEC --batch N
          [--epochs E] [--warmup W] [--step-ms MS] [--max-batches N]

The consumer "computes" for --step-ms per batch; the wait per batch is the
time spent producing it (the loop has no prefetch).  Compare with
`rollcache-bench feeder` on the same files (docs/bench-feeder.md).
"""
import argparse
import time

import numpy as np

import feeder_peer_common as pc


def run_epoch(files, ex_cls, feats, batch, meter, step_s, max_batches, measure):
    buf = []
    nb = 0
    t = time.monotonic()
    for path in files:
        for payload in pc.records(path):
            buf.append(pc.decode(ex_cls, payload, feats))
            if measure:
                meter.records += 1
                meter.bytes += len(payload)
            if len(buf) == batch:
                out = {name: np.stack([r[name] for r in buf]) for name, _, _ in feats}
                buf = []
                if measure:
                    meter.waits.append(time.monotonic() - t)
                del out
                if step_s:
                    time.sleep(step_s)
                nb += 1
                if nb >= max_batches:
                    return
                t = time.monotonic()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--schema", required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--step-ms", type=float, default=0)
    ap.add_argument("--max-batches", type=int, default=1 << 60)
    a = ap.parse_args()
    ex_cls = pc.load_example_pb2().Example
    feats = pc.parse_schema(a.schema)
    files = pc.list_files(a.path)
    m = pc.Meter()
    for _ in range(a.warmup):
        run_epoch(files, ex_cls, feats, a.batch, m, 0, a.max_batches, False)
    m.start()
    for _ in range(a.epochs):
        run_epoch(files, ex_cls, feats, a.batch, m, a.step_ms / 1e3, a.max_batches, True)
    m.stop()
    from google.protobuf.internal import api_implementation
    m.report("peer: python3-protobuf + numpy loop: %s" % a.path,
             "(protobuf %s backend, batch %d, step %.0f ms)"
             % (api_implementation.Type(), a.batch, a.step_ms))


if __name__ == "__main__":
    main()
