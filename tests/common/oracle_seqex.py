#!/usr/bin/python3
"""oracle_seqex.py - the tf.SequenceExample decoder agrees with python3-protobuf.

Compiles tests/common/proto/{feature,example}.proto (SequenceExample,
FeatureLists, FeatureList as TensorFlow defines them) with protoc and uses
Debian's python3-protobuf as the oracle, as oracle_random.py does for
tf.Example.

Writes --count random SequenceExamples built byte by byte with the pieces of
oracle_random.py (packed, unpacked and split lists, oneof switches, unknown
fields at every level) plus the SequenceExample's own merge cases: a
FeatureList value given twice in one entry (its steps concatenate), a
repeated feature_list key (the last entry wins), `feature_lists` given twice
(the maps merge), steps of the wrong kind or count, empty steps, missing
feature lists.  example_dump (the C side) decodes them with SCHEMA
(cmn_ex_decode) and the text it prints is compared line by line with what
this script derives from protobuf's parse, errors included (the first
failing feature in schema order; within a sequence feature every step's
kind and count are checked before any value's range).  Then the real
SequenceExample file of $RC_TESTDATA the same way.

Exits 0 when all agree, 1 at the first difference or with one line when
protoc, python3-protobuf or $RC_EXAMPLE_DUMP is missing (never 77).
"""
import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle_random as orr  # noqa: E402

SCHEMA = ("c:int64[2], sequence s:int64[3], sequence f:float32, "
          "sequence u:uint8[2]=[], cf:float32=1.5")
SEQ = [("s", "int64", 3, False), ("f", "float32", 1, False), ("u", "uint8", 2, True)]


def step_value(rng, dtype, count, clean):
    """(kind, values) of one step: right when clean, else sometimes wrong."""
    r = 0.5 if clean else rng.random()
    if r < 0.03:
        return (0, [])  # an empty Feature: no list
    kind = orr.KIND_OF[dtype]
    if dtype == "uint8" and rng.random() < 0.3:
        kind = 3
    if r > 0.98:
        kind = rng.choice([k for k in (1, 2, 3) if k != kind])
    n = count + rng.choice([-1, 1]) if r > 0.96 else count
    if dtype == "uint8" and kind == 1:
        data = rng.randbytes(max(n, 0))
        if n > 1 and rng.random() < 0.3:
            return (1, [data[:1], data[1:]])
        return (1, [data])
    if dtype == "uint8" and kind == 3:
        vals = [rng.randrange(0, 256) for _ in range(max(n, 0))]
        if vals and not clean and rng.random() < 0.05:
            vals[0] = rng.choice([256, -1])
        return (3, vals)
    return (kind, orr.rand_values(rng, kind, max(n, 0)))


def feature_list_payloads(rng, steps):
    """One or two FeatureList messages whose steps, concatenated, are `steps`."""
    feats = [orr.ld(1, orr.feature_payload(rng, k, v)) for k, v in steps]
    if len(feats) > 1 and rng.random() < 0.15:
        cut = rng.randrange(0, len(feats) + 1)
        return [orr.sprinkle(rng, feats[:cut], [1]), orr.sprinkle(rng, feats[cut:], [1])]
    return [orr.sprinkle(rng, feats, [1])]


def list_entry(rng, name, steps):
    key = name.encode("utf-8")
    parts = [orr.ld(1, key)] + [orr.ld(2, fl) for fl in feature_list_payloads(rng, steps)]
    if rng.random() < 0.1:
        parts = parts[1:] + parts[:1]  # the key last
    return orr.sprinkle(rng, parts, [1, 2], p=0.1)


def random_record(rng):
    clean = rng.random() < 0.5
    ctx = []
    kv = orr.schema_feature_value(rng, "int64", 2, clean)
    if kv is not None:
        ctx.append(("c", kv[0], kv[1]))
    if rng.random() < 0.5:
        ctx.append(("cf", 2, orr.rand_values(rng, 2, 1)))
    for _ in range(rng.randrange(0, 3)):
        k = rng.choice([0, 1, 2, 3])
        ctx.append((rng.choice(orr.NAMES), k, orr.rand_values(rng, k, rng.randrange(0, 4))))
    rng.shuffle(ctx)
    entries = []
    for name, dtype, count, _ in SEQ:
        if not clean and rng.random() < 0.05:
            continue  # missing feature list
        steps = [step_value(rng, dtype, count, clean) for _ in range(rng.randrange(0, 5))]
        entries.append(list_entry(rng, name, steps))
    for _ in range(rng.randrange(0, 2)):  # feature lists the schema does not name
        k = rng.choice([1, 2, 3])
        entries.append(list_entry(rng, rng.choice(["x", "s2", ""]),
                                  [(k, orr.rand_values(rng, k, 2))]))
    rng.shuffle(entries)
    if entries and rng.random() < 0.1:
        # an earlier entry of a schema key, replaced by the later one
        name, dtype, count, _ = rng.choice(SEQ)
        entries.insert(0, list_entry(rng, name, [step_value(rng, dtype, count, True)]))
    fields = [orr.ld(1, orr.sprinkle(rng, [orr.ld(1, orr.entry_payload(rng, n, k, v))
                                           for n, k, v in ctx], [1]))]
    if len(entries) > 1 and rng.random() < 0.15:
        cut = rng.randrange(1, len(entries))
        fields += [orr.ld(2, orr.sprinkle(rng, [orr.ld(1, e) for e in entries[:cut]], [1])),
                   orr.ld(2, orr.sprinkle(rng, [orr.ld(1, e) for e in entries[cut:]], [1]))]
    elif entries:
        fields.append(orr.ld(2, orr.sprinkle(rng, [orr.ld(1, e) for e in entries], [1])))
    if rng.random() < 0.5:
        fields.reverse()
    return orr.sprinkle(rng, fields, [1, 2])


def values_of(f, dtype):
    kind = f.WhichOneof("kind")
    if dtype == "uint8":
        return list(b"".join(f.bytes_list.value)) if kind == "bytes_list" \
            else list(f.int64_list.value)
    return list(f.float_list.value) if dtype == "float32" else list(f.int64_list.value)


def fmt(dtype, vals):
    return [orr.fbits(v) for v in vals] if dtype == "float32" else [str(v) for v in vals]


def expect(se):
    ctx = se.context.feature
    fl = se.feature_lists.feature_list
    lines = []
    # schema order: c, s, f, u, cf
    for name in ("c", "s", "f", "u", "cf"):
        if name == "c":
            f = ctx[name] if name in ctx else None
            kind = f.WhichOneof("kind") if f is not None else None
            if kind is None:
                return ["ERR ENOENT"]
            if kind != "int64_list" or len(f.int64_list.value) != 2:
                return ["ERR EINVAL"]
            lines.append(" ".join(["c", "2"] + fmt("int64", f.int64_list.value)))
            continue
        if name == "cf":
            f = ctx[name] if name in ctx else None
            kind = f.WhichOneof("kind") if f is not None else None
            if kind is None:
                lines.append("cf 1 " + orr.fbits(1.5))
            elif kind != "float_list" or len(f.float_list.value) != 1:
                return ["ERR EINVAL"]
            else:
                lines.append("cf 1 " + orr.fbits(f.float_list.value[0]))
            continue
        dtype, count, has_default = {n: (d, c, h) for n, d, c, h in SEQ}[name]
        if name not in fl:
            if not has_default:
                return ["ERR ENOENT"]
            lines.append(name + " 0")
            continue
        want = {"int64": "int64_list", "float32": "float_list", "uint8": "bytes_list"}[dtype]
        allv = []
        for step in fl[name].feature:
            kind = step.WhichOneof("kind")
            if kind != want and not (dtype == "uint8" and kind == "int64_list"):
                return ["ERR EINVAL"]
            vals = values_of(step, dtype)
            if len(vals) != count:
                return ["ERR EINVAL"]
            allv.append(vals)
        flat = [v for vals in allv for v in vals]
        if dtype == "uint8" and any(v < 0 or v > 255 for v in flat):
            return ["ERR ERANGE"]
        lines.append(" ".join([name, str(len(flat))] + fmt(dtype, flat)))
    return lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=20261125)
    args = ap.parse_args()
    orr.need_protobuf()
    orr.need_example_dump()
    proto_dir = os.path.join(os.environ.get("RC_PROTO_DIR", os.path.dirname(__file__)), "proto")
    tmp = tempfile.mkdtemp(prefix="rc-oracle-seqex-")
    try:
        subprocess.run(["protoc", "--python_out=" + tmp, "-I" + proto_dir,
                        "feature.proto", "example.proto"], check=True)
        sys.path.insert(0, tmp)
        import example_pb2
        from google.protobuf.message import DecodeError

        rng = random.Random(args.seed)
        records, want = [], []
        for _ in range(args.count):
            rec = random_record(rng)
            records.append(rec)
            try:
                se = example_pb2.SequenceExample.FromString(rec)
            except DecodeError:
                want.append(["ERR EBADMSG"])
                continue
            want.append(expect(se))
        path = os.path.join(tmp, "random.records")
        orr.write_records(path, records)
        ok = orr.compare("schema " + SCHEMA, records, orr.run_dump(["schema", SCHEMA, path]),
                         want)
        errs = {}
        for w in want:
            if w[0].startswith("ERR"):
                errs[w[0]] = errs.get(w[0], 0) + 1
        steps = sum(int(ln.split()[1]) for w in want for ln in w if ln.startswith("s "))
        print("random SequenceExamples: %d records, %d bytes, %d int64 step values of 's', "
              "errors expected: %s" % (len(records), sum(map(len, records)), steps, errs))

        real = os.path.join(os.environ.get("RC_TESTDATA", ""),
                            "seqex__pytorch_data__sequence_example.tfrecord")
        spec = ("x_int:int64[10], sequence x_int_seq:int64[10], "
                "sequence x_float_seq:float32[10], sequence x_byte_seq:uint8[8]")
        if ok and os.path.isfile(real):
            recs = orr.read_tfrecord_payloads(real)
            w = []
            for r in recs:
                se = example_pb2.SequenceExample.FromString(r)
                lines = [" ".join(["x_int", "10"] + fmt("int64", se.context.feature["x_int"]
                                                         .int64_list.value))]
                fl = se.feature_lists.feature_list
                for name, dtype in (("x_int_seq", "int64"), ("x_float_seq", "float32"),
                                    ("x_byte_seq", "uint8")):
                    flat = [v for st in fl[name].feature for v in values_of(st, dtype)]
                    lines.append(" ".join([name, str(len(flat))] + fmt(dtype, flat)))
                w.append(lines)
            p = os.path.join(tmp, "seqex.records")
            orr.write_records(p, recs)
            ok = orr.compare("real seqex", recs, orr.run_dump(["schema", spec, p]), w)
            print("%s: %d records agree" % (os.path.basename(real), len(recs)) if ok else real)
        elif ok:
            print("FAIL: $RC_TESTDATA has no %s" % os.path.basename(real))
            ok = False
        if not ok:
            return 1
        print("OK: the C SequenceExample decoder agrees with python3-protobuf")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
