#!/usr/bin/python3
"""oracle_random.py - the tf.Example decoder agrees with python3-protobuf.

Compiles tests/common/proto/{feature,example}.proto with protoc into a
temporary directory and uses Debian's python3-protobuf as the oracle.

1. Writes --count random Examples (default 10000) built byte by byte: random
   feature sets and names (UTF-8, the empty name too), packed, unpacked and
   mixed repeated values split over several fields, empty lists and empty
   Feature messages, negative and extreme int64s (10-byte varints), float
   specials, unknown fields of every wire type at every level, known fields
   with a wrong wire type, duplicate map keys, a `features` field given twice,
   map entries with the value before the key, repeated keys and split values,
   and oneof kind switches.  A third of them are plain SerializeToString()
   output.  The truth for every record is what protobuf parses from the bytes.
2. Runs example_dump (the C side) in `iter` mode (every feature, last entry
   wins) and in `schema` mode (cmn_ex_decode with a schema whose features the
   records carry, mostly right, sometimes with a wrong kind or count, or
   missing) and compares the canonical text line by line with what this
   script derives from protobuf's parse.
3. Does the same for the Example files of $RC_TESTDATA (the .gz one through
   Python's gzip module), so real TensorFlow-written files are covered too.

Exits 0 when all agree, 1 at the first difference (with the record's bytes)
or with one line when protoc, python3-protobuf or $RC_EXAMPLE_DUMP is
missing (scripts/deps.sh installs the packages, meson test sets the
variable): never 77.  missing() and need_protobuf() serve the other
oracles too.
"""
import argparse
import gzip
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile


def missing(what, fix):
    """A package scripts/deps.sh installs or a part meson builds is absent:
    the machine or the build is broken, so the test fails (exit 1) with one
    line, "FAIL: WHAT: FIX"."""
    print("FAIL: " + " ".join(("%s: %s" % (what, fix)).split()))
    sys.exit(1)


def need_protobuf():
    """protoc and python3-protobuf, the oracle, or a one-line failure."""
    if not shutil.which("protoc"):
        missing("protoc is not installed",
                "run scripts/deps.sh (apt-get install protobuf-compiler)")
    try:
        import google.protobuf  # noqa: F401
    except ImportError:
        missing("python3-protobuf is not installed",
                "run scripts/deps.sh (apt-get install python3-protobuf)")


def need_example_dump():
    """$RC_EXAMPLE_DUMP, the C side (meson test sets it), or a one-line failure."""
    if "RC_EXAMPLE_DUMP" not in os.environ:
        missing("RC_EXAMPLE_DUMP (the example_dump program) is not set",
                "run the test through meson test, which sets it")


# ---- wire helpers ---------------------------------------------------------

def varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def tag(num, wt):
    return varint((num << 3) | wt)


def ld(num, payload):
    return tag(num, 2) + varint(len(payload)) + payload


def unknown_field(rng, known, valid_wt=(2,)):
    """A field this level does not know: another number, or a known number
    with a wire type protobuf does not expect there (also skipped).
    valid_wt: the wire types the known numbers accept."""
    wt = rng.choice([0, 1, 2, 5])
    if known and rng.random() < 0.3:
        num = rng.choice(known)
        wt = rng.choice([w for w in (0, 1, 2, 5) if w not in valid_wt])
    else:
        num = rng.choice([n for n in (4, 5, 7, 15, 16, 100, 2047, 536870911) if n not in known])
    if wt == 0:
        return tag(num, 0) + varint(rng.choice([0, 1, 300, -1, 1 << 63]))
    if wt == 1:
        return tag(num, 1) + rng.randbytes(8)
    if wt == 5:
        return tag(num, 5) + rng.randbytes(4)
    return ld(num, rng.randbytes(rng.randrange(0, 6)))


def sprinkle(rng, parts, known, p=0.15, valid_wt=(2,)):
    """Inserts unknown fields between the byte strings of parts."""
    out = []
    for part in parts:
        if rng.random() < p:
            out.append(unknown_field(rng, known, valid_wt))
        out.append(part)
    if rng.random() < p:
        out.append(unknown_field(rng, known, valid_wt))
    return b"".join(out)


# ---- random values --------------------------------------------------------

def rand_float_bits(rng):
    r = rng.random()
    if r < 0.1:
        return rng.choice([0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000,
                           0xFFC00000, 0x00000001, 0x7F7FFFFF, 0x3F800000])
    while True:
        b = rng.getrandbits(32)
        if (b & 0x7F800000) != 0x7F800000:  # no NaN payloads, no inf here
            return b


def rand_int64(rng):
    r = rng.random()
    if r < 0.15:
        return rng.choice([0, 1, -1, 127, 128, -128, (1 << 63) - 1, -(1 << 63), 255, 256])
    if r < 0.5:
        return rng.randrange(-1000, 1000)
    if r < 0.7:
        return rng.randrange(0, 256)
    return rng.getrandbits(64) - (1 << 63)


def rand_bytes(rng):
    return rng.randbytes(rng.choice([0, 0, 1, 3, 8, 20]))


def rand_values(rng, kind, n):
    if kind == 1:
        return [rand_bytes(rng) for _ in range(n)]
    if kind == 2:
        return [rand_float_bits(rng) for _ in range(n)]
    return [rand_int64(rng) for _ in range(n)]


# ---- hand-built messages --------------------------------------------------

def chunks(rng, values):
    """Splits values into 1..3 consecutive chunks (some possibly empty)."""
    if not values or rng.random() < 0.6:
        return [values]
    cuts = sorted(rng.randrange(0, len(values) + 1) for _ in range(rng.randrange(1, 3)))
    out, prev = [], 0
    for c in cuts + [len(values)]:
        out.append(values[prev:c])
        prev = c
    return out


def list_payload(rng, kind, values):
    """An XxxList message for values: packed/unpacked/mixed, split, unknowns."""
    parts = []
    if kind == 1:
        parts = [ld(1, v) for v in values]
    else:
        for ch in chunks(rng, values):
            packed = rng.random() < 0.6
            if kind == 2:
                if packed:
                    if ch or rng.random() < 0.3:
                        parts.append(ld(1, b"".join(struct.pack("<I", b) for b in ch)))
                else:
                    parts.extend(tag(1, 5) + struct.pack("<I", b) for b in ch)
            else:
                if packed:
                    if ch or rng.random() < 0.3:
                        parts.append(ld(1, b"".join(varint(v) for v in ch)))
                else:
                    parts.extend(tag(1, 0) + varint(v) for v in ch)
    valid = {1: (2,), 2: (2, 5), 3: (0, 2)}[kind]
    return sprinkle(rng, parts, [1], valid_wt=valid)


def feature_payload(rng, kind, values):
    """A Feature message whose final value is (kind, values); kind 0: empty."""
    parts = []
    if kind == 0:
        pass
    else:
        r = rng.random()
        if r < 0.1:
            # A different kind first: the oneof switch clears it.
            other = rng.choice([k for k in (1, 2, 3) if k != kind])
            parts.append(ld(other, list_payload(rng, other, rand_values(rng, other, 2))))
        if r > 0.9 and values:
            # The same kind split in two fields: protobuf merges them.
            cut = rng.randrange(0, len(values) + 1)
            parts.append(ld(kind, list_payload(rng, kind, values[:cut])))
            parts.append(ld(kind, list_payload(rng, kind, values[cut:])))
        else:
            parts.append(ld(kind, list_payload(rng, kind, values)))
    return sprinkle(rng, parts, [1, 2, 3])


def entry_payload(rng, name, kind, values):
    key = name.encode("utf-8")
    feat = feature_payload(rng, kind, values)
    r = rng.random()
    if r < 0.05:
        parts = [ld(1, b"decoy"), ld(2, feat), ld(1, key)]  # last key wins
    elif r < 0.15:
        parts = [ld(2, feat), ld(1, key)]  # value first
    elif r < 0.2 and name == "":
        parts = [ld(2, feat)]  # no key at all: the name is ""
    elif r < 0.25:
        # The value field given twice: the two halves merge.  Split the
        # Feature at a field boundary by building it from two halves.
        half1 = feature_payload(rng, 0, [])
        parts = [ld(1, key), ld(2, half1), ld(2, feat)]
    else:
        parts = [ld(1, key), ld(2, feat)]
    return sprinkle(rng, parts, [1, 2], p=0.1)


NAMES = ["x", "y", "ids", "img", "label", "a/b", "\u00e9t\u00e9", "\u6f22\u5b57", "",
         "long_" + "n" * 40, "f0", "f1", "f2"]

SCHEMA = "sf:float32[3],si:int64[2],sr:int64[],sb:bytes,su:uint8[4],sd:int64[2]=7,sg:float32[],sn:float32=0.5"
SCHEMA_FEATURES = [  # name, dtype, count (None: ragged), default
    ("sf", "float32", 3, None), ("si", "int64", 2, None), ("sr", "int64", None, None),
    ("sb", "bytes", None, None), ("su", "uint8", 4, None), ("sd", "int64", 2, 7),
    ("sg", "float32", None, None), ("sn", "float32", 1, 0.5),
]
KIND_OF = {"float32": 2, "int64": 3, "bytes": 1, "uint8": 1}


def schema_feature_value(rng, dtype, count, clean):  # noqa: C901
    """(kind, values) for a schema feature: right when clean, else sometimes wrong."""
    r = rng.random()
    if clean:
        r = 0.5
    if r < 0.03:
        return None  # missing
    if r < 0.06:
        return (0, [])  # empty Feature
    kind = KIND_OF[dtype]
    if dtype == "uint8" and rng.random() < 0.3:
        kind = 3  # int64_list of bytes values
    if r > 0.97:
        kind = rng.choice([k for k in (1, 2, 3) if k != kind])
    if count is None:
        n = rng.randrange(0, 6)
    elif r > 0.94:
        n = count + rng.choice([-1, 1])
    else:
        n = count
    if dtype == "uint8" and kind == 1:
        # Bytes of total length n, in one or two strings.
        data = rng.randbytes(max(n, 0))
        if n > 1 and rng.random() < 0.3:
            return (1, [data[:1], data[1:]])
        return (1, [data])
    if dtype == "uint8" and kind == 3:
        vals = [rng.randrange(0, 256) for _ in range(max(n, 0))]
        if vals and not clean and rng.random() < 0.1:
            vals[0] = rng.choice([256, -1])
        return (3, vals)
    return (kind, rand_values(rng, kind, max(n, 0)))


def random_record(rng, ex_cls, with_schema):
    feats = []  # (name, kind, values) in map order
    for _ in range(rng.randrange(0, 6)):
        kind = rng.choice([0, 1, 2, 2, 3, 3])
        feats.append((rng.choice(NAMES), kind, rand_values(rng, kind, rng.randrange(0, 12))))
    if with_schema:
        clean = rng.random() < 0.5
        for name, dtype, count, _ in SCHEMA_FEATURES:
            kv = schema_feature_value(rng, dtype, count, clean)
            if kv is not None:
                feats.append((name, kv[0], kv[1]))
        rng.shuffle(feats)
    if rng.random() < 0.33:
        # The plain serializer, as TensorFlow writes records.
        ex = ex_cls()
        for name, kind, values in feats:
            f = ex.features.feature[name]
            if kind == 1:
                f.bytes_list.value.extend(values)
            elif kind == 2:
                f.float_list.value.extend(struct.unpack("<f", struct.pack("<I", b))[0]
                                          for b in values)
            elif kind == 3:
                f.int64_list.value.extend(values)
            else:
                f.SetInParent()
        return ex.SerializeToString()
    entries = [ld(1, entry_payload(rng, n, k, v)) for n, k, v in feats]
    if entries and rng.random() < 0.1:
        # A duplicate key later in the map: it replaces the earlier entry.
        n, k, v = rng.choice(feats)
        k2 = rng.choice([0, 1, 2, 3])
        entries.append(ld(1, entry_payload(rng, n, k2, rand_values(rng, k2, 3))))
    if len(entries) > 1 and rng.random() < 0.1:
        cut = rng.randrange(1, len(entries))
        fields = [ld(1, sprinkle(rng, entries[:cut], [1])),
                  ld(1, sprinkle(rng, entries[cut:], [1]))]
    else:
        fields = [ld(1, sprinkle(rng, entries, [1]))]
    if not feats and rng.random() < 0.5:
        fields = []
    return sprinkle(rng, fields, [1])


# ---- expected text from protobuf's parse -----------------------------------

def fbits(x):
    return "%08x" % struct.unpack("<I", struct.pack("<f", x))[0]


def hexs(b):
    return b.hex() if b else "-"


def expect_iter(ex):
    lines = []
    fmap = ex.features.feature
    for key in sorted(fmap.keys(), key=lambda k: k.encode("utf-8")):
        f = fmap[key]
        kind = f.WhichOneof("kind") or "none"
        if kind == "float_list":
            vals = [fbits(v) for v in f.float_list.value]
        elif kind == "int64_list":
            vals = [str(v) for v in f.int64_list.value]
        elif kind == "bytes_list":
            vals = [hexs(v) for v in f.bytes_list.value]
        else:
            vals = []
        lines.append(" ".join([hexs(key.encode("utf-8")), kind, str(len(vals))] + vals))
    return lines


def expect_schema(ex):
    fmap = ex.features.feature
    lines = []
    for name, dtype, count, default in SCHEMA_FEATURES:
        f = fmap[name] if name in fmap else None
        kind = f.WhichOneof("kind") if f is not None else None
        if kind is None:
            if default is None:
                return ["ERR ENOENT"]
            if count is None:
                lines.append(name + " 0")
            elif dtype == "float32":
                lines.append(" ".join([name, str(count)] + [fbits(default)] * count))
            else:
                lines.append(" ".join([name, str(count)] + [str(default)] * count))
            continue
        want = {"float32": "float_list", "int64": "int64_list", "bytes": "bytes_list",
                "uint8": "bytes_list"}[dtype]
        if kind != want and not (dtype == "uint8" and kind == "int64_list"):
            return ["ERR EINVAL"]
        if dtype == "bytes":
            vals = list(f.bytes_list.value)
            lines.append("%s %d %s" % (name, len(vals), hexs(b"".join(vals))))
            continue
        if dtype == "uint8":
            if kind == "bytes_list":
                vals = list(b"".join(f.bytes_list.value))
            else:
                vals = list(f.int64_list.value)
        elif dtype == "float32":
            vals = list(f.float_list.value)
        else:
            vals = list(f.int64_list.value)
        if count is not None and len(vals) != count:
            return ["ERR EINVAL"]
        if dtype == "uint8" and any(v < 0 or v > 255 for v in vals):
            return ["ERR ERANGE"]
        if dtype == "float32":
            vals = [fbits(v) for v in vals]
        else:
            vals = [str(v) for v in vals]
        lines.append(" ".join([name, str(len(vals))] + vals))
    return lines


# ---- running the C side ----------------------------------------------------

def write_records(path, records):
    with open(path, "wb") as f:
        for r in records:
            f.write(struct.pack("<I", len(r)))
            f.write(r)


def run_dump(args):
    out = subprocess.run([os.environ["RC_EXAMPLE_DUMP"]] + args, check=True,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout
    recs, cur = [], None
    for line in out.decode("ascii").splitlines():
        if line.startswith("R "):
            cur = []
            recs.append(cur)
        else:
            cur.append(line)
    return recs


def compare(label, records, got, want):
    if len(got) != len(want):
        print("%s: C printed %d records, expected %d" % (label, len(got), len(want)))
        return False
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            print("%s: record %d differs\n  bytes: %s" % (label, i, records[i].hex()))
            print("  C:        " + "\n            ".join(g))
            print("  protobuf: " + "\n            ".join(w))
            return False
    return True


def read_tfrecord_payloads(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    out, off = [], 0
    while off < len(data):
        (n,) = struct.unpack_from("<Q", data, off)
        out.append(data[off + 12:off + 12 + n])
        off += 12 + n + 4
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=20261122)
    args = ap.parse_args()

    need_protobuf()
    need_example_dump()
    proto_dir = os.path.join(os.environ.get("RC_PROTO_DIR", os.path.dirname(__file__)), "proto")

    tmp = tempfile.mkdtemp(prefix="rc-oracle-")
    try:
        subprocess.run(["protoc", "--python_out=" + tmp, "-I" + proto_dir,
                        "feature.proto", "example.proto"], check=True)
        sys.path.insert(0, tmp)
        import example_pb2
        from google.protobuf.message import DecodeError

        rng = random.Random(args.seed)
        records, want_iter, want_schema = [], [], []
        stats = {"parse_errors": 0}
        for i in range(args.count):
            rec = random_record(rng, example_pb2.Example, with_schema=(i % 2 == 1))
            records.append(rec)
            try:
                ex = example_pb2.Example.FromString(rec)
            except DecodeError:
                stats["parse_errors"] += 1
                want_iter.append(["ERR EBADMSG"])
                want_schema.append(["ERR EBADMSG"])
                continue
            want_iter.append(expect_iter(ex))
            want_schema.append(expect_schema(ex))
        path = os.path.join(tmp, "random.records")
        write_records(path, records)
        ok = compare("iter", records, run_dump(["iter", path]), want_iter)
        ok = ok and compare("schema " + SCHEMA, records, run_dump(["schema", SCHEMA, path]),
                            want_schema)
        n_err = sum(1 for w in want_schema if w[0].startswith("ERR"))
        print("random Examples: %d records, %d bytes, %d protobuf parse errors, "
              "%d schema decode errors expected" % (len(records), sum(map(len, records)),
                                                    stats["parse_errors"], n_err))

        testdata = os.environ.get("RC_TESTDATA", "")
        files = ["example__pytorch_data__example.tfrecord",
                 "example_gzip__tfx__penguin_Split-eval_data_tfrecord-00000-of-00001.gz"]
        if ok and os.path.isdir(testdata):
            for name in files:
                recs = read_tfrecord_payloads(os.path.join(testdata, name))
                want = [expect_iter(example_pb2.Example.FromString(r)) for r in recs]
                p = os.path.join(tmp, name + ".records")
                write_records(p, recs)
                ok = ok and compare(name, recs, run_dump(["iter", p]), want)
                print("%s: %d records agree" % (name, len(recs)) if ok else name)
        elif ok:
            print("FAIL: $RC_TESTDATA (%s) is not a directory of real files" % testdata)
            ok = False
        if not ok:
            return 1
        print("OK: the C decoder agrees with python3-protobuf")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
