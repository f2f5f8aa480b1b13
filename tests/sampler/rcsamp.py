"""rcsamp - helpers shared by the sampler integration tests (tests/sampler/it_*.py).

Test data: TFRecord files written here (CRC-32C in pure Python, so tests need
nothing outside Debian's python3) or by `rollcache synth` when that command is
built.  The oracle reads the cache's sealed shards with its own framing
parser and compares payloads with the source records as multisets.

A test skips (exit 77, skip()) only for a privilege it lacks (mounting a
tmpfs needs root).  What scripts/deps.sh installs or meson builds is never
a reason to skip: missing() and fail() make the test fail with one line.
"""
import collections
import gzip
import json
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRCDIR = os.environ.get("RC_SRCDIR", os.path.abspath(os.path.join(HERE, "..", "..")))
SERVERS = os.path.join(SRCDIR, "tests", "servers")


def skip(why):
    """Exit 77 (meson's SKIP): only for a device, kernel feature or privilege
    this machine lacks."""
    print("SKIP: " + why)
    sys.exit(77)


def fail(why):
    print("FAIL: " + why)
    sys.exit(1)


def missing(what, fix):
    """A package scripts/deps.sh installs or a part meson builds is absent:
    the machine or the build is broken, so the test fails (exit 1) with one
    line, "FAIL: WHAT: FIX" ("nginx is not installed: run scripts/deps.sh")."""
    print("FAIL: " + " ".join(("%s: %s" % (what, fix)).split()))
    sys.exit(1)


def rc_bin():
    b = os.environ.get("RC_BIN")
    if not b or not os.access(b, os.X_OK):
        missing("RC_BIN (%s) is not the rollcache executable" % b,
                "run the test through meson test, which sets it")
    out = subprocess.run([b, "ingest", "--help"], capture_output=True, text=True)
    if out.returncode != 0:
        missing("rollcache ingest is not built", out.stderr.strip())
    return b


# ---- CRC-32C and TFRecord framing -------------------------------------------

_T = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    _T.append(c)


def crc32c(data):
    c = 0xFFFFFFFF
    t = _T
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked(c):
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def frame(payload):
    hdr = struct.pack("<Q", len(payload))
    return (hdr + struct.pack("<I", masked(crc32c(hdr))) + payload +
            struct.pack("<I", masked(crc32c(payload))))


def write_sidecars(root, keys):
    """Writes KEY.idx beside each uncompressed TFRecord object: one line per
    record, `offset size` with size the framed record (DALI's tfrecord2idx)."""
    for k in keys:
        with open(os.path.join(root, k), "rb") as f:
            blob = f.read()
        with open(os.path.join(root, k + ".idx"), "w") as f:
            for off, p in parse(blob, check=False):
                f.write("%d %d\n" % (off, len(p) + 16))


def parse(data, check=True):
    """Yields (offset, payload) of each record; raises ValueError on bad framing."""
    off = 0
    while off < len(data):
        if off + 12 > len(data):
            raise ValueError("truncated header at %d" % off)
        (n,) = struct.unpack_from("<Q", data, off)
        if check and struct.unpack_from("<I", data, off + 8)[0] != masked(crc32c(data[off:off + 8])):
            raise ValueError("length crc at %d" % off)
        end = off + 12 + n + 4
        if end > len(data):
            raise ValueError("truncated record at %d" % off)
        p = data[off + 12:off + 12 + n]
        if check and struct.unpack_from("<I", data, off + 12 + n)[0] != masked(crc32c(p)):
            raise ValueError("payload crc at %d" % off)
        yield off, p
        off = end


def make_dataset(root, objects, records, min_size=64, max_size=2048, seed=1, gz=False,
                 names=None):
    """Writes `objects` TFRecord files under root; returns {key: [payloads]}."""
    rnd = random.Random(seed)
    out = {}
    for i in range(objects):
        key = names[i] if names else ("part-%02d/shard-%05d.tfrecord" % (i % 3, i))
        path = os.path.join(root, key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        pays = []
        blob = bytearray()
        for j in range(records):
            n = rnd.randint(min_size, max_size)
            # a recognisable head (object, record) plus random bytes
            p = ("%s#%d|" % (key, j)).encode() + rnd.randbytes(n)
            pays.append(p)
            blob += frame(p)
        data = gzip.compress(bytes(blob), mtime=0) if gz else bytes(blob)
        with open(path, "wb") as f:
            f.write(data)
        out[key] = pays
    return out


def synth_dataset(root, records, size, shards, seed=1, gz=False, subdir=""):
    """A `rollcache synth` dataset in root/subdir; returns {key: [payloads]}
    (keys relative to root).  Fails when synth is not built."""
    d = os.path.join(root, subdir) if subdir else root
    os.makedirs(os.path.dirname(d.rstrip("/")), exist_ok=True)
    args = [rc_bin(), "synth", d, "--records", str(records), "--record-size", str(size),
            "--shards", str(shards), "--seed", str(seed), "--threads", "1"]
    if gz:
        args.append("--gzip")
    p = subprocess.run(args, capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        if "not built" in p.stderr or "unknown" in p.stderr:
            missing("rollcache synth is not built", p.stderr.strip())
        fail("synth failed: " + p.stderr)
    out = {}
    for name in sorted(os.listdir(d)):
        with open(os.path.join(d, name), "rb") as f:
            data = f.read()
        if gz:
            data = gzip.decompress(data)
        key = os.path.join(subdir, name) if subdir else name
        out[key] = [bytes(pl) for _, pl in parse(data, check=False)]
    return out


def write_manifest(root, keys):
    with open(os.path.join(root, "MANIFEST"), "w", encoding="utf-8") as f:
        for k in sorted(keys):
            f.write("%s %d\n" % (k, os.path.getsize(os.path.join(root, k))))


def cache_payloads(cache_dir):
    """Counter of every payload in the cache's sealed shards (CRC-checked)."""
    c = collections.Counter()
    d = os.path.join(cache_dir, "shards")
    if not os.path.isdir(d):
        return c
    for name in os.listdir(d):
        with open(os.path.join(d, name), "rb") as f:
            data = f.read()
        for _, p in parse(data):
            c[p] += 1
    return c


def expect_equal_sets(got, want, what):
    if got == want:
        return
    missing = want - got
    extra = got - want
    fail("%s: %d records missing, %d extra (e.g. missing %r, extra %r)" % (
        what, sum(missing.values()), sum(extra.values()),
        next(iter(missing), b"")[:40], next(iter(extra), b"")[:40]))


def ingest(source, cache_dir, limit="1G", extra=(), env=None, timeout=90, check=True):
    """Runs rollcache ingest; returns (returncode, stats dict, stderr)."""
    stats = os.path.join(cache_dir + ".stats.json")
    args = [rc_bin(), "ingest", source, "--cache-dir", cache_dir, "--limit", str(limit),
            "--stats", stats, "--quiet"] + list(extra)
    e = dict(os.environ)
    e.update(env or {})
    t0 = time.monotonic()
    p = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=e)
    elapsed = time.monotonic() - t0
    st = {}
    if os.path.exists(stats):
        with open(stats) as f:
            st = json.load(f)
    st["_wall_s"] = elapsed
    if check and p.returncode != 0:
        fail("ingest %s exited %d:\n%s" % (source, p.returncode, p.stderr))
    return p.returncode, st, p.stderr


# ---- servers ---------------------------------------------------------------

class Server:
    """A peer started through tests/servers/<name> start ...; stopped at exit.
    A launcher that fails (its program missing: one line) fails the test."""

    def __init__(self, script, args, state):
        self.script = os.path.join(SERVERS, script)
        self.state = state
        p = subprocess.run([self.script, "start"] + list(args) + [state], capture_output=True,
                           text=True, timeout=60)
        if p.returncode != 0:
            fail("%s start exited %d: %s" % (script, p.returncode,
                                            (p.stdout + p.stderr).strip()))
        self.url = p.stdout.strip().splitlines()[-1]

    def stop(self):
        p = subprocess.run([self.script, "stop", self.state], capture_output=True, text=True,
                           timeout=30)
        if p.stdout.strip():  # s3rver.sh: what its SigV4 proxy checked
            print(p.stdout.strip())


def tmpdir(name):
    d = tempfile.mkdtemp(prefix="smp-it-%s-" % name)
    return d
