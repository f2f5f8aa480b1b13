#!/usr/bin/python3
"""sampler-plan-mount-nginx: the mount's one long-lived sampler follows the
sampling plan across epochs (DESIGN "Sampling", invariant 8), against a
real nginx and a real FUSE mount.

  fifo  a dataset of 24 objects, a cache of a third of it, five epochs with
        `epoch next --wait`: no record is resident twice, no object is
        fetched twice before the pass covered the dataset, and what was
        downloaded is what was admitted (bytes_fetched == bytes of the
        objects fetched: no fetch without room, no transfer thrown away at
        a boundary);
  none  policy=none: once the cache is full, further epochs download
        nothing (bytes_fetched stays put);
  manifest  a source with a MANIFEST, relisted every epoch (relist = 1):
        while the MANIFEST is the same, each relist is one conditional GET
        that nginx answers 304 (If-None-Match with its ETag), nothing is
        listed again; once an object is added and the MANIFEST rewritten,
        the next relist lists it (listed_objects, a catalog row).
  records  strategy=records over 24 objects with index sidecars (more than
        the sampler keeps indexes of), a cache that holds them all: epochs
        of a smaller admit until every record is resident; the next
        boundary's admit is cut to 0 (the plan's wanted bytes, counted per
        object from the resident records' sizes, are exactly none), and so
        after a restart, which downloads nothing.
"""
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "daemon"))
import rcfuse as t  # noqa: E402


def nginx(s, access_log=False):
    script = os.path.join(t.SRCDIR, "tests", "servers", "nginx.sh")
    state = os.path.join(s.root, "nginx")
    env = dict(os.environ, NGINX_ACCESS_LOG="1" if access_log else "0")
    p = subprocess.run([script, "start", s.src, state], capture_output=True, text=True,
                       timeout=60, env=env)
    if p.returncode != 0:  # nginx missing: its one line
        t.fail("nginx.sh start exited %d: %s" % (p.returncode, (p.stdout + p.stderr).strip()))
    s.cleanups.append(lambda: subprocess.run([script, "stop", state], capture_output=True))
    return p.stdout.strip().splitlines()[-1]


def no_duplicates(s, what):
    rows = s.catalog("SELECT s.object_id, s.object_offset, count(*) FROM samples s "
                     "JOIN shards f ON f.id = s.shard_id WHERE f.state != 2 "
                     "GROUP BY 1, 2 HAVING count(*) > 1")
    if rows:
        t.fail("%s: records resident twice (DESIGN 8): %r" % (what, rows[:3]))


def fifo(s):
    s.synth(records=480, size="8K", shards=24)  # ~3.9 MB, 24 objects of ~160 KB
    url = nginx(s)
    # first_epoch 0: five epochs of 650K admit stay inside the first pass
    cfg = s.config("[cache]\nlimit = 1300K\nmin_records = 100000\nfirst_epoch = 0\n"
                   "[sampler]\nshard_size = 128K\nconnections = 3\n"
                   "[epoch 0-]\nlimit = 1300K\nadmit = 650K\npolicy = fifo\n")
    s.mount(url, "--config", cfg)
    for e in range(5):
        t.run("epoch", s.mnt, "next", "--wait", timeout=120)
        no_duplicates(s, "epoch %d" % (e + 1))
    # the samplers use up the last epoch's admit and wait: no byte moves for 1 s
    last = [None, 0]

    def still():
        cur = s.stats()["sampler"]["bytes_fetched"]
        last[1] = last[1] + 1 if cur == last[0] else 0
        last[0] = cur
        return last[1] >= 2
    t.wait_for(lambda: (time.sleep(0.5), still())[1], "the samplers to stop fetching",
               timeout=60)
    fetched = s.stats()["sampler"]["bytes_fetched"]
    again = s.catalog("SELECT key, fetches FROM objects WHERE fetches > 1")
    if again:
        t.fail("objects fetched twice within the first pass: %r" % again)
    got = s.catalog("SELECT coalesce(sum(size), 0), count(*) FROM objects WHERE fetches = 1")[0]
    listing = 8192  # the autoindex page
    if not got[0] <= fetched <= got[0] + 3 * 170000 + listing:
        # at most the objects of the 3 connections are partly fetched, waiting for room
        t.fail("downloaded %d bytes; the %d objects fetched hold %d" % (fetched, got[1], got[0]))
    print("fifo: %d objects fetched once each, %d bytes downloaded for %d" % (
        got[1], fetched, got[0]))
    s.umount()


def none(s):
    s.synth(records=480, size="8K", shards=24)
    url = nginx(s)
    # relist = 1000: no listing after the first, so every byte counted is an object's
    cfg = s.config("[cache]\nlimit = 1M\nmin_records = 100000\nfirst_epoch = 0\n"
                   "[source]\nrelist = 1000\n"
                   "[sampler]\nshard_size = 128K\nconnections = 3\n"
                   "[epoch 0-]\nlimit = 1M\nadmit = 1M\npolicy = none\n")
    s.mount(url, "--config", cfg)
    t.run("epoch", s.mnt, "next", "--wait", timeout=120)
    t.run("epoch", s.mnt, "next", "--wait", timeout=120)
    before = s.stats()["sampler"]["bytes_fetched"]
    for _ in range(2):
        t.run("epoch", s.mnt, "next", "--wait", timeout=120)
    time.sleep(1.5)
    after = s.stats()["sampler"]["bytes_fetched"]
    if after != before:
        t.fail("policy=none downloaded %d bytes after the cache froze" % (after - before))
    no_duplicates(s, "none")
    print("none: %d bytes downloaded in all, 0 after the cache froze" % after)
    s.umount()


def write_manifest(root):
    names = sorted(n for n in os.listdir(root) if n != "MANIFEST")
    tmp = os.path.join(root, "MANIFEST.tmp")
    with open(tmp, "w") as f:
        for n in names:
            f.write("%s %d\n" % (n, os.path.getsize(os.path.join(root, n))))
    os.rename(tmp, os.path.join(root, "MANIFEST"))
    return names


def manifest_statuses(s):
    """The statuses nginx gave the MANIFEST's GETs, in order (its access log)."""
    try:
        with open(os.path.join(s.root, "nginx", "access.log")) as f:
            return [int(line.split()[0]) for line in f if "GET /MANIFEST " in line]
    except FileNotFoundError:
        return []


def manifest(s):
    s.synth(records=240, size="4K", shards=12)
    names = write_manifest(s.src)
    url = nginx(s, access_log=True)
    cfg = s.config("[cache]\nlimit = 2M\nfirst_epoch = 0\n"
                   "[source]\nrelist = 1\n"
                   "[sampler]\nshard_size = 128K\nconnections = 2\n"
                   "[epoch 0-]\nlimit = 2M\nadmit = 512K\npolicy = fifo\n")
    s.mount(url, "--config", cfg)
    for _ in range(3):
        t.run("epoch", s.mnt, "next", "--wait", timeout=120)
    t.wait_for(lambda: manifest_statuses(s).count(304) >= 2,
               "two relists answered 304 (got %r)" % manifest_statuses(s), timeout=30)
    st = manifest_statuses(s)
    if st[0] != 200 or st.count(200) != 1:
        t.fail("MANIFEST statuses %r: want one 200 (the first listing), then only 304" % st)
    if s.stats()["sampler"]["listed_objects"] != len(names):
        t.fail("listed_objects %d, want %d" % (s.stats()["sampler"]["listed_objects"],
                                               len(names)))
    # a new object: the MANIFEST changes (its ETag is nginx's mtime-size)
    with open(os.path.join(s.src, names[0]), "rb") as f:
        data = f.read()
    with open(os.path.join(s.src, "zz-added.tfrecord"), "wb") as f:
        f.write(data)
    time.sleep(1.1)  # nginx's ETag holds the mtime in seconds: a new second
    write_manifest(s.src)
    seen = len(st)

    def listed():
        t.run("epoch", s.mnt, "next", "--wait", timeout=120)
        return s.stats()["sampler"]["listed_objects"] == len(names) + 1
    t.wait_for(listed, "the added object to be listed", timeout=60)
    st = manifest_statuses(s)
    if 200 not in st[seen:]:
        t.fail("MANIFEST statuses after the change %r: want a 200" % st[seen:])
    if not s.catalog("SELECT id FROM objects WHERE key = 'zz-added.tfrecord'"):
        t.fail("the added object has no catalog row")
    print("manifest: statuses %r; the added object listed" % st)
    s.umount()


def records(s):
    s.synth(records=480, size="8K", shards=24)  # ~3.9 MB in 24 objects
    keys = sorted(k for k in os.listdir(s.src) if k.endswith(".tfrecord"))
    sys.path.insert(0, HERE)
    import rcsamp
    rcsamp.write_sidecars(s.src, keys)
    url = nginx(s)
    # a cache larger than the dataset, an admit of about a third of it
    cfg = s.config("[cache]\nlimit = 8M\nmin_records = 100000\nfirst_epoch = 0\n"
                   "[source]\nrelist = 1000\n"
                   "[sampler]\nshard_size = 128K\nconnections = 3\nstrategy = records\n"
                   "[epoch 0-]\nlimit = 8M\nadmit = 1400K\npolicy = fifo\n")
    s.mount(url, "--config", cfg)

    def resident():
        return s.catalog("SELECT count(*) FROM samples s JOIN shards f ON f.id = s.shard_id "
                         "WHERE f.state != 2")[0][0]
    for e in range(8):
        if resident() == 480:
            break
        t.run("epoch", s.mnt, "next", "--wait", timeout=120)
        no_duplicates(s, "epoch %d" % (e + 1))
    t.wait_for(lambda: resident() == 480, "every record resident", timeout=60)
    t.run("epoch", s.mnt, "next", "--wait", timeout=120)
    lb = s.stats()["last_boundary"]
    if lb["admit"] != 0:
        t.fail("everything resident, yet the boundary's admit is %d: %r" % (lb["admit"], lb))
    fetched = s.stats()["sampler"]["bytes_fetched"]
    s.umount()
    s.mount(url, "--config", cfg)
    t.run("epoch", s.mnt, "next", "--wait", timeout=120)
    time.sleep(1.5)
    st = s.stats()
    if st["last_boundary"]["admit"] != 0 or st["sampler"]["records_admitted"] != 0:
        t.fail("after a restart: admit %d, %d records admitted again" % (
            st["last_boundary"]["admit"], st["sampler"]["records_admitted"]))
    no_duplicates(s, "restart")
    print("records: 480 records resident once, %d bytes downloaded; the admit cut to 0, "
          "before and after a restart" % fetched)
    s.umount()


def body(s):
    mode = os.environ.get("RC_PLAN_MOUNT", "fifo")
    {"fifo": fifo, "none": none, "manifest": manifest, "records": records}[mode](s)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        os.environ["RC_PLAN_MOUNT"] = sys.argv[1]
    t.main(body, "plan-mount")
