#!/usr/bin/python3
"""oracle_synth.py - `rollcache synth` writes what it means to write.

The oracle is python3-protobuf (example.proto compiled with protoc at test
time) plus this file's own TFRecord framing reader and CRC-32C, all
independent of the C code.  Checks, each as a named step:

  values     every record of a dataset with float32, int64, uint8, bytes and
             ragged features parses to exactly the values of the formula in
             cli/cmd_synth.c (recomputed here with numpy); shard k holds
             records [k*N/K, (k+1)*N/K); framing CRCs are right
  gzip       --gzip files are gzip streams of the very same bytes
  determinism the same seed gives byte-identical files, whatever --threads;
             another seed gives other values
  default    without --schema, x:float32[n],y:int64[1] with the largest n
             whose Example fits --record-size
  quickstart the quickstart's arguments (fewer records) give 4000 floats and
             one label per record, in 8 files
  errors     bad arguments exit 2 with a one-line message

Exits 0, or 1 on the first disagreement or with one line when protoc,
python3-protobuf, python3-numpy or $RC_BIN is missing (scripts/deps.sh
installs the packages, meson test sets the variable): never 77.
"""
import gzip
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle_random as orr  # noqa: E402

try:
    import numpy as np
except ImportError:
    orr.missing("python3-numpy is not installed",
                "run scripts/deps.sh (apt-get install python3-numpy)")
orr.need_protobuf()

RC_BIN = os.environ.get("RC_BIN")
if not RC_BIN or not os.access(RC_BIN, os.X_OK):
    orr.missing("RC_BIN (%s) is not the rollcache executable" % RC_BIN,
                "run the test through meson test, which sets it")

M64 = (1 << 64) - 1


class Fail(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Fail(what)


# ---- CRC-32C and framing, written from the format description --------------

def _crc_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


CRC_TABLE = _crc_table()


def crc32c(data):
    c = 0xFFFFFFFF
    t = CRC_TABLE
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked(c):
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def read_records(data, verify_crc):
    out, off = [], 0
    while off < len(data):
        check(len(data) - off >= 12, "truncated header at %d" % off)
        (n,) = struct.unpack_from("<Q", data, off)
        (lcrc,) = struct.unpack_from("<I", data, off + 8)
        payload = data[off + 12:off + 12 + n]
        check(len(payload) == n and off + 16 + n <= len(data), "truncated record at %d" % off)
        (pcrc,) = struct.unpack_from("<I", data, off + 12 + n)
        if verify_crc:
            check(lcrc == masked(crc32c(data[off:off + 8])), "length crc at %d" % off)
            check(pcrc == masked(crc32c(payload)), "payload crc at %d" % off)
        out.append(payload)
        off += 16 + n
    return out


# ---- the formula of cmd_synth.c ---------------------------------------------

def mix_int(z):
    z &= M64
    z ^= z >> 30
    z = (z * 0xBF58476D1CE4E5B9) & M64
    z ^= z >> 27
    z = (z * 0x94D049BB133111EB) & M64
    z ^= z >> 31
    return z


def mix_np(z):
    with np.errstate(over="ignore"):
        z = z ^ (z >> np.uint64(30))
        z = z * np.uint64(0xBF58476D1CE4E5B9)
        z = z ^ (z >> np.uint64(27))
        z = z * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return z


def key(seed, r, i):
    return mix_int(seed + 0x9E3779B97F4A7C15 * (256 * r + i + 1))


def expected(seed, r, i, dtype, count, m):
    """The values synth writes for record r, feature i."""
    k = key(seed, r, i)
    n = count if count is not None else mix_int(k ^ M64) % (2 * m + 1)
    with np.errstate(over="ignore"):
        u = mix_np(np.uint64(k) + np.arange(n, dtype=np.uint64))
    if dtype == "float32":
        return ((u >> np.uint64(40)).astype(np.float32) / np.float32(16777216.0))
    if dtype == "int64":
        return (u % np.uint64(2001)).astype(np.int64) - 1000
    return (u & np.uint64(0xFF)).astype(np.uint8).tobytes()


# ---- helpers ----------------------------------------------------------------

def synth(out_dir, *args):
    p = subprocess.run([RC_BIN, "synth", out_dir] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise Fail("synth %s failed (%d): %s" % (" ".join(args), p.returncode, p.stderr.strip()))
    return p.stdout


def files_of(d):
    return sorted(os.listdir(d))


def parse_schema(spec):
    feats = []
    for part in re.findall(r"([^:,]+):(\w+)(\[[^\]]*\])?", spec):
        name, dtype, shape = part
        if dtype == "bytes" or shape == "[]":
            count = None
        elif shape:
            count = int(np.prod([int(x) for x in shape[1:-1].split(",")]))
        else:
            count = 1
        feats.append((name, dtype, count))
    return feats


def check_dataset(pb, d, spec, n_records, shards, seed, m, gz=False, verify_crc=True):
    feats = parse_schema(spec)
    names = files_of(d)
    suffix = ".tfrecord.gz" if gz else ".tfrecord"
    want_names = ["part-%05d-of-%05d%s" % (k, shards, suffix) for k in range(shards)]
    check(names == want_names, "files %s, expected %s" % (names, want_names))
    r = 0
    for k, name in enumerate(names):
        opener = gzip.open if gz else open
        with opener(os.path.join(d, name), "rb") as f:
            recs = read_records(f.read(), verify_crc)
        lo, hi = n_records * k // shards, n_records * (k + 1) // shards
        check(len(recs) == hi - lo, "%s: %d records, expected %d" % (name, len(recs), hi - lo))
        for payload in recs:
            ex = pb.Example.FromString(payload)
            fmap = ex.features.feature
            check(sorted(fmap.keys()) == sorted(f[0] for f in feats),
                  "record %d: features %s" % (r, sorted(fmap.keys())))
            for i, (fname, dtype, count) in enumerate(feats):
                want = expected(seed, r, i, dtype, count, m)
                f = fmap[fname]
                if dtype == "float32":
                    got = np.array(f.float_list.value, dtype=np.float32)
                    ok = got.shape == want.shape and np.array_equal(got, want)
                elif dtype == "int64":
                    got = np.array(f.int64_list.value, dtype=np.int64)
                    ok = got.shape == want.shape and np.array_equal(got, want)
                else:
                    got = b"".join(f.bytes_list.value)
                    ok = got == want and len(f.bytes_list.value) == 1
                check(ok, "record %d feature %s: got %r..., formula gives %r..." %
                      (r, fname, got[:4], want[:4]))
            r += 1
    check(r == n_records, "%d records in all, expected %d" % (r, n_records))


def ragged_mean(stdout):
    mt = re.search(r"ragged mean m=(\d+)", stdout)
    return int(mt.group(1)) if mt else 0


def main():
    tmp = tempfile.mkdtemp(prefix="rc-synth-oracle-")
    try:
        subprocess.run(["protoc", "--python_out=" + tmp,
                        "-I" + os.path.join(os.environ.get("RC_PROTO_DIR",
                                                           os.path.dirname(__file__)), "proto"),
                        "feature.proto", "example.proto"], check=True)
        sys.path.insert(0, tmp)
        import example_pb2 as pb

        spec = "x:float32[100],y:int64[1],ids:int64[],img:bytes,m:uint8[7],r:float32[]"
        step = "values"
        a = os.path.join(tmp, "a")
        out = synth(a, "--records", "60", "--record-size", "2K", "--shards", "3",
                    "--schema", spec, "--seed", "5")
        m = ragged_mean(out)
        check(m > 0, "no ragged mean in %r" % out)
        check_dataset(pb, a, spec, 60, 3, 5, m)
        sizes = [os.path.getsize(os.path.join(a, f)) for f in files_of(a)]
        mean = (sum(sizes) - 60 * 16) / 60
        check(abs(mean - 2048) < 0.15 * 2048, "mean Example size %.0f, asked 2048" % mean)
        print("values: 60 records of %s agree with the formula (m=%d, mean %.0f bytes)"
              % (spec, m, mean))

        step = "gzip"
        g = os.path.join(tmp, "g")
        synth(g, "--records", "60", "--record-size", "2K", "--shards", "3",
              "--schema", spec, "--seed", "5", "--gzip")
        check_dataset(pb, g, spec, 60, 3, 5, m, gz=True)
        for k in range(3):
            plain = open(os.path.join(a, "part-%05d-of-00003.tfrecord" % k), "rb").read()
            with gzip.open(os.path.join(g, "part-%05d-of-00003.tfrecord.gz" % k), "rb") as f:
                check(f.read() == plain, "gzip shard %d differs from the plain one" % k)
        print("gzip: same records inside gzip streams")

        step = "determinism"
        b = os.path.join(tmp, "b")
        synth(b, "--records", "60", "--record-size", "2K", "--shards", "3",
              "--schema", spec, "--seed", "5", "--threads", "1")
        for f in files_of(a):
            check(open(os.path.join(a, f), "rb").read() == open(os.path.join(b, f), "rb").read(),
                  "%s differs between two runs with the same seed" % f)
        c = os.path.join(tmp, "c")
        synth(c, "--records", "60", "--record-size", "2K", "--shards", "3",
              "--schema", spec, "--seed", "6")
        check(open(os.path.join(a, files_of(a)[0]), "rb").read()
              != open(os.path.join(c, files_of(c)[0]), "rb").read(), "seed 6 == seed 5")
        print("determinism: same seed byte-identical (1 or more threads), other seed differs")

        step = "default"
        dflt = os.path.join(tmp, "d")
        out = synth(dflt, "--records", "5", "--record-size", "1K", "--seed", "1")
        mt = re.search(r"schema x:float32\[(\d+)\],y:int64\[1\]", out)
        check(mt, "default schema not reported: %r" % out)
        n = int(mt.group(1))
        check_dataset(pb, dflt, "x:float32[%d],y:int64[1]" % n, 5, 1, 1, 0)
        recs = read_records(open(os.path.join(dflt, files_of(dflt)[0]), "rb").read(), True)
        check(all(len(p) <= 1024 for p in recs), "an Example is larger than 1K")
        check(max(len(p) for p in recs) > 1024 - 12, "Examples well below 1K: %d"
              % max(len(p) for p in recs))
        print("default: x:float32[%d],y:int64[1], Examples %d..%d bytes for --record-size 1K"
              % (n, min(map(len, recs)), max(map(len, recs))))

        step = "quickstart"
        q = os.path.join(tmp, "q")
        synth(q, "--records", "200", "--record-size", "16K", "--shards", "8",
              "--schema", "x:float32[4000],y:int64[1]", "--seed", "1")
        check_dataset(pb, q, "x:float32[4000],y:int64[1]", 200, 8, 1, 0, verify_crc=False)
        print("quickstart: 8 files, 200 records of x:float32[4000],y:int64[1]")

        step = "errors"
        bad = [
            [],
            [os.path.join(tmp, "e")],
            [os.path.join(tmp, "e"), "--records", "0", "--record-size", "1K"],
            [os.path.join(tmp, "e"), "--records", "3"],
            [os.path.join(tmp, "e"), "--records", "3", "--record-size", "1K", "--schema",
             "x:float32[4000]"],
            [os.path.join(tmp, "e"), "--records", "3", "--record-size", "10"],
            [os.path.join(tmp, "e"), "--records", "3", "--schema", "x:nope"],
            [os.path.join(tmp, "e"), "--records", "3", "--record-size", "1K", "--shards", "0"],
            [os.path.join(tmp, "e"), "--records", "3", "--record-size", "1K", "--what"],
        ]
        for args in bad:
            p = subprocess.run([RC_BIN, "synth"] + args, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
            check(p.returncode == 2, "synth %s: exit %d, expected 2" % (args, p.returncode))
            lines = p.stderr.strip().splitlines()
            check(len(lines) == 1 and lines[0].startswith("rollcache synth: "),
                  "synth %s: stderr %r" % (args, p.stderr))
        check(not os.path.exists(os.path.join(tmp, "e")), "a failed synth created its DIR")
        p = subprocess.run([RC_BIN, "synth", "--help"], stdout=subprocess.PIPE, text=True)
        check(p.returncode == 0 and "mix(z)" in p.stdout, "--help lacks the formula")
        print("errors: %d bad command lines exit 2 with one line" % len(bad))
        print("OK")
        return 0
    except Fail as e:
        print("FAIL [%s]: %s" % (step, e))
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
