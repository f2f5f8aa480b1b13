#!/usr/bin/python3
"""fuse-retire-read, -boundary, -read-restart: `retire = read` on a real mount (DESIGN "Epochs").

A file:// dataset four times the limit, fifo, admit = half the limit,
advanced with `rollcache epoch MNT next --wait` and read like the feeder
reads: every file of epochs/N once, to the end.  Proves, per epoch once the
cache is full:
  - the victims of a boundary stay in the new epoch's view and leave as soon
    as they were read in it (catalog GONE before the next boundary), so the
    view is the whole cache: >= 0.9 x limit (with `retire = boundary` it is
    about limit - admit);
  - the room they free goes to the samplers at once: files sealed during
    epoch E (created_epoch E) are in E+1's view;
  - bytes on disk, sampled every 100 ms by a thread (du of shards/ and tmp/),
    never exceed the limit (invariant 4);
  - each victim, once read in full and closed, leaves readdir of current/
    and epochs/E and its lookup gets ENOENT at once (not at the next
    boundary), and `status --json` counts what `ls current/` shows; after
    the epoch's reads the stats' current files/bytes/records and the index
    .rollcache/epochs/E agree with the listing.
Argument `boundary` runs the same loop with `retire = boundary` and checks
the contrast: the median view once full is at most limit - admit / 2 (about
limit - admit: 0.48-0.51 x limit on a quiet machine; more when a loaded
machine's slow samplers leave room free at the boundary, filled while
`next --wait` waits, or seal the transfers in flight at its pause, whose
room the new admit pays for); then a feeder
(world_size 1) opens on the mount, which turns retire = read on: the
boundary it drives keeps its victims in the view (>= 0.9 x limit).
Argument `restart` (fuse-retire-read-restart): SIGKILL right after a
boundary, its victims unread; the restart keeps them, its epoch's admit is
the room they hold (at least admit / 2), and the first view after it is
>= 0.9 x limit.
"""
import json
import os
import sys

import rcfuse as t

LIMIT = 8 << 20
ADMIT = 4 << 20
SHARD = 256 << 10
EPOCHS = 7


def body(s, mode):
    s.synth(records=2048, size="16K", shards=16)  # ~32 MiB: four times the limit
    cfg = s.config("[cache]\nlimit = %d\nretire = %s\nmin_records = 100000\nwait_timeout = 3s\n"
                   "[sampler]\nshard_size = %d\n"
                   "[epoch 0-]\nlimit = %d\nadmit = %d\npolicy = fifo\n"
                   % (LIMIT, mode, SHARD, LIMIT, ADMIT))
    s.mount("file://%s/" % s.src, "--config", cfg)
    disk = t.DiskPeak(s, every=0.1)
    views = []
    for i in range(EPOCHS):
        t.run("epoch", s.mnt, "next", "--wait", timeout=60)
        st = s.stats()
        e = st["epoch"]
        cur = os.path.join(s.mnt, "epochs", str(e))
        names = sorted(os.listdir(cur))
        view = st["current"]["bytes"]
        ids = set(int(n[len("shard-"):-len(".tfrecord")]) for n in names)
        # fresh data of the previous epoch is in this one's view (a file
        # admitted and already GONE has no row: the counter counts it)
        nprev = s.catalog("SELECT admitted_files FROM epochs WHERE number = ?", e - 1)
        nprev = nprev[0][0] if nprev else 0
        sealed_prev = set(x for (x,) in s.catalog(
            "SELECT id FROM shards WHERE created_epoch = ?", e - 1))
        if mode == "read" and not sealed_prev <= ids:
            t.fail("epoch %d: files admitted during %d not in the view: %r"
                   % (e, e - 1, sorted(sealed_prev - ids)))
        # the victims' rows stay while they are EVICTING (read: until read;
        # boundary: until the reaper deletes them, at once)
        victims = [x for (x,) in s.catalog(
            "SELECT id FROM shards WHERE evicted_epoch = ?", e)]
        nvictims = s.catalog("SELECT evicted_files FROM epochs WHERE number = ?", e)[0][0]
        # disk.retiring: the victims the new view still lists, none read yet
        # (read) or none at all (boundary: they left the view at once)
        vbytes = s.catalog("SELECT coalesce(sum(bytes), 0) FROM shards WHERE evicted_epoch = ?",
                           e)[0][0]
        t.eq(st["disk"]["retiring"], vbytes if mode == "read" else 0,
             "epoch %d: disk.retiring after the boundary" % e)
        for n in names:  # the reader: every file once, to the end
            path = os.path.join(cur, n)
            try:
                with open(path, "rb") as f:
                    while f.read(1 << 20):
                        pass
            except FileNotFoundError:
                t.fail("epoch %d: %s listed but gone before it was read" % (e, n))
            if mode == "read" and int(n[len("shard-"):-len(".tfrecord")]) in victims:
                consumed(s, e, cur, path, n)
        if mode == "read":
            listing_agrees(s, e, cur)
        if mode == "read" and victims:
            # read and closed: each victim leaves now, not at the next boundary
            # (GONE: its row deleted), and was counted read, not unread
            t.wait_for(lambda: s.catalog(
                "SELECT count(*) FROM shards WHERE evicted_epoch = ?", e)[0][0] == 0,
                "the %d victims of epoch %d to retire once read" % (len(victims), e))
            t.eq(s.catalog("SELECT unread_files FROM epochs WHERE number = ?", e), [(0,)],
                 "epoch %d: victims deleted unread" % e)
            # retired: gone from the listing (a reader listing now cannot find them)
            left = set(int(n[len("shard-"):-len(".tfrecord")]) for n in os.listdir(cur))
            if left & set(victims):
                t.fail("epoch %d: retired files still listed: %r" % (e, sorted(left & set(victims))))
        # the admit the boundary granted: the schedule's, or less when files
        # admitted after the last snapshot (never in a view, so never victims)
        # or the plan's wanted bytes hold room (reason in last_boundary)
        granted = st["last_boundary"]["admit"]
        # what the boundary kept: the view less the files the samplers sealed
        # while `next --wait` waited (created in e: room the cache had free)
        sizes = s.catalog("SELECT id, bytes FROM shards WHERE created_epoch < ?", e)
        kept = sum(b for i, b in sizes if i in ids)
        views.append((e, len(names), view, nvictims, nprev, granted, kept))
        print("epoch %d: %d files, view %.2f MiB (%.2f x limit), %d victims retiring, "
              "%d files admitted during %d, admit granted %d (%s)"
              % (e, len(names), view / 2**20, view / LIMIT, nvictims, nprev, e - 1,
                 granted, st["last_boundary"]["reason"]))
    peak = disk.stop()
    budget_peak = s.stats()["disk"]["peak"]
    print("peak bytes on disk (sampled every 100 ms): %d (one scan: %d); the budget's "
          "peak %d; limit %d" % (peak, disk.one_scan_peak, budget_peak, LIMIT))
    if peak > LIMIT or budget_peak > LIMIT:
        t.fail("bytes on disk %d (the budget's peak %d) above the limit %d (invariant 4)"
               % (peak, budget_peak, LIMIT))
    full = [v for v in views[3:]]  # the cache is full after limit / admit epochs
    for e, n, view, nv, _, granted, kept in full:
        if mode == "read" and view < 0.9 * LIMIT:
            t.fail("epoch %d: view %d bytes < 0.9 x limit with retire = read" % (e, view))
        if mode == "boundary" and view > LIMIT:
            t.fail("epoch %d: view %d bytes with retire = boundary (kept %d, admit granted "
                   "%d): above the limit" % (e, view, kept, granted))
    if mode == "boundary":
        med = sorted(v[2] for v in full)[len(full) // 2]
        if med > LIMIT - ADMIT // 2:
            t.fail("median view %d bytes with retire = boundary: expected about limit - "
                   "admit, at most limit - admit / 2" % med)
    if mode == "boundary":
        feeder_turns_retire_read_on(s)
    s.umount()


def read_all(s, e):
    """The reader: every file of epochs/e once, to the end; returns the bytes read."""
    cur = os.path.join(s.mnt, "epochs", str(e))
    total = 0
    for n in sorted(os.listdir(cur)):
        with open(os.path.join(cur, n), "rb") as f:
            while True:
                b = f.read(1 << 20)
                if not b:
                    break
                total += len(b)
    return total


def restart(s):
    """kill -9 right after a boundary, its victims unread: the restart keeps
    them to retire in the epoch it starts at, and their room is that
    epoch's admit as it is a boundary's own under retire = read, so the
    samplers fill it while they are read and the next view is the whole
    cache again (not limit - admit: the room held for the kept victims
    once went to nobody)."""
    import signal
    s.synth(records=2048, size="16K", shards=16)
    cfg = s.config("[cache]\nlimit = %d\nretire = read\nmin_records = 100000\n"
                   "wait_timeout = 3s\n[sampler]\nshard_size = %d\n"
                   "[epoch 0-]\nlimit = %d\nadmit = %d\npolicy = fifo\n"
                   % (LIMIT, SHARD, LIMIT, ADMIT))
    pid = s.mount("file://%s/" % s.src, "--config", cfg)
    for _ in range(4):
        t.run("epoch", s.mnt, "next", "--wait", timeout=60)
        e = s.stats()["epoch"]
        if _ < 3:
            read_all(s, e)
    kept = s.catalog("SELECT count(*), coalesce(sum(bytes), 0) FROM shards "
                     "WHERE evicted_epoch = ? AND state = 1", e)[0]
    if kept[0] == 0:
        t.fail("epoch %d: no victims left unread to keep" % e)
    os.kill(pid, signal.SIGKILL)
    t.wait_for(lambda: not t.pid_alive(pid), "the daemon to die")
    t.run("umount", s.mnt)
    s.mounts.remove(s.mnt)
    s.mount("file://%s/" % s.src, "--config", cfg)
    st = s.stats()
    granted = st["last_boundary"]["admit"]
    print("killed in epoch %d with %d victims (%d bytes) unread; the restart's epoch %d "
          "admits %d bytes (%s)" % (e, kept[0], kept[1], st["epoch"], granted,
                                    st["last_boundary"]["reason"]))
    # the room the limit has besides the files kept resident: the admit, less
    # what the boundary's victims left over it (shard sizes, transfers sealed
    # at its pause); with the kept victims' room held from it, next to nothing
    if granted < ADMIT // 2:
        t.fail("the restart's admit %d < admit / 2 = %d: the kept victims' room (%d bytes) "
               "was held from it" % (granted, ADMIT // 2, kept[1]))
    read_all(s, st["epoch"])  # the kept victims retire as they are read
    t.run("epoch", s.mnt, "next", "--wait", timeout=60)
    view = s.stats()["current"]["bytes"]
    print("the first view after the restart: %.2f x limit" % (view / LIMIT))
    if view < 0.9 * LIMIT:
        t.fail("the first view after the restart %d bytes < 0.9 x limit" % view)
    s.umount()


def consumed(s, e, cur, path, n):
    """A victim read in full and closed leaves at once (DESIGN invariant 3):
    gone from readdir of current/ and of epochs/E, a lookup of its name
    gets ENOENT (the kernel's cached entry was dropped), and `status
    --json` counts what `ls current/` shows.  Its release reaches the
    daemon after close() returns, hence the short wait."""
    ep = os.path.join(s.mnt, "epochs", str(e))
    t.wait_for(lambda: n not in os.listdir(cur) and n not in os.listdir(ep)
               and not os.path.exists(path) and not os.path.exists(os.path.join(ep, n)),
               "epoch %d: %s, read and closed, to leave the listing and its lookup" % (e, n),
               timeout=5)
    try:
        open(path, "rb").close()
        t.fail("epoch %d: %s opens after it retired" % (e, n))
    except FileNotFoundError:
        pass
    js = json.loads(t.run("status", s.mnt, "--json").stdout)
    t.eq(js["current"]["files"], len(os.listdir(cur)),
         "epoch %d: status --json current.files vs len(os.listdir(current))" % e)


def listing_agrees(s, e, cur):
    """After the epoch's reads: the stats' current files/bytes/records and the
    index .rollcache/epochs/E are what current/ lists."""
    names = sorted(os.listdir(cur))
    st = s.stats()
    t.eq(st["current"]["files"], len(names), "epoch %d: stats current.files" % e)
    t.eq(st["current"]["bytes"], sum(os.path.getsize(os.path.join(cur, n)) for n in names),
         "epoch %d: stats current.bytes vs the sizes of the listed files" % e)
    with open(os.path.join(s.mnt, ".rollcache", "epochs", str(e))) as f:
        lines = [line.rsplit(" ", 2) for line in f.read().splitlines()]
    t.eq([x[0] for x in lines], names, "epoch %d: the index's names vs current/" % e)
    t.eq(sum(int(x[2]) for x in lines), st["current"]["records"],
         "epoch %d: records in the index vs stats current.records" % e)


FEEDER_CHILD = r"""
import json, os, sys
sys.path.insert(0, os.path.join(sys.argv[1], "python"))
import rollcache
mnt = sys.argv[2]
def stats():
    with open(os.path.join(mnt, ".rollcache", "stats")) as f:
        return json.load(f)
out = {"before": stats()["retire"]}
f = rollcache.Feeder(os.path.join(mnt, "current"), schema="y:int64[1]", batch_size=64,
                     rank=0, world_size=1, device="cpu", framework="numpy")
try:
    st = stats()
    out.update(open=st["retire"], e0=st["epoch"],
               rec_bytes=st["current"]["bytes"] / max(1, st["current"]["records"]))
    out["n0"] = sum(b["y"].shape[0] for b in f)
    f.next_epoch()  # "next e0+1": the boundary runs with retire = read
    out["e1"] = stats()["epoch"]
    out["n1"] = sum(b["y"].shape[0] for b in f)  # it reads the victims while they retire
finally:
    f.close()
out["closed"] = stats()["retire"]
print(json.dumps(out))
"""


def feeder_turns_retire_read_on(s):
    """A feeder with world_size 1 on the mount asks for retire = read: the
    next boundary, which it drives, keeps its victims in the view; at close
    the configured mode comes back.  The feeder runs in a child process
    (under ASan it needs the runtime preloaded, the daemon does not)."""
    import json
    import subprocess
    env = dict(os.environ)
    if os.environ.get("RC_UNDER_ASAN"):
        asan = subprocess.check_output(["gcc", "-print-file-name=libasan.so"]).decode().strip()
        env.update(LD_PRELOAD=asan,
                   ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0")
    p = subprocess.run(["/usr/bin/python3", "-c", FEEDER_CHILD, t.SRCDIR, s.mnt],
                       capture_output=True, text=True, timeout=120, env=env)
    if p.returncode != 0:
        t.fail("the feeder: exit %d: %s" % (p.returncode, p.stderr[-2000:]))
    r = json.loads(p.stdout.strip().splitlines()[-1])
    t.eq(r["before"], "boundary", "retire mode before a feeder opened")
    t.eq(r["open"], "read", "retire mode once a feeder opened on the mount")
    t.eq(r["e1"], r["e0"] + 1, "the epoch after the feeder's next_epoch()")
    print("feeder: %d records in epoch %d (retire = boundary), %d in epoch %d, which it "
          "drove (%.2f x limit)" % (r["n0"], r["e0"], r["n1"], r["e1"],
                                    r["n1"] * r["rec_bytes"] / LIMIT))
    if r["n1"] * r["rec_bytes"] < 0.9 * LIMIT:
        t.fail("epoch %d (driven by the feeder): %d records, %.2f x limit: the boundary's "
               "victims were not in its view (retire = read)"
               % (r["e1"], r["n1"], r["n1"] * r["rec_bytes"] / LIMIT))
    t.eq(r["closed"], "boundary", "retire mode once the feeder closed (the configured one)")


mode = sys.argv[1] if len(sys.argv) > 1 else "read"
t.main(restart if mode == "restart" else lambda s: body(s, mode), "retire-" + mode)
