#!/usr/bin/python3
"""sampler-records-nginx: strategy=records against a real nginx serving a
`rollcache synth` dataset with DALI-style `<object>.idx` sidecars.

Proves: with room for everything, every record is admitted exactly once,
byte for byte, through few coalesced range requests; an object without a
sidecar and one with a broken sidecar are read whole; with room for a third
of the data, the admitted records are drawn from every object (random
records, not the first objects), all of them valid source records.
"""
import collections
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rcsamp  # noqa: E402


def main():
    rcsamp.rc_bin()
    work = rcsamp.tmpdir("records")
    srv = None
    try:
        root = os.path.join(work, "www")
        data = rcsamp.synth_dataset(root, 1200, 2000, 6, seed=21)
        keys = sorted(data)
        for k in keys[:-2]:  # the last two: no sidecar, and a broken one
            with open(os.path.join(root, k), "rb") as f:
                blob = f.read()
            with open(os.path.join(root, k + ".idx"), "w") as f:
                for off, p in rcsamp.parse(blob, check=False):
                    f.write("%d %d\n" % (off, len(p) + 16))
        with open(os.path.join(root, keys[-1] + ".idx"), "w") as f:
            f.write("0 99999999999\n")
        srv = rcsamp.Server("nginx.sh", [root], os.path.join(work, "nginx"))
        want = collections.Counter(p for v in data.values() for p in v)
        owner = {p: k for k, v in data.items() for p in v}

        cache = os.path.join(work, "c-all")
        _, st, err = rcsamp.ingest(srv.url, cache, "64M", ["--strategy", "records", "--shard-size", "1M"])
        rcsamp.expect_equal_sets(rcsamp.cache_payloads(cache), want, "records strategy")
        if st["records_admitted"] != sum(want.values()):
            rcsamp.fail("records admitted %d, want %d" % (st["records_admitted"], sum(want.values())))
        # listing + sidecars + coalesced ranges + 2 whole objects: far fewer than records
        if st["requests"] * 4 > sum(want.values()):
            rcsamp.fail("%d requests for %d records: ranges were not coalesced" % (
                st["requests"], sum(want.values())))
        if "reading the whole object instead" not in err:
            rcsamp.fail("the broken sidecar was not reported: %s" % err)

        total = sum(len(p) + 16 for p in want)
        cache = os.path.join(work, "c-part")
        rcsamp.ingest(srv.url, cache, str(total // 3), ["--strategy", "records", "--shard-size", "64K"])
        got = rcsamp.cache_payloads(cache)
        if not got or any(n != 1 or p not in want for p, n in got.items()):
            rcsamp.fail("partial cache holds records that are not source records, or duplicates")
        per = collections.Counter(owner[p] for p in got)
        drawn = [k for k in keys[:-2] if per[k] > 0]
        if len(drawn) != len(keys) - 2:
            rcsamp.fail("records drawn from only %d of %d indexed objects: %r" % (
                len(drawn), len(keys) - 2, dict(per)))
        print("ok: %d records in %d requests; a third of the cache drew from %d objects" % (
            sum(want.values()), st["requests"], len(per)))
    finally:
        if srv:
            srv.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
