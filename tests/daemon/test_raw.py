#!/usr/bin/python3
"""fuse-raw: format = raw shows each object under its sanitized remote key;
keys with '/' become directories inside the epoch (DESIGN "The mount",
invariant 7), read-only like the rest, with the objects' exact bytes.
"""
import errno
import os
import stat

import rcfuse as t

OBJECTS = {
    "top.bin": b"top level\n",
    "a.bin": b"a file next to a directory a/\n",
    "a/b/c.bin": bytes(range(256)) * 40,
    "a/b/d.bin": b"d" * 5000,
    "x/y.bin": b"",
    "sp ace/%percent.bin": b"odd names\n",
}
SHOWN = {"sp ace/%25percent.bin" if k == "sp ace/%percent.bin" else k: v
         for k, v in OBJECTS.items()}  # '%' is escaped as %25 (cachefs/names.h)


def body(s):
    for key, data in OBJECTS.items():
        p = os.path.join(s.src, key)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)
    s.mount("file://%s/" % s.src, "--limit", "8M", "--shard-size", "1M", "--format", "raw")
    t.wait_for(lambda: s.stats()["sampler"]["idle"], "the first sampler pass", timeout=60)
    t.run("epoch", s.mnt, "next")
    cur = os.path.join(s.mnt, "current")
    seen = {}
    for root, dirs, files in os.walk(cur):
        for d in dirs:
            t.eq(stat.S_IMODE(os.stat(os.path.join(root, d)).st_mode), 0o555, "mode of dir " + d)
        for n in files:
            p = os.path.join(root, n)
            with open(p, "rb") as f:
                seen[os.path.relpath(p, cur)] = f.read()
    t.eq(sorted(seen), sorted(SHOWN), "names under current/")
    for k, v in SHOWN.items():
        if seen[k] != v:
            t.fail("%s: bytes differ through the mount" % k)
    t.eq(sorted(os.listdir(os.path.join(cur, "a"))), ["b"], "listing of a/")
    t.eq(sorted(os.listdir(os.path.join(cur, "a", "b"))), ["c.bin", "d.bin"], "listing of a/b/")
    try:
        os.stat(os.path.join(cur, "a", "nope"))
        t.fail("stat of a missing name succeeded")
    except FileNotFoundError:
        pass
    try:
        os.mkdir(os.path.join(cur, "a", "new"))
        t.fail("mkdir in a/ succeeded")
    except OSError as e:
        t.eq(e.errno, errno.EROFS, "mkdir in a subdirectory")
    try:
        os.unlink(os.path.join(cur, "a", "b", "c.bin"))
        t.fail("unlink in a/b/ succeeded")
    except OSError as e:
        t.eq(e.errno, errno.EROFS, "unlink in a subdirectory")
    s.umount()


t.main(body, "raw")
