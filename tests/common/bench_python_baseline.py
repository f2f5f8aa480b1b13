#!/usr/bin/python3
"""bench_python_baseline.py - the peer baseline for the decoder figures:
python3-protobuf + numpy decoding tf.Examples of a TFRecord file in a plain
loop (what a Python input pipeline does without native help).

  /usr/bin/python3 tests/common/bench_python_baseline.py FILE.tfrecord SPEC [SECONDS]

SPEC is a schema string (fixed features only, e.g. x:float32[4000],y:int64[1]).
Prints records/s, MB/s and CPU seconds per GB of payload, in the same form
as `example_dump bench`.  Not a test: timings are never asserted.
"""
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np


def main():
    path, spec = sys.argv[1], sys.argv[2]
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 3.0
    tmp = tempfile.mkdtemp()
    try:
        proto = os.path.join(os.path.dirname(os.path.abspath(__file__)), "proto")
        subprocess.run(["protoc", "--python_out=" + tmp, "-I" + proto, "feature.proto",
                        "example.proto"], check=True)
        sys.path.insert(0, tmp)
        import example_pb2
    finally:
        pass
    feats = []
    for name, dtype, shape in re.findall(r"([^:,]+):(\w+)\[([^\]]*)\]", spec):
        feats.append((name, np.float32 if dtype.startswith("float") else np.int64,
                      "float_list" if dtype.startswith("float") else "int64_list"))
    data = open(path, "rb").read()
    recs, off = [], 0
    while off < len(data):
        (n,) = struct.unpack_from("<Q", data, off)
        recs.append(data[off + 12:off + 12 + n])
        off += 16 + n
    payload = sum(map(len, recs))
    w0, c0 = time.monotonic(), time.process_time()
    done = 0
    while True:
        for r in recs:
            ex = example_pb2.Example.FromString(r)
            fm = ex.features.feature
            for name, dt, kind in feats:
                np.array(getattr(fm[name], kind).value, dtype=dt)
        done += 1
        w1 = time.monotonic()
        if w1 - w0 >= seconds:
            break
    cpu = time.process_time() - c0
    n = done * len(recs)
    b = done * payload
    print("records %d  MB %.1f  wall_s %.3f  records/s %.0f  MB/s %.1f  cpu_s/GB %.4f" %
          (n, b / 1e6, w1 - w0, n / (w1 - w0), b / 1e6 / (w1 - w0), cpu / (b / 1e9)))
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
