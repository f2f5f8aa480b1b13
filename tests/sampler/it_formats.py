#!/usr/bin/python3
"""sampler-formats-file: `rollcache ingest` tells TFRecord compressions apart.

Real peer: file:// sources (libcurl's file protocol) over the real TFRecord
files of ../shared/testdata, with default settings (compression = auto):

1. the GZIP penguin file written by TFX admits all its 100 records (before
   compression = auto, the sampler read it as plain framing: 0 records, five
   retries, and exit 0);
2. a ZLIB TFRecord admits all its records.  It is made here with Python's
   zlib.compress over TFRecord framing; that matches what TensorFlow's ZLIB
   writer produces, since TF's ZlibOutputBuffer deflates with zlib's default
   window bits, i.e. a zlib-wrapped deflate stream (RFC 1950 header, Adler-32
   trailer), which is exactly zlib.compress's output;
3. an undecodable object (random bytes) and a truncated GZIP object make
   `ingest` exit 1 with one line per object naming it and what is wrong,
   without retries (a local file reads the same bytes again); the truncated
   object's whole records before the cut are admitted, and the records the
   cache held before are all still there;
4. the GZIP object with compression = none admits nothing, fails (exit 1)
   and its one line says that it looks GZIP-compressed and to set
   compression = gzip (not "no gzip or zlib header").
"""
import gzip
import os
import random
import shutil
import sys
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rcsamp  # noqa: E402

GZ = "example_gzip__tfx__penguin_Split-eval_data_tfrecord-00000-of-00001.gz"
EX = "example__pytorch_data__example.tfrecord"


def main():
    rcsamp.rc_bin()
    td = os.environ.get("RC_TESTDATA", "")
    if not os.path.isfile(os.path.join(td, GZ)):
        rcsamp.missing("RC_TESTDATA (%r) has no %s" % (td, GZ),
                       "run the test through meson test (tests/data/tensorflow holds the "
                       "real TFRecord files)")
    root = rcsamp.tmpdir("formats")
    try:
        # 1. GZIP, default settings
        src = os.path.join(root, "gz")
        os.makedirs(src)
        shutil.copy(os.path.join(td, GZ), src)
        with gzip.open(os.path.join(td, GZ), "rb") as f:
            want_gz = rcsamp.collections.Counter(p for _, p in rcsamp.parse(f.read()))
        if sum(want_gz.values()) != 100:
            rcsamp.fail("the penguin file should hold 100 records (README), parsed %d"
                        % sum(want_gz.values()))
        cache = os.path.join(root, "cache")
        rc, st, err = rcsamp.ingest("file://" + src + "/", cache, "64M",
                                    ["--shard-size", "1M"])
        if st.get("records_admitted") != 100 or st.get("retries") != 0:
            rcsamp.fail("gzip source: admitted %s records with %s retries, want 100 and 0\n%s"
                        % (st.get("records_admitted"), st.get("retries"), err))
        rcsamp.expect_equal_sets(rcsamp.cache_payloads(cache), want_gz, "gzip source")

        # 2. ZLIB (TF's ZLIB writer output: zlib.compress over the framing)
        with open(os.path.join(td, EX), "rb") as f:
            plain = f.read()
        want_ex = rcsamp.collections.Counter(p for _, p in rcsamp.parse(plain))
        zsrc = os.path.join(root, "zlib")
        os.makedirs(zsrc)
        with open(os.path.join(zsrc, "example.tfrecord.zz"), "wb") as f:
            f.write(zlib.compress(plain, 6))
        zcache = os.path.join(root, "zcache")
        rc, st, err = rcsamp.ingest("file://" + zsrc + "/", zcache, "64M",
                                    ["--shard-size", "1M"])
        if st.get("records_admitted") != 4:
            rcsamp.fail("zlib source: admitted %s records, want 4\n%s"
                        % (st.get("records_admitted"), err))
        rcsamp.expect_equal_sets(rcsamp.cache_payloads(zcache), want_ex, "zlib source")

        # 3. bad objects into the cache of step 1
        bad = os.path.join(root, "bad")
        os.makedirs(bad)
        rnd = random.Random(14)
        junk = bytes(rnd.randrange(256) for _ in range(3000))
        if junk[:2] == b"\x1f\x8b" or (junk[0] & 15 == 8 and (junk[0] * 256 + junk[1]) % 31 == 0):
            rcsamp.fail("the random junk happens to start like gzip or zlib: change the seed")
        with open(os.path.join(bad, "junk.tfrecord"), "wb") as f:
            f.write(junk)
        with open(os.path.join(td, GZ), "rb") as f:
            gz = f.read()
        with open(os.path.join(bad, "cut.gz"), "wb") as f:
            f.write(gz[:len(gz) * 2 // 3])
        rc, st, err = rcsamp.ingest("file://" + bad + "/", cache, "64M",
                                    ["--shard-size", "1M"], check=False)
        lines = [ln for ln in err.splitlines() if ln.strip()]
        if rc != 1:
            rcsamp.fail("bad objects: ingest exited %d, want 1\n%s" % (rc, err))
        if st.get("failed_objects") != 2 or st.get("retries") != 0:
            rcsamp.fail("bad objects: failed_objects %s retries %s, want 2 and 0\n%s"
                        % (st.get("failed_objects"), st.get("retries"), err))
        junk_lines = [ln for ln in lines if "junk.tfrecord" in ln]
        cut_lines = [ln for ln in lines if "cut.gz" in ln]
        if len(junk_lines) != 1 or "not a TFRecord file" not in junk_lines[0]:
            rcsamp.fail("junk object: want one line saying it is not a TFRecord file:\n%s" % err)
        if len(cut_lines) != 1 or "truncated" not in cut_lines[0]:
            rcsamp.fail("cut gzip object: want one line saying it is truncated:\n%s" % err)
        got = rcsamp.cache_payloads(cache)
        kept = got - want_gz  # records from the cut file (duplicates of penguin records)
        if any(got[p] < want_gz[p] for p in want_gz):
            rcsamp.fail("records the cache held before the bad ingest are gone")
        n_cut = sum(kept.values())
        if not 0 < n_cut < 100 or st.get("records_admitted") != n_cut:
            rcsamp.fail("cut gzip object: %d records kept (stats %s), want the whole ones "
                        "before the cut (0 < n < 100)" % (n_cut, st.get("records_admitted")))

        # 4. compression = none on the GZIP object: it says what the object looks like
        rc, st, err = rcsamp.ingest("file://" + src + "/", os.path.join(root, "ncache"), "64M",
                                    ["--shard-size", "1M", "--compression", "none"], check=False)
        gz_lines = [ln for ln in err.splitlines() if GZ in ln]
        if rc != 1 or st.get("records_admitted") != 0 or st.get("failed_objects") != 1:
            rcsamp.fail("gzip object read with compression = none: exit %d, admitted %s, "
                        "failed %s; want 1, 0, 1\n%s" % (rc, st.get("records_admitted"),
                                                         st.get("failed_objects"), err))
        if len(gz_lines) != 1 or "looks GZIP-compressed: set compression = gzip" not in \
                gz_lines[0] or "no gzip" in gz_lines[0]:
            rcsamp.fail("compression = none on a GZIP object: want one line saying it looks "
                        "GZIP-compressed and to set compression = gzip:\n%s" % err)
        print("OK: gzip 100 records, zlib 4 records, junk and cut objects fail (exit 1), "
              "%d records of the cut object kept, compression = none on gzip says so" % n_cut)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
