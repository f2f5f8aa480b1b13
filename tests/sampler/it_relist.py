#!/usr/bin/python3
"""sampler-relist-file: re-listing a file:// source whose object changed.

Proves: a second ingest into the same cache lists the source again; the
object whose content (ETag: mtime and size) changed gets a new catalog row
and its old row is marked STALE (so the evictor retires its samples at the
next boundary); unchanged objects keep their rows; the new version's
records are admitted.
"""
import collections
import os
import shutil
import sqlite3
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rcsamp  # noqa: E402

STALE = 2


def main():
    rcsamp.rc_bin()
    work = rcsamp.tmpdir("relist")
    try:
        src = os.path.join(work, "src")
        names = ["a.tfrecord", "b.tfrecord", "c.tfrecord"]
        first = rcsamp.make_dataset(src, 3, 30, 64, 512, seed=1, names=names)
        cache = os.path.join(work, "cache")
        rcsamp.ingest("file://" + src + "/", cache, "64M", ["--shard-size", "1M"])
        second = rcsamp.make_dataset(src, 1, 45, 64, 512, seed=2, names=["b.tfrecord"])
        rcsamp.ingest("file://" + src + "/", cache, "64M", ["--shard-size", "1M"])

        db = sqlite3.connect("file:%s?mode=ro" % os.path.join(cache, "catalog.db"), uri=True)
        rows = db.execute("SELECT key, state FROM objects ORDER BY id").fetchall()
        db.close()
        by_key = collections.defaultdict(list)
        for k, st in rows:
            by_key[k].append(st)
        if sorted(by_key["b.tfrecord"]) != [0, STALE]:
            rcsamp.fail("changed object rows %r, want one current and one STALE" % by_key["b.tfrecord"])
        for k in ("a.tfrecord", "c.tfrecord"):
            if by_key[k] != [0]:
                rcsamp.fail("unchanged object %s rows %r, want one current" % (k, by_key[k]))
        got = rcsamp.cache_payloads(cache)
        for p in second["b.tfrecord"]:
            if got[p] != 1:
                rcsamp.fail("a record of the new version was not admitted once")
        print("ok: rows %r" % dict(by_key))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
