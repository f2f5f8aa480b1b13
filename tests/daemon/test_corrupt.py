#!/usr/bin/python3
"""Integrity after admission: the five cases, real kernel mounts.

Every case flips one bit (or cuts bytes) in a sealed shard of a real cache
directory and checks that the corruption is found and that no corrupt
record is ever returned through the mount: every read either returns the
shard's original bytes or fails with EIO.

unmounted     (a) bit flipped while unmounted, then mount + read: EIO at the
              bad record, the bytes before it are the original ones,
              errors.corrupt = 1, the catalog row leaves SEALED and its
              samples go, the file leaves the next epoch and the disk, and
              the unit goes back to the sampling plan: the sampler fetches
              the object again and the next epoch shows its records again,
              byte-identical to the source.
mounted       (b) bit flipped after the mount, before the first read: EIO, the
              other shards read whole and good, errors.corrupt = 1,
              `check --cache-dir` beside the mount finds the cache clean (the
              bad file left the resident set), the next epoch omits it.
passthrough   (c) bit flipped after the file was served once (later opens are
              passed through to the kernel where it can): the scrubber
              (scrub_rate = 1G) finds it within one pass, errors.corrupt = 1,
              new reads get EIO or the original bytes, never the flipped ones.
truncated     (d) a shard cut short while unmounted is dropped at start-up,
              counted in errors.corrupt (1) and logged in log_file; one cut
              short while mounted (same size in the catalog, fewer bytes on
              disk) gives EIO at its last record and errors.corrupt = 2.
reread        (g) a shard read whole, then flipped on disk and the page cache
              dropped, read again with passthrough off: checked again (its
              ctime changed), EIO before the flipped byte, counted.
raw           (f) format = raw: a raw object flipped while unmounted (found by
              `check --cache-dir` offline, then by the first read: EIO) and
              one flipped after the mount before its first read (EIO);
              no byte of either served, errors.corrupt = 2, the good
              objects read whole.
verity        where the cache's file system has fs-verity: every sealed shard
              carries it (statx), status says `integrity.verity: on`, and a
              file served by passthrough cannot be changed (open for writing
              fails: EPERM), so its reads stay the original bytes.  Exit 77
              where it has none (this kernel may lack CONFIG_FS_VERITY).
verity-refused where it has none: `mount -o verity=on` and `ingest --verity on`
              exit 2 (a setting this cache cannot honour) with one line naming fs-verity and the way out; a
              default mount says why in `integrity.verity` and serves.  Exit
              77 where the file system has fs-verity.
check         (e) `rollcache check --cache-dir` offline: exit 0 on a clean
              cache; one flipped and one truncated shard: exit 1 and exactly
              one stderr line for each (naming it), nothing changed on disk;
              not a cache directory: exit 2 and one line.  Needs no FUSE.
"""
import errno
import fcntl
import hashlib
import os
import sqlite3
import re
import struct
import sys

import rcfuse as t


def record_offsets(data):
    """(offset, length) of each record of an uncompressed TFRecord byte string."""
    out, off = [], 0
    while off < len(data):
        (n,) = struct.unpack_from("<Q", data, off)
        out.append((off, n))
        off += 16 + n
    return out


def shard_path(s, ident):
    return os.path.join(s.cache, "shards", "%d.tfrecord" % ident)


def flip(path, pos, mask=0x10):
    mode = os.stat(path).st_mode
    os.chmod(path, 0o644)
    with open(path, "r+b") as f:
        f.seek(pos)
        b = f.read(1)
        f.seek(pos)
        f.write(bytes([b[0] ^ mask]))
        f.flush()
        os.fsync(f.fileno())
    os.chmod(path, mode & 0o7777)


def truncate(path, size):
    mode = os.stat(path).st_mode
    os.chmod(path, 0o644)
    os.truncate(path, size)
    os.chmod(path, mode & 0o7777)


def read_until_error(path, chunk=16384):
    """Reads path in chunks; returns (bytes read, errno or 0)."""
    got = bytearray()
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as e:
        return bytes(got), e.errno
    try:
        while True:
            try:
                b = os.read(fd, chunk)
            except OSError as e:
                return bytes(got), e.errno
            if not b:
                return bytes(got), 0
            got += b
    finally:
        os.close(fd)


def expect_never_corrupt(path, original, bad_pos, what):
    """Reads path through the mount: EIO, and what came before it is original bytes
    ending before the flipped byte.  Returns the bytes read."""
    got, err = read_until_error(path)
    t.eq(err, errno.EIO, "%s: errno of a read reaching the corrupt record" % what)
    if got != original[:len(got)]:
        t.fail("%s: a read returned bytes that differ from the shard's original ones" % what)
    if len(got) > bad_pos:
        t.fail("%s: %d bytes returned, past the corrupt byte at %d" % (what, len(got), bad_pos))
    return got


def corrupt_count(s):
    return s.stats()["errors"]["corrupt"]


def shard_ids(s, state=0):
    return [r[0] for r in s.catalog("SELECT id FROM shards WHERE state = ? ORDER BY id", state)]


def setup(s, records, size, shards, shard_size):
    s.synth(records=records, size=size, shards=shards)
    cfg = s.config("[cache]\nlimit = 8M\nretire = boundary\n[sampler]\nshard_size = %s\n"
                   "[epoch 0-]\nlimit = 8M\nadmit = 4M\npolicy = fifo\n" % shard_size)
    t.run("ingest", "file://%s/" % s.src, "--cache-dir", s.cache, "--config", cfg)
    ids = shard_ids(s)
    originals = {}
    for i in ids:
        with open(shard_path(s, i), "rb") as f:
            originals[i] = f.read()
    return cfg, ids, originals


def case_unmounted(s):
    # one remote object, one local shard holding all its records: dropping the
    # shard makes the object's unit non-resident, so the plan fetches it again
    cfg, ids, orig = setup(s, records=4, size="16K", shards=1, shard_size="4M")
    t.eq(len(ids), 1, "local shards after ingest")
    sid = ids[0]
    recs = record_offsets(orig[sid])
    bad_pos = recs[2][0] + 16 + recs[2][1] // 2  # payload of record 2
    flip(shard_path(s, sid), bad_pos)
    src_records = sorted(t.read_records_dir(s.src))

    # the read path alone
    s.mount("file://%s/" % s.src, "--config", cfg, "-o", "scrub_rate=0,unverified_reads=true")
    path = os.path.join(s.mnt, "current", "shard-%d.tfrecord" % sid)
    got = expect_never_corrupt(path, orig[sid], bad_pos, "(a) flipped while unmounted")
    print("(a) %d good bytes before EIO (record 2 starts at %d)" % (len(got), recs[2][0]))
    t.wait_for(lambda: corrupt_count(s) == 1, "errors.corrupt = 1")
    # again: still EIO, still counted once
    expect_never_corrupt(path, orig[sid], bad_pos, "(a) second read")
    t.eq(corrupt_count(s), 1, "errors.corrupt after a second read")
    t.eq(s.catalog("SELECT state FROM shards WHERE id = ?", sid), [(1,)],
         "catalog state of the corrupt shard (EVICTING)")
    t.eq(s.catalog("SELECT count(*) FROM samples WHERE shard_id = ?", sid), [(0,)],
         "samples of the corrupt shard (its units are resident no more)")
    ep = s.stats()["epoch"]
    t.eq(s.catalog("SELECT evicted_bytes FROM epochs WHERE number = ?", ep), [(0,)],
         "a corrupt file is not counted as evicted")

    # the next epoch omits it; the file leaves the disk; the sampler fetches
    # the object again during that epoch; the epoch after shows its records
    t.run("epoch", s.mnt, "next")
    # the corrupt file is gone from it; the object fetched again may be there
    # already (the samplers refetch it as soon as its room is free)
    after = os.listdir(os.path.join(s.mnt, "current"))
    if ("shard-%d.tfrecord" % sid) in after:
        t.fail("the epoch after the drop lists the corrupt shard: %r" % after)
    t.wait_for(lambda: not os.path.exists(shard_path(s, sid)), "the corrupt file deleted")
    # the file is unlinked before GONE deletes its row (a crash between the
    # two leaves EVICTING without a file, which start-up settles)
    t.wait_for(lambda: s.catalog("SELECT state FROM shards WHERE id = ?", sid) == [],
               "catalog GONE (the row deleted) after the unlink")
    t.wait_for(lambda: [i for i in shard_ids(s) if i != sid], "the object fetched again",
               timeout=20)
    t.run("epoch", s.mnt, "next")
    names = os.listdir(os.path.join(s.mnt, "current"))
    if not names or ("shard-%d.tfrecord" % sid) in names:
        t.fail("the epoch after the re-fetch lists %r" % names)
    again = sorted(t.read_records_dir(os.path.join(s.mnt, "current")))
    t.eq(again, src_records, "records of the re-fetched shard vs the source")
    t.eq(corrupt_count(s), 1, "errors.corrupt at the end")
    integ = s.stats()["integrity"]
    t.eq((integ["scrub_rate"], integ["scrub_passes"], integ["scrub_bytes"]), (0, 0, 0),
         "scrub_rate = 0: the scrubber read nothing")
    if integ["verified_files"] < 1:
        t.fail("the re-fetched shard was not checked on its first pass: %r" % integ)
    s.umount()


def case_mounted(s):
    cfg, ids, orig = setup(s, records=12, size="16K", shards=2, shard_size="64K")
    if len(ids) < 3:
        t.fail("expected several local shards, got %r" % ids)
    # the read path alone
    s.mount("file://%s/" % s.empty, "--config", cfg, "-o", "scrub_rate=0,unverified_reads=true")
    sid = ids[1]
    recs = record_offsets(orig[sid])
    bad_pos = recs[1][0] + 3  # the length field of record 1
    flip(shard_path(s, sid), bad_pos, mask=0x01)
    cur = os.path.join(s.mnt, "current")
    expect_never_corrupt(os.path.join(cur, "shard-%d.tfrecord" % sid), orig[sid], bad_pos,
                         "(b) flipped after the mount")
    for i in ids:
        if i == sid:
            continue
        got, err = read_until_error(os.path.join(cur, "shard-%d.tfrecord" % i))
        t.eq((err, hashlib.sha256(got).hexdigest()), (0, hashlib.sha256(orig[i]).hexdigest()),
             "(b) good shard %d read whole" % i)
    t.wait_for(lambda: corrupt_count(s) == 1, "errors.corrupt = 1")
    integ = s.stats()["integrity"]
    if integ["verified_files"] < len(ids) - 1:
        t.fail("verified_files %d, expected at least %d" % (integ["verified_files"], len(ids) - 1))
    p = t.run("check", "--cache-dir", s.cache, check=False)
    t.eq((p.returncode, p.stderr), (0, ""), "(b) check --cache-dir beside the mount")
    t.run("epoch", s.mnt, "next")
    names = sorted(os.listdir(cur))
    t.eq(names, sorted("shard-%d.tfrecord" % i for i in ids if i != sid), "(b) next epoch")
    s.umount()


def good_reads_twice(s, cfg, ids, orig, what):
    """Mounts (scrub_rate 1G) and reads the first shard twice, whole and
    original: the first pass by the daemon, then passed through where the
    kernel can.  Returns its id and its path in the mount."""
    s.mount("file://%s/" % s.empty, "--config", cfg, "-o", "scrub_rate=1G")
    sid = ids[0]
    path = os.path.join(s.mnt, "current", "shard-%d.tfrecord" % sid)
    for _ in range(2):
        got, err = read_until_error(path)
        t.eq((err, got == orig[sid]), (0, True), "%s: good reads before the flip" % what)
    return sid, path


def case_passthrough(s):
    cfg, ids, orig = setup(s, records=8, size="16K", shards=1, shard_size="64K")
    sid, path = good_reads_twice(s, cfg, ids, orig, "(c)")
    st = s.stats()
    print("(c) passthrough %s, opens passed through %d" %
          (st["view"]["passthrough"], st["view"]["passthrough_opens"]))
    t.eq(st["integrity"]["scrub_rate"], 1 << 30, "scrub_rate from -o")
    # 8 MiB at 1 GiB/s: under a second, rounded up, plus the 1 s pause
    t.eq(st["integrity"]["scrub_period_s"], 2, "integrity.scrub_period_s")
    passes = st["integrity"]["scrub_passes"]
    recs = record_offsets(orig[sid])
    bad_pos = recs[-1][0] + 16 + recs[-1][1] - 1  # last payload byte of the last record
    flip(shard_path(s, sid), bad_pos)
    t.wait_for(lambda: corrupt_count(s) == 1, "the scrubber finding the flip", timeout=10)
    if s.stats()["integrity"]["scrub_passes"] < passes:
        t.fail("scrub_passes went down")
    got, err = read_until_error(path)
    if err not in (0, errno.EIO) or got != orig[sid][:len(got)]:
        t.fail("(c) after the scrubber found it: errno %d, %d bytes (original prefix: %s)" %
               (err, len(got), got == orig[sid][:len(got)]))
    t.eq(s.catalog("SELECT state FROM shards WHERE id = ?", sid), [(1,)], "(c) catalog state")
    t.run("epoch", s.mnt, "next")
    t.eq(sorted(os.listdir(os.path.join(s.mnt, "current"))),
         sorted("shard-%d.tfrecord" % i for i in ids if i != sid), "(c) next epoch")
    s.umount()


def case_truncated(s):
    cfg, ids, orig = setup(s, records=12, size="16K", shards=2, shard_size="64K")
    if len(ids) < 3:
        t.fail("expected several local shards, got %r" % ids)
    cut_off, cut_on = ids[0], ids[1]
    truncate(shard_path(s, cut_off), len(orig[cut_off]) - 100)
    log = os.path.join(s.root, "daemon.log")
    # the read path alone
    s.mount("file://%s/" % s.empty, "--config", cfg, "-o", "scrub_rate=0,unverified_reads=true",
            "--log-file", log)
    cur = os.path.join(s.mnt, "current")
    names = sorted(os.listdir(cur))
    t.eq(names, sorted("shard-%d.tfrecord" % i for i in ids if i != cut_off),
         "(d) a shard truncated while unmounted is dropped at start-up")
    t.eq(corrupt_count(s), 1, "(d) the start-up drop counts in errors.corrupt")
    with open(log) as f:
        text = f.read()
    if not re.search(r"rollcache\[\d+\]: warn: %s: file %d has %d bytes, the catalog says %d "
                      r"\(truncated or torn\): dropped" % (re.escape(s.cache), cut_off,
                                                        len(orig[cut_off]) - 100,
                                                        len(orig[cut_off])), text):
        t.fail("(d) the start-up drop is not in the log file: %r" % text)
    recs = record_offsets(orig[cut_on])
    truncate(shard_path(s, cut_on), len(orig[cut_on]) - 1)
    expect_never_corrupt(os.path.join(cur, "shard-%d.tfrecord" % cut_on), orig[cut_on],
                         recs[-1][0], "(d) truncated while mounted")
    t.wait_for(lambda: corrupt_count(s) == 2, "errors.corrupt = 2")
    s.umount()


def tree_digest(d):
    h = hashlib.sha256()
    for root, dirs, files in sorted(os.walk(d)):
        dirs.sort()
        for n in sorted(files):
            p = os.path.join(root, n)
            with open(p, "rb") as f:
                h.update(p.encode() + b"\0" + f.read())
    return h.hexdigest()


def case_check(s):
    cfg, ids, orig = setup(s, records=12, size="16K", shards=2, shard_size="64K")
    if len(ids) < 3:
        t.fail("expected several local shards, got %r" % ids)
    p = t.run("check", "--cache-dir", s.cache, check=False)
    t.eq((p.returncode, p.stderr), (0, ""), "(e) clean cache")
    if not p.stdout.startswith("ok: %d files, 12 records" % len(ids)):
        t.fail("(e) summary: %r" % p.stdout)
    flipped, cut = ids[0], ids[-1]
    recs = record_offsets(orig[flipped])
    flip(shard_path(s, flipped), recs[0][0] + 16)  # first payload byte
    truncate(shard_path(s, cut), len(orig[cut]) - 7)
    before = tree_digest(s.cache)
    p = t.run("check", "--cache-dir", s.cache, check=False)
    lines = p.stderr.strip().split("\n")
    t.eq(p.returncode, 1, "(e) exit code with a corrupt cache")
    t.eq(len(lines), 2, "(e) one stderr line per corrupt file: %r" % p.stderr)
    for ident, word in ((flipped, "crc"), (cut, "size")):
        want = "shards/%d.tfrecord: corrupt: " % ident
        if not any(want in ln and word in ln for ln in lines):
            t.fail("(e) no line naming %s (%s): %r" % (want, word, p.stderr))
    if not p.stdout.startswith("FAILED:"):
        t.fail("(e) summary: %r" % p.stdout)
    t.eq(tree_digest(s.cache), before, "(e) the cache after check (nothing changed)")
    p = t.run("mount", "file://%s/" % s.src, s.mnt, "--limit", "1G", "--scrub-rate", "fast",
              check=False)
    t.eq(p.returncode, 2, "mount --scrub-rate fast: exit code")
    if "--scrub-rate fast: expected a rate such as 50M/s" not in p.stderr:
        t.fail("mount --scrub-rate fast: %r" % p.stderr)
    p = t.run("check", "--cache-dir", s.src, check=False)
    t.eq(p.returncode, 2, "(e) exit code for a directory that is not a cache")
    t.eq(len(p.stderr.strip().split("\n")), 1, "(e) one line: %r" % p.stderr)
    # (e) a damaged catalog: one index page zeroed (the files' checks never
    # read it; SQLite's integrity check does)
    db = os.path.join(s.cache, "catalog.db")
    con = sqlite3.connect(db)
    page = con.execute("PRAGMA page_size").fetchone()[0]
    root = con.execute("SELECT rootpage FROM sqlite_master WHERE name = "
                       "'shard_objects_object'").fetchone()[0]
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    with open(db, "r+b") as f:
        f.seek((root - 1) * page)
        f.write(b"\0" * page)
    p = t.run("check", "--cache-dir", s.cache, check=False)
    t.eq(p.returncode, 1, "(e) exit code with a damaged catalog")
    lines = p.stderr.strip().split("\n")
    if len(lines) != 1 or "integrity check failed" not in lines[0]:
        t.fail("(e) one line naming the damaged catalog: %r" % p.stderr)


def drop_caches():
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError as e:
        t.skip("dropping the page cache needs root: %s" % e)


def case_reread(s):
    """(g) a shard read whole (its first pass passed), then a bit flipped on
    disk, the page cache dropped, read again with passthrough off: the open
    sees the file changed (ctime) and checks it again, so the read gets EIO
    at the bad record and never the flipped byte; errors.corrupt = 1,
    integrity.rechecked_files = 1."""
    cfg, ids, orig = setup(s, records=12, size="16K", shards=2, shard_size="64K")
    s.mount("file://%s/" % s.empty, "--config", cfg,
            "-o", "no_passthrough,scrub_rate=0,unverified_reads=true")
    sid = ids[0]
    path = os.path.join(s.mnt, "current", "shard-%d.tfrecord" % sid)
    got, err = read_until_error(path)
    t.eq((err, got == orig[sid]), (0, True), "(g) first read of the good shard")
    recs = record_offsets(orig[sid])
    bad_pos = recs[2][0] + 16 + 5  # inside record 2's payload
    flip(shard_path(s, sid), bad_pos)
    drop_caches()
    expect_never_corrupt(path, orig[sid], bad_pos, "(g) read again after a flip")
    t.wait_for(lambda: corrupt_count(s) == 1, "errors.corrupt = 1")
    t.eq(s.stats()["integrity"]["rechecked_files"], 1, "(g) integrity.rechecked_files")
    s.umount()


def case_raw(s):
    """(f) format = raw: a flip in a raw object while unmounted, and one after
    the mount before the first read: EIO at the first read (the object is
    checked whole), never a changed byte; errors.corrupt counts each;
    `check --cache-dir` offline names the flipped object."""
    objs = {"a/%03d.bin" % i: bytes((i * 7 + j) % 251 for j in range(20000 + i))
            for i in range(6)}
    for key, data in objs.items():
        path = os.path.join(s.src, key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    t.run("ingest", "file://%s/" % s.src, "--cache-dir", s.cache, "--limit", "8M",
          "--format", "raw")
    rows = s.catalog("SELECT id, name FROM shards WHERE state = 0 AND kind = 1 ORDER BY id")
    t.eq(len(rows), len(objs), "raw objects admitted")
    by_id = {i: objs[n] for i, n in rows}
    ids = [i for i, _ in rows]

    def obj_path(i):
        return os.path.join(s.cache, "objects", str(i))

    # unmounted: check --cache-dir names it, exit 1, nothing changed
    flip(obj_path(ids[0]), 12345)
    p = t.run("check", "--cache-dir", s.cache, check=False)
    t.eq(p.returncode, 1, "(f) check --cache-dir on a flipped raw object: exit")
    if "objects/%d" % ids[0] not in p.stderr or "CRC-32C" not in p.stderr:
        t.fail("(f) check --cache-dir does not name the flipped object: %r" % p.stderr)
    s.mount("file://%s/" % s.empty, "--limit", "8M", "--format", "raw",
            "-o", "no_passthrough,scrub_rate=0,unverified_reads=true")
    cur = os.path.join(s.mnt, "current")
    flip(obj_path(ids[1]), 3)  # mounted, before its first read
    for n, i in enumerate(ids[:2]):
        got, err = read_until_error(os.path.join(cur, [k for j, k in rows if j == i][0]))
        t.eq(err, errno.EIO, "(f) first read of flipped raw object %d" % n)
        if got:
            t.fail("(f) %d bytes of a corrupt raw object were served" % len(got))
    t.wait_for(lambda: corrupt_count(s) == 2, "errors.corrupt = 2")
    name2 = [k for j, k in rows if j == ids[2]][0]
    got, err = read_until_error(os.path.join(cur, name2))
    t.eq((err, got == by_id[ids[2]]), (0, True), "(f) good raw object read whole")
    for i in ids[3:]:
        name = [k for j, k in rows if j == i][0]
        got, err = read_until_error(os.path.join(cur, name))
        t.eq((err, got == by_id[i]), (0, True), "(f) raw object %s read whole" % name)
    s.umount()


def case_rewritten(s):
    """(h) a record rewritten with a valid frame (other payload, its own CRC,
    the same length), mounted, before the first read, scrubber off: the
    frame passes its own CRC, but the first read checks the records' CRCs
    against the catalog's digest, so no byte of the file is served; counted
    in errors.corrupt."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                    "sampler"))
    import rcsamp
    cfg, ids, orig = setup(s, records=12, size="16K", shards=2, shard_size="64K")
    s.mount("file://%s/" % s.empty, "--config", cfg, "-o",
            "no_passthrough,scrub_rate=0,unverified_reads=true")
    sid = ids[1]
    off, length = record_offsets(orig[sid])[1]
    payload = bytes(b ^ 0x5A for b in orig[sid][off + 12:off + 12 + length])
    fr = rcsamp.frame(payload)
    t.eq(len(fr), length + 16, "(h) the rewritten frame has the record's size")
    with open(shard_path(s, sid), "r+b") as f:
        f.seek(off)
        f.write(fr)
    path = os.path.join(s.mnt, "current", "shard-%d.tfrecord" % sid)
    got, err = read_until_error(path)
    t.eq(err, errno.EIO, "(h) first read of a file with a rewritten record")
    if got:
        t.fail("(h) %d bytes of a file with a rewritten record were served" % len(got))
    t.wait_for(lambda: corrupt_count(s) == 1, "errors.corrupt = 1")
    for i in ids:
        if i != sid:
            got, err = read_until_error(os.path.join(s.mnt, "current", "shard-%d.tfrecord" % i))
            t.eq((err, got == orig[i]), (0, True), "(h) good shard %d read whole" % i)
    s.umount()


def verity_state(s, cfg):
    """integrity.verity of a default mount of the set-up cache (umounted again)."""
    s.mount("file://%s/" % s.empty, "--config", cfg)
    state = s.stats()["integrity"]["verity"]
    s.umount()
    return state


def case_verity(s):
    cfg, ids, orig = setup(s, records=8, size="16K", shards=1, shard_size="64K")
    state = verity_state(s, cfg)
    if state != "on":
        t.skip("the cache's file system has no fs-verity here (%s)" % state)
    for i in ids:
        with open(shard_path(s, i), "rb") as f:
            # FS_IOC_GETFLAGS (_IOR('f', 1, long)); FS_VERITY_FL 0x00100000
            flags = struct.unpack_from("=i", fcntl.ioctl(f.fileno(), 0x80086601, bytes(8)))[0]
            if not flags & 0x00100000:
                t.fail("shard %d was sealed without fs-verity" % i)
    sid, path = good_reads_twice(s, cfg, ids, orig, "verity")
    try:
        flip(shard_path(s, sid), len(orig[sid]) - 1)
        t.fail("verity: a sealed shard was opened for writing")
    except PermissionError:
        pass
    got, err = read_until_error(path)
    t.eq((err, got == orig[sid]), (0, True), "verity: the read after the refused flip")
    t.eq(corrupt_count(s), 0, "errors.corrupt")
    s.umount()


def case_verity_refused(s):
    cfg, ids, orig = setup(s, records=8, size="16K", shards=1, shard_size="64K")
    state = verity_state(s, cfg)
    if state == "on":
        t.skip("the cache's file system has fs-verity: verity = on cannot be refused here")
    if not state.startswith("unavailable: "):
        t.fail("integrity.verity of a default mount: %r" % state)
    for what, args in (
            ("mount", ("mount", "file://%s/" % s.empty, s.mnt, "--cache-dir", s.cache,
                       "--config", cfg, "--allow-empty", "true", "-o", "verity=on")),
            ("ingest", ("ingest", "file://%s/" % s.src, "--cache-dir", s.cache,
                        "--config", cfg, "--verity", "on"))):
        p = t.run(*args, check=False)
        lines = p.stderr.strip().splitlines()
        t.eq((p.returncode, len(lines)), (2, 1), "%s with verity = on: exit and stderr lines "
             "(stderr: %r)" % (what, p.stderr))
        for word in ("fs-verity", "verity = auto"):
            if word not in lines[0]:
                t.fail("%s: its line does not say %r: %s" % (what, word, lines[0]))
    if t.is_mounted(s.mnt):
        t.fail("mount with verity = on left a mount behind")
    # nothing lost: the cache still mounts with the default and serves its shards
    s.mount("file://%s/" % s.empty, "--config", cfg)
    for i in ids:
        got, err = read_until_error(os.path.join(s.mnt, "current", "shard-%d.tfrecord" % i))
        t.eq((err, got == orig[i]), (0, True), "shard %d after the refusals" % i)
    s.umount()


CASES = {
    "unmounted": case_unmounted,
    "mounted": case_mounted,
    "passthrough": case_passthrough,
    "truncated": case_truncated,
    "check": case_check,
    "raw": case_raw,
    "reread": case_reread,
    "rewritten": case_rewritten,
    "verity": case_verity,
    "verity-refused": case_verity_refused,
}

if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode not in CASES:
        print("usage: test_corrupt.py %s" % "|".join(CASES))
        sys.exit(2)
    if mode == "check":  # no FUSE
        sc = t.Scratch("corrupt-check")
        try:
            case_check(sc)
        except AssertionError as e:
            print("FAIL: %s" % e)
            sc.close()
            sys.exit(1)
        sc.close()
        print("ok")
        sys.exit(0)
    t.main(CASES[mode], "corrupt-" + mode)
