#!/usr/bin/python3
"""sampler-hostile-keys-faults-server: raw objects (format=raw) with hostile
keys, served by our HTTP test server (tests/servers/faults.py, no faults)
from a MANIFEST: `../../x`, `/abs`, control characters, a 300-byte name, `.`,
`..`, `a//b`, `dir/../../../escape`.

Proves DESIGN invariant 7: nothing is created outside the cache directory
(the test's whole temporary tree is inspected, and the cache holds only its
own layout with numeric file names); every object is admitted once with its
bytes intact.
"""
import os
import shutil
import subprocess
import sys

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


def main():
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
            if sub not in ("catalog.db", "catalog.db-wal", "catalog.db-shm", "lock", "shards",
                           "objects", "tmp"):
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
