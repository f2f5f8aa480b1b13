"""Shared pieces of the feeder's peer baselines (bench/feeder_*.py).

- example_pb2: tests/common/proto/{feature,example}.proto compiled with
  protoc at run time (Debian protobuf-compiler) and imported with Debian's
  python3-protobuf: the Python way of reading tf.Example without TensorFlow.
- TFRecord framing read in Python (length, skip the CRCs: a Python CRC32C
  would only make the peers slower; the native feeder is measured both with
  and without its CRC check).
- the schema subset the benchmarks use: name:dtype[d0,d1,...] (fixed shapes).
- the figures, printed like `rollcache-bench feeder`.
"""
import gzip
import os
import re
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
PROTO_DIR = os.path.join(HERE, "..", "tests", "common", "proto")


def load_example_pb2():
    out = tempfile.mkdtemp(prefix="rc-bench-pb-")
    try:
        subprocess.check_call(["protoc", "-I", PROTO_DIR, "--python_out", out,
                               os.path.join(PROTO_DIR, "feature.proto"),
                               os.path.join(PROTO_DIR, "example.proto")])
        sys.path.insert(0, out)
        import example_pb2  # noqa: F401
        return example_pb2
    finally:
        shutil.rmtree(out, ignore_errors=True)


DT = {"float32": np.float32, "float": np.float32, "int64": np.int64, "uint8": np.uint8}


def parse_schema(spec):
    feats = []
    for m in re.finditer(r"\s*([^:,\s]+)\s*:\s*(\w+)\s*(?:\[([0-9,\s]*)\])?\s*(?:,|$)", spec):
        name, dt, shape = m.group(1), m.group(2), m.group(3)
        dims = tuple(int(x) for x in shape.split(",")) if shape and shape.strip() else ()
        feats.append((name, DT[dt], dims))
    return feats


def list_files(path):
    if os.path.isdir(path):
        return sorted(os.path.join(path, n) for n in os.listdir(path)
                      if not n.startswith(".") and os.path.isfile(os.path.join(path, n)))
    import glob
    return sorted(glob.glob(path)) or [path]


def records(path):
    """Yields the payloads of one TFRecord file (GZIP detected by magic)."""
    with open(path, "rb") as fh:
        magic = fh.read(2)
    opener = gzip.open if magic == b"\x1f\x8b" else open
    with opener(path, "rb") as fh:
        while True:
            hdr = fh.read(12)
            if len(hdr) < 12:
                return
            (n,) = struct.unpack("<Q", hdr[:8])
            payload = fh.read(n)
            fh.read(4)
            yield payload


def decode(ex_cls, payload, feats):
    """One record -> dict of numpy arrays (values through protobuf objects)."""
    ex = ex_cls.FromString(payload)
    fm = ex.features.feature
    out = {}
    for name, dt, dims in feats:
        f = fm[name]
        kind = f.WhichOneof("kind")
        if kind == "float_list":
            a = np.array(f.float_list.value, dtype=dt)
        elif kind == "int64_list":
            a = np.array(f.int64_list.value, dtype=dt)
        else:
            a = np.frombuffer(b"".join(f.bytes_list.value), dtype=dt)
        out[name] = a.reshape(dims) if dims else a.reshape(())
    return out


class Meter:
    """Wall time, CPU time (this process + waited-for children), waits."""

    def start(self):
        self.t0 = time.monotonic()
        self.c0 = self._cpu()
        self.waits = []
        self.records = 0
        self.bytes = 0

    @staticmethod
    def _cpu():
        s = resource.getrusage(resource.RUSAGE_SELF)
        c = resource.getrusage(resource.RUSAGE_CHILDREN)
        return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime

    def stop(self):
        self.secs = time.monotonic() - self.t0
        self.cpu = self._cpu() - self.c0

    def report(self, title, extra=""):
        w = sorted(self.waits)
        mean = sum(w) / len(w) if w else 0
        p99 = w[int((len(w) - 1) * 0.99)] if w else 0
        gb = self.bytes / 1e9
        print("%s %s" % (title, extra))
        print("  %-28s %14s" % ("metric", "value"))
        print("  %-28s %14d" % ("batches", len(w)))
        print("  %-28s %14d" % ("records", self.records))
        print("  %-28s %14.3f" % ("seconds", self.secs))
        print("  %-28s %14.0f" % ("records/s", self.records / self.secs if self.secs else 0))
        print("  %-28s %14.1f" % ("MB/s (record payload)",
                                  self.bytes / 1e6 / self.secs if self.secs else 0))
        print("  %-28s %14.3f" % ("CPU-s per GB", self.cpu / gb if gb else 0))
        print("  %-28s %14.3f" % ("wait mean ms/batch", mean * 1e3))
        print("  %-28s %14.3f" % ("wait p99 ms/batch", p99 * 1e3))
        sys.stdout.flush()
