#!/usr/bin/python3
"""sampler-s3rver: `rollcache ingest` from a real s3rver (npm, pinned by
tests/package-lock.json) with its filesystem backend, on 127.0.0.1 and an
ephemeral port; objects uploaded by the test.

Proves: ListObjectsV2 pagination (more than 1000 keys, continuation tokens);
keys with spaces, '+', '=', '%', '/' and UTF-8 are listed and fetched; every
admitted record equals its source record and counts match; rank/world_size
0/2 and 1/2 split the records of the synth/ objects exactly; a prefix limits the listing; requests
are signed with credentials from a 0600 credentials file (every signature,
continuation tokens included, checked with botocore by the SigV4 proxy that
s3rver.sh puts in front of s3rver), and a file readable by others is
refused without the secret appearing in the message.
"""
import collections
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rcsamp  # noqa: E402

WEIRD = [
    "with space/a b.tfrecord",
    "plus+sign.tfrecord",
    "eq=ual&amp.tfrecord",
    "per%cent%20.tfrecord",
    "deep/er/pa~th.tfrecord",
    "\u00fctf-8/\u65e5\u672c\u8a9e.tfrecord",
]
MANY = 1030


def main():
    rcsamp.rc_bin()
    work = rcsamp.tmpdir("s3rver")
    srv = None
    try:
        data = os.path.join(work, "data")
        weird = rcsamp.make_dataset(data, len(WEIRD), 20, 32, 600, seed=5, names=WEIRD)
        weird.update(rcsamp.synth_dataset(data, 300, 1024, 6, seed=11, subdir="synth"))
        many = rcsamp.make_dataset(os.path.join(work, "many"), MANY, 1, 8, 24, seed=6,
                                   names=["m/%05d.tfrecord" % i for i in range(MANY)])
        srv = rcsamp.Server("s3rver.sh", ["bucket"], os.path.join(work, "s3"))
        for src, prefix in ((data, "ds/"), (os.path.join(work, "many"), "ds/")):
            p = subprocess.run([os.path.join(rcsamp.SERVERS, "s3put.py"), srv.url, "bucket", src,
                                prefix], capture_output=True, text=True, timeout=120)
            if p.returncode:
                rcsamp.fail("upload: " + p.stderr)
        # something outside the prefix that must not be listed
        p = subprocess.run([os.path.join(rcsamp.SERVERS, "s3put.py"), srv.url, "bucket",
                            os.path.join(data, "synth"),
                            "other/"], capture_output=True, text=True, timeout=60)
        if p.returncode:
            rcsamp.fail("upload: " + p.stderr)

        creds = os.path.join(work, "credentials")
        with open(creds, "w") as f:
            f.write("[test]\naws_access_key_id = S3RVER\naws_secret_access_key = S3RVER\n")
        os.chmod(creds, 0o600)
        env = {"AWS_SHARED_CREDENTIALS_FILE": creds, "AWS_ACCESS_KEY_ID": "",
               "AWS_SECRET_ACCESS_KEY": "", "AWS_PROFILE": ""}
        common = ["--endpoint", srv.url, "--profile", "test", "--connections", "8"]

        all_objs = dict(weird)
        all_objs.update({"m/%05d.tfrecord" % i: many["m/%05d.tfrecord" % i] for i in range(MANY)})
        want = collections.Counter(p for v in all_objs.values() for p in v)

        cache = os.path.join(work, "c-all")
        _, st, _ = rcsamp.ingest("s3://bucket/ds/", cache, "64M", common, env=env)
        rcsamp.expect_equal_sets(rcsamp.cache_payloads(cache), want, "s3rver all")
        if st["objects_total"] != len(all_objs) or st["objects_done"] != len(all_objs):
            rcsamp.fail("listed/read %d/%d objects, want %d (pagination?)" % (
                st["objects_total"], st["objects_done"], len(all_objs)))
        if st["failed_objects"] or st["http_4xx"]:
            rcsamp.fail("errors: %r" % st)

        # ranks over the synth/ objects (the split is the listing's; the
        # thousand one-record objects would only make the test slower)
        synth = {k: v for k, v in all_objs.items() if k.startswith("synth/")}
        want_synth = collections.Counter(p for v in synth.values() for p in v)
        parts = []
        for rank in (0, 1):
            cache = os.path.join(work, "c-rank%d" % rank)
            _, st, _ = rcsamp.ingest("s3://bucket/ds/synth/", cache, "64M",
                                     common + ["--rank", str(rank), "--world-size", "2"], env=env)
            parts.append(rcsamp.cache_payloads(cache))
        if parts[0] & parts[1]:
            rcsamp.fail("ranks share records")
        if not parts[0] or not parts[1]:
            rcsamp.fail("a rank got nothing: %d / %d" % (sum(parts[0].values()), sum(parts[1].values())))
        rcsamp.expect_equal_sets(parts[0] + parts[1], want_synth, "s3rver ranks 0/2 + 1/2")

        # a credentials file readable by others is refused, secret not echoed
        with open(creds, "w") as f:
            f.write("[test]\naws_access_key_id = S3RVER\naws_secret_access_key = TOPSECRETVALUE\n")
        os.chmod(creds, 0o644)
        code, _, err = rcsamp.ingest("s3://bucket/ds/", os.path.join(work, "c-bad"), "64M", common,
                                     env=env, check=False)
        if code == 0 or "chmod 600" not in err or "TOPSECRETVALUE" in err:
            rcsamp.fail("world-readable credentials: exit %d, stderr %r" % (code, err))
        print("ok: %d objects (%d in pages of 1000), %d records; ranks %d + %d records" % (
            len(all_objs), MANY, sum(want.values()), sum(parts[0].values()), sum(parts[1].values())))
    finally:
        if srv:
            srv.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
