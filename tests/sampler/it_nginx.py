#!/usr/bin/python3
"""sampler-nginx: `rollcache ingest` from a real nginx (Debian nginx-light) with
a JSON autoindex, on 127.0.0.1 and an ephemeral port, serving `rollcache
synth` datasets (one spread over subdirectories, one GZIP).

Proves: the autoindex lister walks subdirectories; every admitted record equals
its source record byte for byte and the counts match (plain and GZIP objects);
rank/world_size 0/2 and 1/2 split the objects exactly (each object wholly in
one rank, nothing lost, nothing doubled), and each rank's catalog records its
share of the listing only (a node of a many-node job does not hold the whole
dataset's keys); shards respect shard_size.
"""
import collections
import os
import shutil
import sqlite3
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rcsamp  # noqa: E402


def fnv1a(key):
    h = 0xcbf29ce484222325
    for b in key.encode():
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def objects_of(counter, owner):
    return {owner[p] for p in counter}


def main():
    rcsamp.rc_bin()
    work = rcsamp.tmpdir("nginx")
    srv = None
    try:
        root = os.path.join(work, "www")
        plain = {}
        for i, sub in enumerate(("a", "b/c", "b/d")):  # the lister walks subdirectories
            plain.update(rcsamp.synth_dataset(os.path.join(root, "plain"), 200, 1500, 4,
                                              seed=3 + i, subdir=sub))
        gz = rcsamp.synth_dataset(os.path.join(root, "gz"), 200, 1500, 4, seed=9, gz=True)
        owner = {p: k for k, v in plain.items() for p in v}
        srv = rcsamp.Server("nginx.sh", [root], os.path.join(work, "nginx"))
        want = collections.Counter(p for v in plain.values() for p in v)

        # all of it
        cache = os.path.join(work, "c-all")
        _, st, _ = rcsamp.ingest(srv.url + "plain/", cache, "64M",
                                 ["--shard-size", "128K", "--connections", "4"])
        got = rcsamp.cache_payloads(cache)
        rcsamp.expect_equal_sets(got, want, "nginx plain")
        if st["records_admitted"] != sum(want.values()) or st["objects_done"] != len(plain):
            rcsamp.fail("counts: stats %r, want %d records of %d objects" %
                        (st, sum(want.values()), len(plain)))
        for name in os.listdir(os.path.join(cache, "shards")):
            size = os.path.getsize(os.path.join(cache, "shards", name))
            if size > 128 * 1024:
                rcsamp.fail("shard %s has %d bytes > shard_size 128K" % (name, size))
        if os.listdir(os.path.join(cache, "tmp")):
            rcsamp.fail("tmp/ not empty after ingest: %r" % os.listdir(os.path.join(cache, "tmp")))

        # GZIP objects
        cache = os.path.join(work, "c-gz")
        rcsamp.ingest(srv.url + "gz/", cache, "64M", ["--compression", "gzip"])
        rcsamp.expect_equal_sets(rcsamp.cache_payloads(cache),
                                 collections.Counter(p for v in gz.values() for p in v), "nginx gzip")

        # rank split
        parts = []
        for rank in (0, 1):
            cache = os.path.join(work, "c-rank%d" % rank)
            rcsamp.ingest(srv.url + "plain/", cache, "64M",
                          ["--rank", str(rank), "--world-size", "2"])
            c = rcsamp.cache_payloads(cache)
            objs = objects_of(c, owner)
            expect = {k for k in plain if fnv1a(k) % 2 == rank}
            if objs != expect:
                rcsamp.fail("rank %d/2 got objects %s, want %s" % (rank, sorted(objs), sorted(expect)))
            for k in objs:  # whole objects only
                if sum(n for p, n in c.items() if owner[p] == k) != len(plain[k]):
                    rcsamp.fail("rank %d/2: object %s only partly admitted" % (rank, k))
            parts.append(c)
            db = sqlite3.connect("file:%s?mode=ro" % os.path.join(cache, "catalog.db"), uri=True)
            listed = {k for (k,) in db.execute("SELECT key FROM objects")}
            db.close()
            if listed != expect:
                rcsamp.fail("rank %d/2: the catalog records %d objects (%d outside the share), "
                            "want its share of %d" % (rank, len(listed), len(listed - expect),
                                                      len(expect)))
        if parts[0] & parts[1]:
            rcsamp.fail("ranks 0 and 1 share %d records" % sum((parts[0] & parts[1]).values()))
        rcsamp.expect_equal_sets(parts[0] + parts[1], want, "nginx ranks 0/2 + 1/2")
        print("ok: %d records, %d objects; ranks %d + %d objects" % (
            sum(want.values()), len(plain), len(objects_of(parts[0], owner)), len(objects_of(parts[1], owner))))
    finally:
        if srv:
            srv.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
