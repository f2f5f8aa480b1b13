#!/usr/bin/python3
"""make_seeds.py - writes the committed seed corpora of the fuzz targets.

  seeds/example/   a selector byte + a tf.Example (hand-built with the
                   helpers of tests/common/oracle_random.py, and the records
                   of the real pytorch/data file), and a few schema strings
  seeds/tfrecord/  a chunk-size byte + whole TFRecord files of
                   ../shared/testdata (plain and GZIP), a truncated one and
                   one with a flipped payload bit

Run from anywhere: /usr/bin/python3 tests/common/make_seeds.py [TESTDATA_DIR].
The outputs are small (a few KiB in all) and deterministic.
"""
import os
import random
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # oracle_random.py lives beside this file
import oracle_random as o  # noqa: E402


def write(d, name, data):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def payloads(path):
    data = open(path, "rb").read()
    out, off = [], 0
    while off + 12 <= len(data):
        (n,) = struct.unpack_from("<Q", data, off)
        out.append(data[off + 12:off + 12 + n])
        off += 16 + n
    return out


def main():
    testdata = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "..",
                                                                  "shared", "testdata")
    ex_dir = os.path.join(HERE, "seeds", "example")
    tf_dir = os.path.join(HERE, "seeds", "tfrecord")
    rng = random.Random(7)
    for i in range(8):
        feats = []
        for name, kind in [("a", 2), ("b", 3), ("c", 1), ("d", 1), ("x_int", 3), ("e", 0)]:
            if rng.random() < 0.7:
                feats.append(o.ld(1, o.entry_payload(rng, name, kind,
                                                     o.rand_values(rng, kind, rng.randrange(0, 5)))))
        ex = o.sprinkle(rng, [o.ld(1, o.sprinkle(rng, feats, [1]))], [1])
        write(ex_dir, "hand-%d" % i, bytes([i]) + ex)
    # Duplicate keys (last wins), a oneof switch, a split value: selector 0
    # picks the schema with a, b, c, d.
    dup = [o.ld(1, o.ld(1, b"a") + o.ld(2, o.ld(2, o.ld(1, struct.pack("<ff", 1, 2))))),
           o.ld(1, o.ld(1, b"b") + o.ld(2, o.ld(3, o.ld(1, o.varint(5))))),
           o.ld(1, o.ld(1, b"a") + o.ld(2, o.ld(2, o.ld(1, struct.pack("<ff", 3, 4))))),
           o.ld(1, o.ld(1, b"c") + o.ld(2, o.ld(1, o.ld(1, b"x")) + o.ld(1, o.ld(1, b"yz")))),
           o.ld(1, o.ld(1, b"d") + o.ld(2, o.ld(3, o.ld(1, b"\x01\x02\x03")))),
           o.ld(1, o.ld(1, b"b") + o.ld(2, o.ld(2, b"") + o.ld(3, o.ld(1, o.varint(-7)))))]
    write(ex_dir, "dup-keys", bytes([0]) + o.ld(1, b"".join(dup)))
    pt = os.path.join(testdata, "example__pytorch_data__example.tfrecord")
    if os.path.exists(pt):
        for i, p in enumerate(payloads(pt)[:2]):
            write(ex_dir, "pytorch-%d" % i, bytes([1]) + p)
    for i, spec in enumerate([b"x:float32[4,1000000,3],y:int64[1],ids:int64[],img:bytes",
                              b"label:int64=0,mask:uint8[16]=255,w:float32[2]=-1.5,ids:int64[]=[]",
                              b"img:bytes=\"\",n:float32=nan"]):
        write(ex_dir, "schema-%d" % i, bytes([200]) + spec)
    for name in ["example__pytorch_data__example.tfrecord",
                 "example_gzip__tfx__penguin_Split-eval_data_tfrecord-00000-of-00001.gz",
                 "raw__magenta__tfrecord_iterator_test.tfrecord"]:
        path = os.path.join(testdata, name)
        if not os.path.exists(path):
            continue
        data = open(path, "rb").read()
        write(tf_dir, name.split("__")[0] + "-" + str(len(data)), bytes([5]) + data)
        if name.startswith("raw"):
            write(tf_dir, "truncated", bytes([0]) + data[:-3])
            flipped = bytearray(data)
            flipped[14] ^= 0x10
            write(tf_dir, "bad-crc", bytes([2]) + bytes(flipped))


if __name__ == "__main__":
    main()
