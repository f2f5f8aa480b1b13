#!/usr/bin/python3
"""Raw objects (format=raw) with hostile keys.  it_hostile_keys.py SCENARIO:

sampler-hostile-keys-faults-server (no argument, or `faults-server`): served
by our HTTP test server (tests/servers/faults.py, no faults) from a MANIFEST:
`../../x`, `/abs`, control characters, a 300-byte name, `.`, `..`, `a//b`,
`dir/../../../escape`.  Proves DESIGN invariant 7: nothing is created
outside the cache directory (the test's whole temporary tree is inspected,
and the cache holds only its own layout with numeric file names); every
object is admitted once with its bytes intact.

sampler-hostile-keys-file-fuse (`file-fuse`) and
sampler-hostile-keys-s3rver-fuse (`s3rver-fuse`): keys holding control
characters, bidi controls (U+202E RIGHT-TO-LEFT OVERRIDE, U+2066-U+2069,
LRM/RLM/ALM), a C1 control, ill-formed UTF-8 (file:// only: S3 keys are
UTF-8), a key that spells another key's escape, and plain UTF-8, listed from
a directory or from a real s3rver (behind the SigV4 proxy) and shown by a
real FUSE mount.  Proves: s3rver's listing of these keys is not XML without
encoding-type=url (the premise), yet rollcache lists every one of them;
every shown name is the documented escape (cachefs/names.h), valid UTF-8
with no bidi or C1 control, distinct from every other, percent-decodes to
its key, and reads the object's exact bytes.
"""
import http.client
import os
import shutil
import subprocess
import sys
import urllib.parse
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rcsamp  # noqa: E402
sys.path.insert(0, rcsamp.SERVERS)
import faults  # noqa: E402

KEYS = [
    "../../x",
    "../escape-up",
    "/abs",
    "/tmp/smp-hostile-abs",
    "ctl\x01\x1b[31mred\x7f",
    "n" * 300,
    "d/" + "m" * 300 + "/y",
    ".",
    "..",
    "a//b",
    "dir/../../../escape",
    "trailing/",
    "~1",
    "ok.bin",
]


# (key, the name the mount shows): cachefs/names.h's rules, written out
SHOWN = [
    (b"ctl\x01\x1b[31mred\x7f", "ctl%01%1B[31mred%7F"),
    (b"tab\there\nnewline", "tab%09here%0Anewline"),
    ("gpj.\u202eexe".encode(), "gpj.%E2%80%AEexe"),
    (b"gpj.%E2%80%AEexe", "gpj.%25E2%2580%25AEexe"),  # spells the escape above
    ("iso\u2066x\u2069".encode(), "iso%E2%81%A6x%E2%81%A9"),
    ("marks\u200e\u200f\u061c".encode(), "marks%E2%80%8E%E2%80%8F%D8%9C"),
    ("c1\u0085".encode(), "c1%C2%85"),
    ("dir\u202e/inner".encode(), "dir%E2%80%AE/inner"),
    ("ok \u00e9\u65e5+=\u200d.bin".encode(), "ok \u00e9\u65e5+=\u200d.bin"),
    (b"100%", "100%25"),
]
ILL_FORMED = [  # file names may hold any byte; S3 keys are UTF-8
    (b"bad\xff\xfeutf8", "bad%FF%FEutf8"),
    (b"half\xe2\x80", "half%E2%80"),
    (b"over\xc0\xaf", "over%C0%AF"),
]
BIDI = [chr(c) for c in (0x61C, 0x200E, 0x200F, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E,
                         0x2066, 0x2067, 0x2068, 0x2069)]


def content(key):
    return b"object " + key + b"\n" * (len(key) % 7 + 1)


def check_mount(s, t, source, keys, extra_args=()):
    """Mounts source (format=raw), waits for the first pass, and checks the
    names shown under current/ against keys [(key, shown)]."""
    s.mount(source, "--limit", "8M", "--shard-size", "1M", "--format", "raw", *extra_args)
    t.wait_for(lambda: s.stats()["sampler"]["idle"], "the first sampler pass", timeout=60)
    t.run("epoch", s.mnt, "next")
    cur = os.path.join(s.mnt, "current").encode()
    seen = {}
    for root, _, files in os.walk(cur):
        for n in files:
            p = os.path.join(root, n)
            with open(p, "rb") as f:
                seen[os.path.relpath(p, cur)] = f.read()
    for name in seen:
        try:
            text = name.decode("utf-8")
        except UnicodeDecodeError:
            t.fail("shown name %r is not UTF-8" % name)
        bad = [c for c in text if c in BIDI or 0x80 <= ord(c) <= 0x9F or ord(c) < 0x20]
        if bad:
            t.fail("shown name %r holds controls %r" % (text, bad))
    want = {shown.encode(): key for key, shown in keys}
    t.eq(sorted(seen), sorted(want), "names under current/")
    for name, key in want.items():
        if urllib.parse.unquote_to_bytes(name) != key:
            t.fail("%r does not percent-decode to its key %r" % (name, key))
        if seen[name] != content(key):
            t.fail("%r: bytes differ through the mount" % name)
    s.umount()
    return len(seen)


def main_fuse(scenario):
    sys.path.insert(0, os.path.join(rcsamp.SRCDIR, "tests", "daemon"))
    import rcfuse as t

    rcsamp.rc_bin()

    def body(s):
        keys = SHOWN + (ILL_FORMED if scenario == "file-fuse" else [])
        data = os.path.join(s.root, "data").encode()
        for key, _ in keys:
            p = os.path.join(data, key)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "wb") as f:
                f.write(content(key))
        if scenario == "file-fuse":
            n = check_mount(s, t, "file://%s/" % data.decode(), keys)
            print("ok: %d hostile file names shown escaped, reversibly, by the mount" % n)
            return
        srv = rcsamp.Server("s3rver.sh", ["bucket"], os.path.join(s.root, "s3"))
        s.cleanups.append(srv.stop)
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        p = subprocess.run([os.path.join(rcsamp.SERVERS, "s3put.py"), srv.url, "bucket", data,
                            "h/"], capture_output=True, text=True, timeout=60, env=env)
        if p.returncode:
            t.fail("upload: " + p.stdout + p.stderr)
        # the premise: without encoding-type=url, s3rver's page is not XML
        sys.path.insert(0, rcsamp.SERVERS)
        import s3put
        host = urllib.parse.urlsplit(srv.url).netloc
        target = "/bucket?list-type=2&prefix=h%2F"
        c = http.client.HTTPConnection(host, timeout=30)
        c.request("GET", target, headers=s3put.signed_headers("GET", "http://" + host + target))
        r = c.getresponse()
        page = r.read()
        c.close()
        try:
            ET.fromstring(page)
            t.fail("s3rver listed the hostile keys as valid XML without encoding-type=url: "
                   "this test's premise changed (HTTP %d)" % r.status)
        except ET.ParseError:
            pass
        os.environ.update(AWS_ACCESS_KEY_ID="S3RVER", AWS_SECRET_ACCESS_KEY="S3RVER",
                          AWS_SHARED_CREDENTIALS_FILE=os.path.join(s.root, "none"),
                          AWS_CONFIG_FILE=os.path.join(s.root, "none"))
        os.environ.pop("AWS_PROFILE", None)
        n = check_mount(s, t, "s3://bucket/h/", keys, ("--endpoint", srv.url))
        print("ok: %d hostile S3 keys listed (encoding-type=url) and shown escaped, "
              "reversibly, by the mount" % n)

    t.main(body, "hostile-" + scenario)


def main():
    if len(sys.argv) > 1 and sys.argv[1] != "faults-server":
        if sys.argv[1] not in ("file-fuse", "s3rver-fuse"):
            sys.exit("usage: it_hostile_keys.py [faults-server | file-fuse | s3rver-fuse]")
        return main_fuse(sys.argv[1])
    rcsamp.rc_bin()
    work = rcsamp.tmpdir("hostile")
    srv = None
    try:
        # the cache sits 3 levels down so ../../x could land inside `work`
        base = os.path.join(work, "a", "b")
        os.makedirs(base)
        empty = os.path.join(work, "empty")
        os.makedirs(empty)
        extra = os.path.join(work, "extra")
        sizes = {}
        with open(extra, "w", encoding="utf-8", errors="surrogateescape") as f:
            for i, k in enumerate(KEYS):
                sizes[k] = 100 + i
                f.write("%s %d\n" % (k, sizes[k]))
        srv = rcsamp.Server("faults.py", [empty, "--plan", "ok", "--extra", extra],
                            os.path.join(work, "srv"))
        before = set()
        for dp, dn, fn in os.walk(work):
            before.update(os.path.join(dp, n) for n in dn + fn)
        cache = os.path.join(base, "cache")
        stats_dir = os.path.join(work, "srv")
        args = [rcsamp.rc_bin(), "ingest", srv.url, "--cache-dir", cache, "--limit", "16M", "--shard-size", "1M",
                "--format", "raw", "--stats", os.path.join(stats_dir, "st.json"), "--quiet"]
        p = subprocess.run(args, capture_output=True, text=True, timeout=60, cwd=base)
        # "trailing/" cannot be fetched as a file by an HTTP server that maps it
        # to a directory; everything else must be admitted
        after = set()
        for dp, dn, fn in os.walk(work):
            after.update(os.path.join(dp, n) for n in dn + fn)
        new = after - before
        outside = [x for x in new if not (x == cache or x.startswith(cache + os.sep) or
                                          x.startswith(os.path.join(work, "srv")))]
        if outside:
            rcsamp.fail("created outside the cache: %r" % outside)
        for x in ("/abs", "/tmp/smp-hostile-abs", "/x"):
            if os.path.exists(x):
                rcsamp.fail("%s exists after ingest" % x)
        for sub in os.listdir(cache):
            if sub not in ("catalog.db", "catalog.db-wal", "catalog.db-shm", "lock", "ballast",
                           "shards", "objects", "tmp"):
                rcsamp.fail("unexpected entry in the cache: %r" % sub)
        objs = os.listdir(os.path.join(cache, "objects"))
        if not all(n.isdigit() for n in objs):
            rcsamp.fail("objects/ holds non-numeric names: %r" % objs)
        got = sorted(os.path.getsize(os.path.join(cache, "objects", n)) for n in objs)
        want = sorted(sizes[k] for k in KEYS)
        if len(got) < len(KEYS) - 1 or not set(got) <= set(want):
            rcsamp.fail("admitted sizes %r, want %r (exit %d: %s)" % (got, want, p.returncode, p.stderr))
        for n in objs:
            with open(os.path.join(cache, "objects", n), "rb") as f:
                data = f.read()
            if not any(faults.virtual_bytes(k, sizes[k]) == data for k in KEYS):
                rcsamp.fail("object %s does not match any source object" % n)
        print("ok: %d of %d hostile keys admitted, nothing outside the cache" % (len(objs), len(KEYS)))
    finally:
        if srv:
            srv.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
