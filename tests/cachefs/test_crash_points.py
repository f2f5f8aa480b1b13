#!/usr/bin/env python3
"""test_crash_points.py - named crash points (common/fault.h) and the
catalog's own ENOSPC, driven through the real `rollcache` command.

  POINT   before_rename, before_sync, in_commit, plan_partial, evict, evict_running,
          stale or reconcile (one test each; plan_partial: right after a
          whole object's transfer is recorded as begun, before any of its
          bytes; evict_running and stale: in a running mount, functions
          evict_running_point and stale_point say how):
          >= 20 runs of `rollcache ingest` from a file:// dataset (for
          `evict`, `rollcache mount -f`, whose start-up boundary evicts
          above a lowered limit) with RC_FAULT=point:n, n drawn at random;
          each must end by the crash point (exit 86).  After each crash the
          cache is checked as it was left, then restarted (an ingest that
          reconciles and exits) and checked again, in full.  `reconcile`
          crashes the restart itself: each round leaves files without rows
          (a crash at before_commit, which is how before_commit gets its 20
          crashes), the next start dies while deleting them, and a clean
          start follows.
  enospc  catalog.db (a symlink, SQLite follows it) on a 256 KiB tmpfs, the
          shards on the normal disk: ingest until the catalog is full; the
          command must fail with a message and exit 1; a restart on the
          full catalog must not delete sealed data; after the tmpfs grows,
          a restart reconciles and ingest completes.  Exits 77 when tmpfs
          cannot be mounted (not root).

The checker reads catalog.db with Python's sqlite3 (read-only) and the files
with its own TFRecord parser and CRC-32C (tests/sampler/rcsamp.py), never
through rollcache.  What it asserts, by DESIGN invariant:
  1  a file id once sealed always names the same bytes (sha256 kept per id
     across the whole run), and never comes back after it was dropped
  2  every SEALED row has its file, of the row's size, in shards/ (also
     right after a crash: the row is committed last)
  4  bytes in shards/ + objects/ + tmp/ <= limit
  5  every record of a sealed file passes its CRC, the samples rows match
     the records (offset, length, crc), and the counts agree
  6  after a restart: tmp/ empty, no file without a SEALED row, no EVICTING
     row left, PRAGMA integrity_check = ok
  7  names on disk are ids only (<id>.tfrecord, <id>)
  8  no record is resident twice: by the catalog ((object, offset) pairs)
     and by the bytes (each payload at most as often as in the source)
and, once an ingest without a fault has run to its end after the crashes
(the dataset fits the limit), that none is missing: every record of the
source is resident exactly as often as the source has it, so the plan's
marks and partial objects lost nothing that a crash interrupted.
Invariant 3 needs readers holding files (fuse-pins and daemon-boundary
test it); no reader runs here.

Prints one line per point: crashes, restarts.  RC_CRASH_SEED overrides the
seed; under --setup=asan (RC_UNDER_ASAN) each point runs 6 rounds, not 20.
"""
import collections
import hashlib
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sampler"))
import rcsamp  # noqa: E402

FAULT_EXIT = 86  # common/fault.h CMN_FAULT_EXIT
# >= 20 crashes per point; under the sanitizers (10x slower processes) the
# same paths run 6 rounds each: they look for memory errors, the default
# setup for the rounds.
ROUNDS = 6 if os.environ.get("RC_UNDER_ASAN") or os.environ.get("RC_UNDER_VALGRIND") else 20
LIMIT = 10 << 20
SHARD = "4K"


def fail(why):
    rcsamp.fail(why)


class Checker:
    """Checks a cache directory against DESIGN invariants 1-8 (see above)."""

    def __init__(self, cache, source_payloads):
        self.cache = cache
        self.source = source_payloads  # Counter of every source record
        self.sha = {}  # (kind, id) -> sha256 of a file once it had a SEALED row
        self.parsed = {}  # (kind, id) -> ([(offset, length)], [payload]), CRC-checked
        self.dropped = set()  # (kind, id) sealed once, now without row or file

    def _files(self, sub, pat):
        d = os.path.join(self.cache, sub)
        out = {}
        for name in os.listdir(d) if os.path.isdir(d) else []:
            m = re.fullmatch(pat, name)
            if not m:
                fail("%s/%s: not a name made from an id (invariant 7)" % (sub, name))
            out[int(m.group(1))] = os.path.getsize(os.path.join(d, name))
        return out

    def check(self, when, restarted, limit=LIMIT, unlinked_ok=False, complete=False):
        """unlinked_ok: a crash while victims are deleted leaves EVICTING rows
        whose files are gone (docs/reliability.md); the restart finishes them.  complete: every source record must be
        resident (after an ingest ran to its end)."""
        db = sqlite3.connect("file:%s?mode=ro" % os.path.join(self.cache, "catalog.db"),
                             uri=True, timeout=10)
        try:
            return self._check(db, when, restarted, limit, unlinked_ok, complete)
        finally:
            db.close()

    def _check(self, db, when, restarted, limit, unlinked_ok, complete):
        where = "%s: " % when
        shards = self._files("shards", r"([0-9]+)\.tfrecord")
        objects = self._files("objects", r"([0-9]+)")
        tmp = os.listdir(os.path.join(self.cache, "tmp"))
        on_disk = sum(shards.values()) + sum(objects.values()) + sum(
            os.path.getsize(os.path.join(self.cache, "tmp", n)) for n in tmp)
        if on_disk > limit:  # invariant 4
            fail(where + "%d bytes on disk > limit %d (invariant 4)" % (on_disk, limit))
        rows = db.execute("SELECT id, kind, state, bytes, records FROM shards "
                          "WHERE state IN (0, 1)").fetchall()
        # GONE deletes a file's row in its transaction: no row is ever GONE
        gone = db.execute("SELECT count(*) FROM shards WHERE state NOT IN (0, 1)").fetchone()[0]
        if gone:
            fail(where + "%d rows of GONE files left in the catalog" % gone)
        rowset = {}
        unlinked = 0
        for sid, kind, state, nbytes, nrec in rows:
            files = shards if kind == 0 else objects
            if unlinked_ok and state == 1 and sid not in files:
                unlinked += 1  # an EVICTING file deleted, its GONE not committed
                continue
            rowset[(kind, sid)] = (state, nbytes, nrec)
            if state == 0 and files.get(sid) != nbytes:  # invariant 2
                fail(where + "SEALED row %d (%d bytes) has file of %r bytes (invariant 2)" %
                     (sid, nbytes, files.get(sid)))
            if state == 1 and restarted:
                fail(where + "row %d still EVICTING after a restart (invariant 6)" % sid)
        if restarted:  # invariant 6
            if tmp:
                fail(where + "tmp/ holds %s after a restart (invariant 6)" % tmp)
            for kind, files in ((0, shards), (1, objects)):
                for sid in files:
                    if (kind, sid) not in rowset:
                        fail(where + "file %d has no row after a restart (invariant 6)" % sid)
            ic = db.execute("PRAGMA integrity_check").fetchall()
            if ic != [("ok",)]:
                fail(where + "integrity_check: %r" % ic)
            # the restart's files were checked and synced: none waits for a sync point
            left = db.execute("SELECT count(*) FROM unsynced").fetchone()[0]
            if left:
                fail(where + "%d files still listed as unsynced after a clean restart" % left)
        # invariants 1 and 5, 8 on every SEALED file
        by_shard = collections.defaultdict(list)
        for r in db.execute("SELECT shard_id, offset, length, crc, object_id, object_offset "
                            "FROM samples ORDER BY shard_id, offset"):
            by_shard[r[0]].append(r[1:])
        seen_units = set()
        payloads = collections.Counter()
        for (kind, sid), (state, nbytes, nrec) in sorted(rowset.items()):
            if state != 0:
                continue
            path = os.path.join(self.cache, "shards" if kind == 0 else "objects",
                                "%d.tfrecord" % sid if kind == 0 else str(sid))
            with open(path, "rb") as f:
                data = f.read()
            h = hashlib.sha256(data).hexdigest()
            if (kind, sid) in self.dropped:
                fail(where + "file id %d came back after it was dropped (invariant 1)" % sid)
            if self.sha.setdefault((kind, sid), h) != h:
                fail(where + "file %d changed bytes (invariant 1)" % sid)
            samples = by_shard.get(sid, [])
            if len(samples) != nrec:
                fail(where + "file %d: %d samples rows, row says %d records" %
                     (sid, len(samples), nrec))
            for s in samples:
                if (s[3], s[4]) in seen_units:
                    fail(where + "record (object %d, offset %d) resident twice (invariant 8)" %
                         (s[3], s[4]))
                seen_units.add((s[3], s[4]))
            if kind != 0:
                continue
            if (kind, sid) not in self.parsed:  # bytes are fixed (sha above): parse once
                try:
                    recs = list(rcsamp.parse(data, check=True))
                except ValueError as e:  # invariant 5
                    fail(where + "file %d: bad framing or CRC: %s (invariant 5)" % (sid, e))
                for (o, p), s in zip(recs, samples):
                    if rcsamp.crc32c(p) != s[2]:
                        fail(where + "file %d offset %d: crc %08x, row says %08x" %
                             (sid, o, rcsamp.crc32c(p), s[2]))
                self.parsed[(kind, sid)] = ([(o, len(p)) for o, p in recs],
                                            [p for _, p in recs])
            meta, pays = self.parsed[(kind, sid)]
            if meta != [(s[0], s[1]) for s in samples]:
                fail(where + "file %d: records differ from its samples rows" % sid)
            payloads.update(pays)
        for p, n in payloads.items():  # invariant 8, by the bytes
            if n > self.source[p]:
                fail(where + "a record is resident %d times, the source has it %d times "
                     "(invariant 8): %r" % (n, self.source[p], p[:32]))
        if complete:
            missing = self.source - payloads
            if missing:
                fail(where + "%d of %d source records are not resident after an ingest ran "
                     "to its end: the crashes lost them" %
                     (sum(missing.values()), sum(self.source.values())))
        if restarted:
            for key in list(self.sha):
                if key not in rowset:
                    self.dropped.add(key)
        return {"files": len(rowset), "tmp": len(tmp), "unlinked": unlinked,
                "orphans": sum(1 for sid in shards if (0, sid) not in rowset)}


def run(args, env_extra=None, timeout=30):
    env = dict(os.environ)
    env.pop("RC_FAULT", None)
    env.update(env_extra or {})
    try:
        return subprocess.run(args, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        fail("%s did not end within %d s (RC_FAULT=%s)" %
             (" ".join(args[:2]), timeout, (env_extra or {}).get("RC_FAULT")))


class Rig:
    def __init__(self, root, seed):
        self.bin = rcsamp.rc_bin()
        self.root = root
        self.rng = random.Random(seed)
        self.src = os.path.join(root, "src")
        self.empty = os.path.join(root, "empty")
        self.mnt = os.path.join(root, "mnt")
        for d in (self.empty, self.mnt):
            os.makedirs(d)
        data = rcsamp.synth_dataset(self.src, 1200, 400, 60, seed=seed % 1000 + 1)
        self.source = collections.Counter(p for ps in data.values() for p in ps)
        self.restarts = 0

    def ingest(self, cache, src=None, fault=None, limit=LIMIT):
        args = [self.bin, "ingest", "file://%s/" % (src or self.src), "--cache-dir", cache,
                "--limit", str(limit), "--shard-size", SHARD, "--connections", "2",
                "--quiet", "--allow-empty", "true"]
        return run(args, {"RC_FAULT": fault} if fault else None)

    def restart(self, cache, chk, when):
        """Start-up without new data: reconciles, lists nothing, exits 0."""
        p = self.ingest(cache, src=self.empty)
        if p.returncode != 0:
            fail("%s: the restart failed (exit %d): %s" % (when, p.returncode, p.stderr))
        self.restarts += 1
        return chk.check(when + ", restarted", True)

    def crashed(self, p, point, when):
        if p.returncode != FAULT_EXIT or ("RC_FAULT: crash at " + point) not in p.stderr:
            fail("%s: expected the crash at %s (exit %d), got exit %d: %s" %
                 (when, point, FAULT_EXIT, p.returncode, p.stderr.strip()[-400:]))


def ingest_point(rig, point, nmax):
    """>= ROUNDS crashes of ingest at `point`, a fresh cache when the data runs out."""
    crashes = attempts = caches = 0
    chk = None
    cache = None
    while crashes < ROUNDS:
        attempts += 1
        if attempts > 4 * ROUNDS:
            fail("%s: only %d crashes in %d runs" % (point, crashes, attempts - 1))
        if chk is None:
            caches += 1
            cache = os.path.join(rig.root, "cache-%s-%d" % (point, caches))
            chk = Checker(cache, rig.source)
        n = rig.rng.randint(1, nmax)
        when = "%s:%d round %d" % (point, n, crashes)
        p = rig.ingest(cache, fault="%s:%d" % (point, n))
        if p.returncode == 0:  # every unit was read before the n-th pass
            chk.check(when + ", finished", False, complete=True)
            chk = None
            continue
        rig.crashed(p, point, when)
        crashes += 1
        chk.check(when + ", as the crash left it", False)
        rig.restart(cache, chk, when)
    if chk is not None:  # the last cache: finished without a fault
        p = rig.ingest(cache)
        if p.returncode != 0:
            fail("%s: the ingest after the last crash failed: %s" % (point, p.stderr))
        chk.check("%s: the ingest after the last crash" % point, False, complete=True)
    return crashes, caches


def evict_point(rig):
    """The start-up boundary of `rollcache mount -f` evicts above a limit
    lowered below what the cache holds; it dies after the n-th file."""
    cache = os.path.join(rig.root, "cache-evict")
    chk = Checker(cache, rig.source)
    p = rig.ingest(cache)
    if p.returncode != 0:
        fail("evict: filling the cache failed: " + p.stderr)
    chk.check("evict: filled", False)
    crashes = unlinked = 0
    for r in range(ROUNDS):
        resident = sum(os.path.getsize(os.path.join(cache, "shards", n))
                       for n in os.listdir(os.path.join(cache, "shards")))
        largest = max(os.path.getsize(os.path.join(cache, "shards", n))
                      for n in os.listdir(os.path.join(cache, "shards")))
        n = rig.rng.randint(1, 3)
        limit = resident - 4 * largest  # the plan evicts at least 4 files
        if limit < 64 << 10:
            fail("evict: the cache ran out of files after %d rounds" % r)
        when = "evict:%d round %d (limit %d of %d resident)" % (n, r, limit, resident)
        p = run([rig.bin, "mount", "file://%s/" % rig.src, rig.mnt, "--cache-dir", cache,
                 "--limit", str(limit), "--shard-size", SHARD, "-f"],
                {"RC_FAULT": "evict:%d" % n}, timeout=20)
        rig.crashed(p, "evict", when)
        crashes += 1
        left = chk.check(when + ", as the crash left it", False, unlinked_ok=True)
        if left["unlinked"] != n:
            fail("%s: %d EVICTING rows lost their files, expected the %d unlinked before the "
                 "crash" % (when, left["unlinked"], n))
        unlinked += left["unlinked"]
        rig.restart(cache, chk, when)
    return crashes, unlinked


def read_and_advance(rig, d, rounds=40):
    """While daemon d runs: read every file of the mount's view to the end,
    then `epoch next --wait`, `rounds` times or until d exits."""
    import glob
    for _ in range(200):  # the mount is up
        if d.poll() is not None or os.path.exists(os.path.join(rig.mnt, "current")):
            break
        time.sleep(0.05)
    for _ in range(rounds):
        if d.poll() is not None:
            return
        for f in glob.glob(os.path.join(rig.mnt, "current", "*")):
            try:
                with open(f, "rb") as fh:
                    while fh.read(1 << 16):
                        pass
            except OSError:
                pass  # retired meanwhile, or the daemon died
        if d.poll() is not None:
            return
        try:
            subprocess.run([rig.bin, "epoch", rig.mnt, "next", "--wait"],
                           capture_output=True, timeout=30)
        except subprocess.TimeoutExpired:
            pass  # the daemon died while it waited: seen by the caller


def mount_reading(rig, cache, src, limit, fault=None, rounds=40, until=None):
    """`rollcache mount -f` of src over cache, read and advanced by
    read_and_advance() until it exits (a crash point) or, with `until`, until
    until() is true; then unmounted.  Returns (exit status, stderr)."""
    env = dict(os.environ)
    env.pop("RC_FAULT", None)
    if fault:
        env["RC_FAULT"] = fault
    d = subprocess.Popen([rig.bin, "mount", "file://%s/" % src, rig.mnt, "--cache-dir",
                          cache, "--limit", str(limit), "--shard-size", SHARD,
                          "--connections", "2", "-f"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    try:
        if until is None:
            read_and_advance(rig, d, rounds)
        else:
            for _ in range(rounds):
                read_and_advance(rig, d, 1)
                if d.poll() is not None or until():
                    break
        try:
            d.wait(timeout=20 if d.poll() is None and fault else 1)
        except subprocess.TimeoutExpired:
            pass
    finally:
        if d.poll() is None:  # no crash: stop it
            subprocess.run(["fusermount3", "-u", rig.mnt], capture_output=True)
            d.wait(timeout=30)
        subprocess.run(["fusermount3", "-u", "-z", rig.mnt], capture_output=True)
    return d.returncode, d.stderr.read()


def evict_running_point(rig):
    """A running mount's deletions: `rollcache mount -f` with RC_FAULT=evict:n
    over a dataset larger than its limit; a reader reads every file of the
    view and advances the epoch until the daemon dies at the n-th file it
    deletes (a boundary's victims read and retired, or released).  Each
    round is a new mount of the same cache; a cache that stops evicting is
    replaced by a fresh one."""
    crashes = attempts = caches = 0
    chk = cache = None
    limit = 160 << 10
    while crashes < ROUNDS:
        attempts += 1
        if attempts > 3 * ROUNDS:
            fail("evict (running mount): only %d crashes in %d mounts" % (crashes, attempts - 1))
        if chk is None:
            caches += 1
            cache = os.path.join(rig.root, "cache-running-%d" % caches)
            chk = Checker(cache, rig.source)
        n = rig.rng.randint(1, 3)
        when = "evict (running mount):%d round %d" % (n, crashes)
        code, err = mount_reading(rig, cache, rig.src, limit, fault="evict:%d" % n)
        if code != FAULT_EXIT:
            chk.check(when + ", no crash (exit %d)" % code, False)
            chk = None
            continue
        if "RC_FAULT: crash at evict" not in err:
            fail("%s: exit %d without the crash line: %s" % (when, code, err[-400:]))
        crashes += 1
        left = chk.check(when + ", as the crash left it", False, unlinked_ok=True)
        if not 1 <= left["unlinked"] <= n:
            fail("%s: %d EVICTING rows lost their files, expected 1 to %d" %
                 (when, left["unlinked"], n))
        rig.restart(cache, chk, when)
    return crashes, caches


def change_objects(src, rng, k):
    """Gives k objects of src a new version (other records, one more: another
    size and mtime, which a listing sees as a change).  Returns the new
    versions' payloads and the old versions' (Counters)."""
    new, old = collections.Counter(), collections.Counter()
    for name in rng.sample(sorted(os.listdir(src)), k):
        path = os.path.join(src, name)
        with open(path, "rb") as f:
            pays = [bytes(p) for _, p in rcsamp.parse(f.read(), check=False)]
        old.update(pays)
        fresh = [b"v2:" + p[::-1] for p in pays] + [b"v2:extra:" + name.encode()]
        new.update(fresh)
        with open(path + ".tmp", "wb") as f:
            f.write(b"".join(rcsamp.frame(p) for p in fresh))
        os.replace(path + ".tmp", path)
    return new, old


def stale_point(rig):
    """Files of changed objects withdrawn by a running mount (cachefs/stale.h):
    a cache holding a whole source; then 3 of its objects get a new version,
    and `rollcache mount -f` with RC_FAULT=evict:n copies the current records
    out of the stale files and withdraws them; a reader advances the epoch
    until the daemon dies deleting the n-th of them.  As left and after a
    restart the invariants hold with either version of a changed record
    resident (never both copies of a current one); then a mount without a
    fault finishes the change, and the cache holds exactly the new source:
    every record once, no record of an old version, none lost."""
    crashes = attempts = 0
    limit = 4 << 20
    while crashes < ROUNDS:
        attempts += 1
        if attempts > 3 * ROUNDS:
            fail("stale: only %d crashes in %d mounts" % (crashes, attempts - 1))
        src = os.path.join(rig.root, "src-stale-%d" % attempts)
        shutil.copytree(rig.src, src)
        cache = os.path.join(rig.root, "cache-stale-%d" % attempts)
        chk = Checker(cache, rig.source)
        p = rig.ingest(cache, src=src, limit=limit)
        if p.returncode != 0:
            fail("stale: filling the cache failed: " + p.stderr)
        chk.check("stale: filled", False, limit=limit, complete=True)
        new, old = change_objects(src, rig.rng, 3)
        now = rig.source - old + new
        chk.source = rig.source + new  # both versions may be resident meanwhile
        n = rig.rng.randint(1, 3)
        when = "stale:%d round %d" % (n, crashes)
        code, err = mount_reading(rig, cache, src, limit, fault="evict:%d" % n, rounds=20)
        if code == FAULT_EXIT:
            if "RC_FAULT: crash at evict" not in err:
                fail("%s: exit %d without the crash line: %s" % (when, code, err[-400:]))
            crashes += 1
            chk.check(when + ", as the crash left it", False, limit=limit, unlinked_ok=True)
            p = rig.ingest(cache, src=rig.empty, limit=limit)
            if p.returncode != 0:
                fail("%s: the restart failed: %s" % (when, p.stderr))
            rig.restarts += 1
            chk.check(when + ", restarted", True, limit=limit)

        def finished():
            db = sqlite3.connect("file:%s?mode=ro" % os.path.join(cache, "catalog.db"),
                                 uri=True, timeout=10)
            try:
                return db.execute(
                    "SELECT count(*) FROM shards f JOIN shard_objects so ON so.shard_id = f.id "
                    "JOIN objects o ON o.id = so.object_id WHERE f.state = 0 AND o.state = 2"
                ).fetchone()[0] == 0 and db.execute(
                    "SELECT coalesce(sum(records), 0) FROM shards WHERE state = 0"
                ).fetchone()[0] == sum(now.values())
            finally:
                db.close()
        code, err = mount_reading(rig, cache, src, limit, rounds=40, until=finished)
        chk.source = now
        chk.check(when + ", the change finished by a mount without a fault", False,
                  limit=limit, complete=True)
    return crashes


def reconcile_point(rig):
    """Each round: a crash at before_commit leaves files without rows; the
    next start dies at the k-th of the files it deletes."""
    cache = os.path.join(rig.root, "cache-reconcile")
    chk = Checker(cache, rig.source)
    crashes = 0
    attempts = 0
    while crashes < ROUNDS:
        attempts += 1
        if attempts > 3 * ROUNDS:
            fail("reconcile: only %d crashes in %d rounds" % (crashes, attempts - 1))
        p = rig.ingest(cache, fault="before_commit:%d" % rig.rng.randint(1, 3))
        if p.returncode == 0:
            fail("reconcile: the data ran out after %d rounds" % crashes)
        rig.crashed(p, "before_commit", "reconcile round %d" % crashes)
        left = chk.check("reconcile round %d, before_commit crash" % crashes, False)
        if left["orphans"] == 0:
            fail("reconcile round %d: a crash after the rename left no file without "
                 "its row" % crashes)
        k = rig.rng.randint(1, left["orphans"])
        when = "reconcile:%d round %d (%d files without row)" % (k, crashes, left["orphans"])
        p = rig.ingest(cache, src=rig.empty, fault="reconcile:%d" % k)
        rig.crashed(p, "reconcile", when)
        crashes += 1
        chk.check(when + ", as the crash left it", False)
        rig.restart(cache, chk, when)
    return crashes


def bad_values(rig):
    """A mistyped RC_FAULT must stop the run, never pass by not crashing."""
    for i, (bad, why) in enumerate((("nosuch:1", "expected point:n"),
                                    ("in_commit", "expected point:n"),
                                    ("in_commit:0", "n must be a whole number"),
                                    ("in_commit:2x", "n must be a whole number"))):
        p = rig.ingest(os.path.join(rig.root, "cache-bad-%d" % i), fault=bad)
        if p.returncode != 2 or why not in p.stderr:
            fail("RC_FAULT=%s: expected exit 2 and %r, got %d: %s" %
                 (bad, why, p.returncode, p.stderr.strip()))


def point_before_rename(rig):
    bad_values(rig)
    c, caches = ingest_point(rig, "before_rename", 4)
    print("%-14s %d crashes, %d clean restarts (%d cache dirs)" %
          ("before_rename", c, rig.restarts, caches))


def point_before_sync(rig):
    """ingest's first sync point with files listed (one of those it runs
    every 250 ms, or its last at its end) dies before its fsyncs: every
    file sealed since the one before is still listed as unsynced; the
    restart verifies them whole, keeps them (a crash of the process loses
    no page) and syncs."""
    c, caches = ingest_point(rig, "before_sync", 1)
    print("%-14s %d crashes, %d clean restarts (%d cache dirs)" %
          ("before_sync", c, rig.restarts, caches))


def point_in_commit(rig):
    c, caches = ingest_point(rig, "in_commit", 12)
    print("%-14s %d crashes, %d clean restarts (%d cache dirs)" %
          ("in_commit", c, rig.restarts, caches))


def point_plan_partial(rig):
    c, caches = ingest_point(rig, "plan_partial", 40)
    print("%-14s %d crashes, %d clean restarts (%d cache dirs)" %
          ("plan_partial", c, rig.restarts, caches))


def point_evict(rig):
    c, unlinked = evict_point(rig)
    print("%-14s %d crashes, %d clean restarts (%d victims unlinked before their GONE was "
          "committed: finished at restart)" % ("evict", c, rig.restarts, unlinked))


def point_evict_running(rig):
    c, caches = evict_running_point(rig)
    print("%-14s %d crashes in running mounts, %d clean restarts (%d cache dirs)" %
          ("evict", c, rig.restarts, caches))


def point_reconcile(rig):
    c = reconcile_point(rig)
    print("%-14s %d crashes, each followed by a start that crashed at reconcile" %
          ("before_commit", c))
    print("%-14s %d crashes, %d clean restarts" % ("reconcile", c, rig.restarts))


def point_stale(rig):
    c = stale_point(rig)
    print("%-14s %d crashes while a running mount withdrew the files of changed objects, "
          "%d clean restarts" % ("evict", c, rig.restarts))


POINTS = {"before_rename": point_before_rename, "before_sync": point_before_sync,
          "in_commit": point_in_commit,
          "plan_partial": point_plan_partial,
          "evict": point_evict, "evict_running": point_evict_running,
          "reconcile": point_reconcile, "stale": point_stale}


def enospc(rig):
    root = rig.root
    tfs = os.path.join(root, "tmpfs")
    os.makedirs(tfs)
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", tfs],
                       capture_output=True, text=True)
    if p.returncode != 0:
        rcsamp.skip("cannot mount a tmpfs for catalog.db (needs root): " + p.stderr.strip())
    try:
        cache = os.path.join(root, "cache")
        os.makedirs(cache)
        os.symlink(os.path.join(tfs, "catalog.db"), os.path.join(cache, "catalog.db"))
        chk = Checker(cache, rig.source)
        # tiny shards: many rows per byte of data, so the catalog fills first
        p = rig.ingest(cache, limit=LIMIT)
        if p.returncode == 0:
            fail("ingest succeeded with catalog.db on a 256 KiB tmpfs: the test "
                 "data is too small to fill it")
        last = p.stderr.strip().splitlines()[-1]
        if p.returncode != 1 or "No space left on device" not in last:
            fail("ingest on a full catalog: expected exit 1 and a last line naming the "
                 "full disk, got %d: %s" % (p.returncode, last))
        print("full catalog: ingest exits 1: %s" % last)
        st = chk.check("catalog full", False)
        sealed = dict(chk.sha)
        if not sealed:
            fail("nothing was sealed before the catalog filled: no data to keep")
        # a restart on the still-full catalog: may fail, must not lose sealed data
        q = rig.ingest(cache, src=rig.empty)
        print("restart on the full catalog: exit %d %s" %
              (q.returncode, q.stderr.strip().splitlines()[-1] if q.stderr.strip() else ""))
        if q.returncode == 0:
            chk.check("restart on the full catalog", True)
        else:
            chk.check("failed restart on the full catalog", False)
        for (kind, sid), h in sealed.items():
            path = os.path.join(cache, "shards", "%d.tfrecord" % sid)
            if not os.path.exists(path):
                fail("sealed file %d was lost by the restart on a full catalog" % sid)
        # room again: the restart reconciles, ingest goes on to the end
        subprocess.run(["mount", "-o", "remount,size=16m", tfs], check=True)
        p = rig.ingest(cache)
        if p.returncode != 0:
            fail("ingest after the catalog got room: exit %d: %s" % (p.returncode, p.stderr))
        chk.check("after room", False)
        rig.restart(cache, chk, "after room")
        for key, h in sealed.items():
            if chk.sha.get(key) != h or key in chk.dropped:
                fail("sealed file %d did not survive the full catalog" % key[1])
        print("catalog ENOSPC: %d files sealed before it filled (%d left in tmp/ or "
              "without row), all kept; ingest completes once it has room" %
              (len(sealed), st["tmp"] + st["orphans"]))
    finally:
        subprocess.run(["umount", "-l", tfs], capture_output=True)


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode not in POINTS and mode != "enospc":
        print("usage: test_crash_points.py %s|enospc" % "|".join(POINTS))
        sys.exit(2)
    seed = int(os.environ.get("RC_CRASH_SEED", str(int(time.time()) % 100000)))
    print("RC_CRASH_SEED=%d" % seed)
    # Crash points end the process, not the machine: what the file system
    # holds survives either way, so a tmpfs gives the same states without
    # the disk's fsync latency (5x faster here).
    shm = "/dev/shm"
    if mode != "enospc" and os.path.isdir(shm) and os.access(shm, os.W_OK):
        root = tempfile.mkdtemp(prefix="rc-crash-%s-" % mode, dir=shm)
    else:
        root = rcsamp.tmpdir("crash-" + mode)
    t0 = time.monotonic()
    try:
        rig = Rig(root, seed)
        (enospc if mode == "enospc" else POINTS[mode])(rig)
    finally:
        # a mount -f that did not crash would have mounted: never leave it
        mnt = os.path.join(root, "mnt")
        if os.path.ismount(mnt):
            subprocess.run(["fusermount3", "-u", "-z", mnt], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)
    print("ok (%.1f s)" % (time.monotonic() - t0))


if __name__ == "__main__":
    main()
