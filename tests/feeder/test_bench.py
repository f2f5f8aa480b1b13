#!/usr/bin/python3
"""`rollcache-bench feeder` and the peer baselines run and count what they
read (no timing is asserted).

usage: test_bench.py FDR_GEN ROLLCACHE_BENCH

The protobuf+numpy peer needs protoc and python3-protobuf (scripts/deps.sh
installs them): without them the test fails with one line.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

SPEC = "x:float32[64],y:int64[1]"


def metric(out, name):
    m = re.search(r"^\s*%s\s+([0-9.]+)\s*$" % re.escape(name), out, re.M)
    assert m, "no '%s' in:\n%s" % (name, out)
    return float(m.group(1))


def main():
    gen, bench = sys.argv[1], sys.argv[2]
    src = os.environ.get("RC_SRCDIR", os.path.join(os.path.dirname(__file__), "..", ".."))
    d = tempfile.mkdtemp(prefix="rc-feeder-bench-")
    try:
        subprocess.check_call([gen, d, SPEC, "3", "100"])
        out = subprocess.run([bench, "feeder", d, "--schema", SPEC, "--batch", "16",
                              "--epochs", "2", "--shuffle"],
                             check=True, capture_output=True, text=True).stdout
        assert metric(out, "records") == 600, out  # 2 measured epochs x 300
        assert metric(out, "batches") == 2 * 19, out  # 18 full + 1 short per epoch
        assert metric(out, "records/s") > 0, out
        assert metric(out, "allocations (measured)") == 0, out
        bad = subprocess.run([bench, "feeder", d, "--batch", "4"],
                             capture_output=True, text=True)
        assert bad.returncode == 2, bad
        print("ok: rollcache-bench feeder")
        if shutil.which("protoc") is None:
            print("FAIL: protoc is not installed: run scripts/deps.sh "
                  "(apt-get install protobuf-compiler)")
            return 1
        try:
            import google.protobuf  # noqa: F401
        except ImportError:
            print("FAIL: python3-protobuf is not installed: run scripts/deps.sh "
                  "(apt-get install python3-protobuf)")
            return 1
        peer = os.path.join(src, "bench", "feeder_protobuf_numpy.py")
        out = subprocess.run([sys.executable, peer, d, "--schema", SPEC, "--batch", "16"],
                             check=True, capture_output=True, text=True).stdout
        assert metric(out, "records") == 300, out  # one epoch
        assert metric(out, "batches") == 18, out  # full batches (the loop drops the rest)
        print("ok: protobuf+numpy peer")
        return 0
    finally:
        shutil.rmtree(d)


if __name__ == "__main__":
    sys.exit(main())
