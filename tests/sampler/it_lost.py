#!/usr/bin/python3
"""sampler-lost-records-file: `rollcache ingest` of TFRecord files that are
bad on disk (so bad on every attempt), over file://.

Three objects besides intact ones: one record with a wrong payload CRC, one
whose framing is lost in the middle (a length header with a wrong CRC), and
one that ends inside its last record (truncated).

Proves (docs/counters.md): every record of the intact files and every good
record before the damage is admitted, and nothing else (DESIGN 5); each
damaged object counts once in failed_objects and at least one record in
records_lost, none in records_recovered (nothing was recovered); ingest
exits 1 naming each damaged key.  Then a source of intact files only: exit
0, records_lost 0, failed_objects 0.  Then with an object larger than the
whole limit: skipped, named, failed_objects 1, exit 1.  Then, with
strategy = records over the fault server, an object whose bytes always
answer 404 while its index sidecar is served: every record of it counts in
records_lost, exit 1.
"""
import collections
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rcsamp  # noqa: E402


def write(path, recs):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(b"".join(recs))


def records_given_up(work):
    """strategy = records over the fault server: one object's bytes always
    answer 404 while its index sidecar is served.  Its runs are given up:
    the object counts once in failed_objects, and every record of it - known
    from the sidecar - counts in records_lost; the other objects are
    admitted whole."""
    root = os.path.join(work, "idx")
    data = rcsamp.make_dataset(root, 3, 40, 64, 400, seed=11)
    keys = sorted(data)
    rcsamp.write_sidecars(root, keys)
    denied = keys[1]
    srv = rcsamp.Server("faults.py", [root, "--plan", "", "--deny404", denied],
                        os.path.join(work, "srv"))
    try:
        cache = os.path.join(work, "cache-idx")
        code, st, err = rcsamp.ingest(srv.url, cache, "64M",
                                      ["--strategy", "records", "--retries", "1"], check=False)
    finally:
        srv.stop()
    want = collections.Counter(p for k in keys if k != denied for p in data[k])
    rcsamp.expect_equal_sets(rcsamp.cache_payloads(cache), want, "records of served objects")
    if code != 1 or denied not in err:
        rcsamp.fail("an object given up: exit %d, not named?\n%s" % (code, err))
    if st.get("failed_objects") != 1:
        rcsamp.fail("failed_objects %r, want 1 (one object, however many of its runs "
                    "failed): %r" % (st.get("failed_objects"), st))
    if st.get("records_lost") != len(data[denied]):
        rcsamp.fail("records_lost %r, want %d (the denied object's records, from its "
                    "sidecar): %r" % (st.get("records_lost"), len(data[denied]), st))
    print("ok: an indexed object given up: its %d records counted lost" % len(data[denied]))


def main():
    rcsamp.rc_bin()
    work = rcsamp.tmpdir("lost")
    try:
        root = os.path.join(work, "src")
        good = rcsamp.make_dataset(root, 3, 20, 64, 800, seed=3,
                                   names=["good-%d.tfrecord" % i for i in range(3)])
        want = collections.Counter(p for v in good.values() for p in v)
        pays = [bytes([65 + i]) * (100 + i) for i in range(10)]
        # a payload CRC mismatch in record 4: the other 9 are kept
        recs = [rcsamp.frame(p) for p in pays]
        bad = bytearray(recs[4])
        bad[-1] ^= 0xFF
        recs[4] = bytes(bad)
        write(os.path.join(root, "crc.tfrecord"), recs)
        want.update(pays[:4] + pays[5:])
        # framing lost at record 3: its length header's CRC is wrong
        pays2 = [b"f" * (50 + i) for i in range(8)]
        recs = [rcsamp.frame(p) for p in pays2]
        hdr = bytearray(recs[3])
        hdr[8] ^= 0xFF  # the length CRC
        recs[3] = bytes(hdr)
        write(os.path.join(root, "framing.tfrecord"), recs)
        want.update(pays2[:3])
        # truncated inside its last record
        pays3 = [b"t" * (70 + i) for i in range(6)]
        blob = b"".join(rcsamp.frame(p) for p in pays3)
        write(os.path.join(root, "trunc.tfrecord"), [blob[:-20]])
        want.update(pays3[:5])

        cache = os.path.join(work, "cache")
        code, st, err = rcsamp.ingest("file://%s/" % root, cache, "64M",
                                      ["--retries", "1", "--shard-size", "1M"], check=False)
        lost = st.get("records_lost")
        got = rcsamp.cache_payloads(cache)
        rcsamp.expect_equal_sets(got, want, "damaged files")
        if code != 1:
            rcsamp.fail("want exit 1 (records lost), got %d:\n%s" % (code, err))
        for key in ("crc.tfrecord", "framing.tfrecord", "trunc.tfrecord"):
            if key not in err:
                rcsamp.fail("%s is not named:\n%s" % (key, err))
        if st.get("failed_objects") != 3:
            rcsamp.fail("failed_objects %r, want 3 (each damaged object once): %r" % (
                st.get("failed_objects"), st))
        if st.get("records_lost", 0) < 3:
            rcsamp.fail("records_lost %r, want >= 3: %r" % (st.get("records_lost"), st))
        if st.get("records_recovered") != 0:
            rcsamp.fail("records_recovered %r, want 0 (bad on every attempt): %r" % (
                st.get("records_recovered"), st))

        for key in ("crc.tfrecord", "framing.tfrecord", "trunc.tfrecord"):
            os.unlink(os.path.join(root, key))
        cache2 = os.path.join(work, "cache2")
        code, st, err = rcsamp.ingest("file://%s/" % root, cache2, "64M", ["--retries", "1"],
                                      check=False)
        if code != 0 or st.get("records_lost") != 0 or st.get("failed_objects") != 0:
            rcsamp.fail("intact files: exit %d, %r\n%s" % (code, st, err))
        # an object larger than the whole limit is skipped: failed, named, exit 1
        big = [b"B" * 4000 for _ in range(400)]  # 1.6 MB
        write(os.path.join(root, "big.tfrecord"), [rcsamp.frame(p) for p in big])
        cache3 = os.path.join(work, "cache3")
        code, st, err = rcsamp.ingest("file://%s/" % root, cache3, "1M",
                                      ["--retries", "1", "--shard-size", "256K"], check=False)
        if code != 1 or "big.tfrecord" not in err or st.get("failed_objects") != 1:
            rcsamp.fail("an object over the limit: exit %d, %r\n%s" % (code, st, err))
        print("ok: %d records kept, %d lost in 3 failed objects" % (sum(want.values()), lost))
        records_given_up(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
