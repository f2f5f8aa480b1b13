#!/usr/bin/python3
"""fuse-stale-objects-nginx, fuse-stale-objects-s3rver: an object changed at
the source (a new version: another mtime and size under nginx's JSON
autoindex, another ETag on S3) retires the local files holding its old
records at the boundary after the relist that saw it, and its new records
are fetched and shown instead.

A `rollcache synth` dataset of 4 objects, small enough to fit the cache, is
served by nginx, or uploaded to s3rver (behind its SigV4-checking proxy);
once every record is resident, object 0 is replaced by
another `rollcache synth` object (other records, other size).  Then, within
a few `epoch next --wait` (the default relist = 1 lists the source again at
each epoch): no record of the old version is in the view or the cache, the
new version's records all are, and no other record left or came twice.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

import rcfuse as t

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sampler"))
import rcsamp  # noqa: E402


def s3_upload(srv, src):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    p = subprocess.run([os.path.join(rcsamp.SERVERS, "s3put.py"), srv.url, "bucket", src, "d/"],
                       capture_output=True, text=True, timeout=60, env=env)
    if p.returncode:
        t.fail("upload: " + p.stdout + p.stderr)


def body(s, peer, mode):
    s.synth(records=80, size="2K", shards=4)
    names = sorted(os.listdir(s.src))
    retire = "retire = boundary\n" if mode == "boundary" else ""  # read: the default
    log = os.path.join(s.root, "daemon.log")  # shown when the test fails
    os.environ["ROLLCACHE_LOG"] = "info"
    cfg = s.config("[cache]\nlimit = 8M\n" + retire + "[sampler]\nshard_size = 64K\n"
                   "[mount]\nlog_file = " + log + "\n")
    if peer == "nginx":
        url, _ = t.start_nginx(s)
        s.mount(url, "--config", cfg)
    else:
        srv = rcsamp.Server("s3rver.sh", ["bucket"], os.path.join(s.root, "s3"))
        s.cleanups.append(srv.stop)
        s3_upload(srv, s.src)
        os.environ.update(AWS_ACCESS_KEY_ID="S3RVER", AWS_SECRET_ACCESS_KEY="S3RVER",
                          AWS_SHARED_CREDENTIALS_FILE=os.path.join(s.root, "none"),
                          AWS_CONFIG_FILE=os.path.join(s.root, "none"))
        os.environ.pop("AWS_PROFILE", None)
        s.mount("s3://bucket/d/", "--config", cfg, "--endpoint", srv.url)
    cur = os.path.join(s.mnt, "current")
    for _ in range(10):
        t.run("epoch", s.mnt, "next", "--wait", timeout=60)
        if s.stats()["current"]["records"] == 80:
            break
    old = {n: t.tfrecords(open(os.path.join(s.src, n), "rb").read()) for n in names}
    t.eq(sorted(t.read_records_dir(cur)), sorted(r for v in old.values() for r in v),
         "every record resident before the change")

    # object 0: a new version (other records: another seed; another size)
    tmp = tempfile.mkdtemp(prefix="rc-stale-")
    try:
        t.run("synth", tmp, "--records", "30", "--record-size", "3K", "--shards", "1",
              "--seed", "99")
        new_file = os.path.join(tmp, os.listdir(tmp)[0])
        new = t.tfrecords(open(new_file, "rb").read())
        shutil.copyfile(new_file, os.path.join(s.src, names[0] + ".tmp"))
        os.replace(os.path.join(s.src, names[0] + ".tmp"), os.path.join(s.src, names[0]))
    finally:
        shutil.rmtree(tmp)
    if peer == "s3rver":  # the new version replaces the key's object (a new ETag)
        s3_upload(srv, s.src)
    fetched0 = s.stats()["sampler"]["bytes_fetched"]
    want = sorted(new + [r for n in names[1:] for r in old[n]])
    # a relist (at the start of an epoch's sampling), the boundary after it,
    # and the new version's fetch and seal: a few epochs, more on a loaded
    # machine, where `next --wait` may go ahead before the samplers have
    # sealed what they fetch
    got = None
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        t.run("epoch", s.mnt, "next", "--wait", timeout=60)
        got = sorted(t.read_records_dir(cur))
        if got == want:
            break
        time.sleep(0.5)
    stale = set(old[names[0]]) & set(got or [])
    if stale or got != want:
        with open(log) as f:
            print("daemon log (the last 60 lines):\n" + "".join(f.readlines()[-60:]))
    if stale:
        t.fail("%d records of the old version of %s are still in the view" %
               (len(stale), names[0]))
    t.eq(got, want, "the view after the change: the new version, the others unchanged")
    # the other objects' records that shared the old version's files were
    # copied locally, not downloaded again: only the new version was fetched
    # (bytes_fetched counts the listings' bytes too: a few KiB a relist)
    st = s.stats()
    delta = st["sampler"]["bytes_fetched"] - fetched0
    size_new = os.path.getsize(os.path.join(s.src, names[0]))
    size_old = min(os.path.getsize(os.path.join(s.src, n)) for n in names[1:])
    if not size_new <= delta < size_new + size_old // 2:
        t.fail("%d bytes fetched after the change; the new version has %d, another object "
               "%d: something besides the new version was downloaded" % (delta, size_new,
                                                                         size_old))
    t.eq(st["integrity"]["stale_files"] >= 1, True, "integrity.stale_files counts the withdrawn")
    # shards of 64K mix the 40K objects: some current records had to be copied
    t.eq(st["integrity"]["stale_moved_records"] >= 1, True,
         "integrity.stale_moved_records: records of current objects copied")
    rows = s.catalog("SELECT COUNT(*) FROM objects WHERE state = 2")
    t.eq(rows[0][0] >= 1, True, "the old version is a STALE object row")
    s.umount()


peer = sys.argv[1] if len(sys.argv) > 1 else "nginx"
mode = sys.argv[2] if len(sys.argv) > 2 else "read"
if peer not in ("nginx", "s3rver") or mode not in ("read", "boundary"):
    sys.exit("usage: test_stale.py [nginx|s3rver] [read|boundary]")
t.main(lambda s: body(s, peer, mode), "stale-objects-" + peer + "-" + mode)
