#!/usr/bin/python3
"""eviction-fuse-schedule, eviction-fuse-min-uses: the schedule on a real FUSE
mount.  Argument: the mode, `schedule` (default) or `min-uses`.

A `rollcache synth` dataset (file:// source, larger than every limit) is
mounted with the schedule

    [epoch 0-2] limit 768K  admit 384K  fifo   small, rolling window
    [epoch 3-4] limit 1536K admit 512K  lru    larger
    [epoch 5-]  limit 1M    admit 512K  none   frozen, and the limit shrinks

and advanced through seven epochs with `rollcache epoch MNT next --wait`,
reading every file of current/ through the mount in each epoch (in the lru
epochs newest file first, so that lru and fifo pick different victims).

Before each boundary the test waits until the samplers hold no reservation
(their admit is used up), snapshots the catalog, and computes from the
schedule, with its own model of DESIGN "Epochs" step 1 (docs/eviction.md,
"The epoch boundary"), which files the boundary must evict, what resident
bytes it leaves and what admit budget it grants.  Proves:
  - the entry in force at each epoch (limit, policy) is the schedule's, in
    the catalog and in stats JSON;
  - the victims of each boundary are exactly the model's (fifo: oldest
    admitted; lru: least recently read; none: nothing, then the shrunk limit
    evicts in admission order), resident bytes at the start are what is left,
    the granted admit is min(admit, limit - used) and 0 once `none` is full;
  - admitted bytes per epoch <= the granted admit, disk use <= limit;
  - stats JSON, the catalog (read with Python's sqlite3) and
    `rollcache report --json` agree;
  - a file held open across the boundary that would have evicted it is
    pinned (DESIGN invariant 3): the boundary takes the next files in policy
    order instead, the held file stays SEALED and keeps reading
    byte-identical (same bytes as a full read before the boundary, valid
    TFRecord framing, records of the source).

Mode `min-uses` runs one entry, `[epoch 0-] limit 768K admit 512K fifo
min_uses 2`, over five epochs: files read fewer than twice cannot make room,
so the boundaries cut the admit budget (reason `min_uses`, said in stats and
`rollcache status`) without stopping the epoch, and once the oldest files
were read twice they go and the full admit comes back (no deadlock),
each boundary again exactly as the model says.
"""
import hashlib
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "daemon"))
import rcfuse as t  # noqa: E402

K = 1024
CACHE_LIMIT = 2048 * K
SHARD = 128 * K
MODE = sys.argv[1] if len(sys.argv) > 1 else "schedule"
if MODE == "schedule":
    # (first, last or None, limit, admit, policy, min_uses)
    SCHEDULE = [
        (0, 2, 768 * K, 384 * K, "fifo", 0),
        (3, 4, 1536 * K, 512 * K, "lru", 0),
        (5, None, 1024 * K, 512 * K, "none", 0),
    ]
    EPOCHS = 7  # 0 .. 6
    HOLD_AT = 5  # the boundary whose first victim is held open across it
elif MODE == "min-uses":
    # admit more than limit - admit can free while files are read fewer than
    # min_uses times: the budget is cut (no deadlock), then flows again
    SCHEDULE = [(0, None, 768 * K, 512 * K, "fifo", 2)]
    EPOCHS = 5
    HOLD_AT = None
else:
    t.fail("unknown mode %s (schedule | min-uses)" % MODE)


def entry(e):
    for first, last, limit, admit, policy, min_uses in SCHEDULE:
        if e >= first and (last is None or e <= last):
            return {"limit": limit, "admit": admit, "policy": policy, "min_uses": min_uses}
    t.fail("no schedule entry for epoch %d" % e)


def section(e):
    for first, last, _, _, _, _ in SCHEDULE:
        if e >= first and (last is None or e <= last):
            return "%d-%s" % (first, "" if last is None else last)


def config_text():
    # first_epoch = 0: the epochs here are the schedule's, from an empty epoch 0
    # (the automatic first epoch of a new cache is tested by fuse-first-epoch-nginx)
    # retire = boundary: the model below is of victims that leave at the boundary
    out = ["[cache]", "limit = %d" % CACHE_LIMIT, "min_records = 1000000", "first_epoch = 0",
           "retire = boundary",
           "[sampler]", "shard_size = %d" % SHARD, "connections = 2"]
    for first, last, limit, admit, policy, min_uses in SCHEDULE:
        rng = "%d-%s" % (first, "" if last is None else last)
        out += ["[epoch %s]" % rng, "limit = %d" % limit, "admit = %d" % admit,
                "policy = %s" % policy, "min_uses = %d" % min_uses]
    return "\n".join(out) + "\n"


def plan(ent, files, other, started, pinned=(), fresh=()):
    """Model of evc_plan_boundary(): files with an open handle (ids in
    `pinned`) are never victims; fresh files (ids in `fresh`: sealed after
    the ending epoch's snapshot, never in a view) are not victims of the
    soft phase.

    files: catalog rows at the boundary (dicts); other: reserved + draining
    bytes.  Returns (victim ids in order, used after, granted admit, reason).
    """
    def fifo_key(f):
        return (f["created_epoch"], f["id"])

    def lru_key(f):
        last = f["last_read_ms"] or started.get(f["created_epoch"], 0)
        return (last, f["created_epoch"], f["id"])

    order = [f for f in sorted(files, key=lru_key if ent["policy"] == "lru" else fifo_key)
             if f["id"] not in pinned]
    soft = [f for f in order if f["id"] not in fresh]
    used = other + sum(f["bytes"] for f in files)
    used_before = used
    target = max(ent["limit"] - ent["admit"], 0)
    victims = []
    if ent["policy"] != "none":  # soft phase: the policy, above min_uses only
        for f in soft:
            if used <= target:
                break
            if f["full_reads"] < ent["min_uses"]:
                continue
            victims.append(f["id"])
            used -= f["bytes"]
    if used > ent["limit"]:  # hard phase: a shrunk limit; none evicts in admission order
        for f in order:
            if used <= ent["limit"]:
                break
            if f["id"] not in victims:
                victims.append(f["id"])
                used -= f["bytes"]
    room = max(ent["limit"] - used, 0)
    largest = max([f["bytes"] for f in files] or [0])
    if ent["policy"] == "none" and (used_before >= ent["limit"]
                                    or ent["limit"] - used_before < largest):
        room = 0  # full: no room for one more file of the largest size
    admit = min(room, ent["admit"])
    kept = [f for f in files if f["id"] not in victims and f["id"] not in pinned]
    held_fresh = sum(f["bytes"] for f in kept if f["id"] in fresh)
    held_min_uses = sum(f["bytes"] for f in kept
                        if f["id"] not in fresh and f["full_reads"] < ent["min_uses"])
    held_pinned = other + sum(f["bytes"] for f in files if f["id"] in pinned)
    if admit == ent["admit"]:
        reason = "ok"  # (limit_forced needs min_uses shards in a hard phase: not staged)
    elif used > ent["limit"]:
        reason = "over_limit"
    elif ent["policy"] == "none":
        reason = "frozen"
    elif held_fresh > held_pinned and held_fresh > held_min_uses:
        reason = "fresh"
    elif held_min_uses >= held_pinned:
        reason = "min_uses"
    else:
        reason = "pinned"  # what holds the room is open files, reserved/draining bytes
    return victims, used, admit, reason


def sealed_files(s):
    rows = s.catalog("SELECT id, bytes, records, created_epoch, last_read_ms, full_reads "
                     "FROM shards WHERE state = 0 ORDER BY id")
    keys = ("id", "bytes", "records", "created_epoch", "last_read_ms", "full_reads")
    return [dict(zip(keys, r)) for r in rows]


def epochs_rows(s):
    cols = ("number", "started_ms", "admitted_bytes", "admitted_records", "evicted_bytes",
            "evicted_records", "read_bytes", "limit_bytes", "admit_bytes", "policy",
            "resident_files", "resident_bytes", "resident_records")
    rows = s.catalog("SELECT %s FROM epochs ORDER BY number" % ", ".join(cols))
    return {r[0]: dict(zip(cols, r)) for r in rows}


def quiesce(s):
    """Waits until the samplers are blocked on the budget (the epoch's admit
    is used up) or done with their pass, and the disk figures stay put:
    nothing more is sealed or reserved before the next boundary, which runs
    before the budget grants anything new.  A writer may keep a reservation
    for a half-filled shard; the boundary counts it (`other`), and so does
    the model.  Returns the stats read then."""
    last = [None]
    calm = []  # consecutive blocked reads with the same disk figures

    def quiet():
        st = s.stats()
        last[0] = st
        sm, adm = st["sampler"], st["admission"]
        blocked = sm["idle"] or adm["waiting_admit"] or adm["waiting_limit"]
        key = (st["disk"], sm["bytes_admitted"])
        if not blocked or (calm and calm[-1] != key):
            calm.clear()
        if blocked:
            calm.append(key)
        return len(calm) >= 5  # about 1 s: a shard queued for sealing is sealed by then

    try:
        t.wait_for(lambda: (time.sleep(0.2), quiet())[1],
                   "the samplers to stop admitting (admit used up)", timeout=60)
    except AssertionError:
        st = last[0] or {}
        t.fail("epoch %s: samplers still admitting after 60 s: disk %s, admission %s, "
               "sampler %s" % (st.get("epoch"), st.get("disk"), st.get("admission"),
                               st.get("sampler")))
    return last[0]


def shard_path(s, fid):
    return os.path.join(s.cache, "shards", "%d.tfrecord" % fid)


def read_current(s, src_recs, newest_first, seen):
    """Reads every file of current/ through the mount, to the end; adds
    their records to the set `seen`."""
    cur = os.path.join(s.mnt, "current")
    names = os.listdir(cur)
    ids = sorted((int(n[len("shard-"):-len(".tfrecord")]) for n in names),
                 reverse=newest_first)
    total = 0
    for i in ids:
        with open(os.path.join(cur, "shard-%d.tfrecord" % i), "rb") as f:
            data = f.read()
        total += len(data)
        seen.update(t.tfrecords(data))
        bad = [r for r in t.tfrecords(data) if r not in src_recs]
        t.eq(len(bad), 0, "records of shard-%d not in the source" % i)
        if newest_first:
            time.sleep(0.02)  # distinct last-read ticks (coarse clock): a strict lru order
    return ids, total


def body(s):
    s.synth(records=640, size="8K", shards=8)  # ~5.3 MB: larger than every limit
    src_recs = set(t.read_records_dir(s.src))
    cfg = s.config(config_text())
    s.mount("file://%s/" % s.src, "--config", cfg)

    held = None  # (file object, bytes read so far, full bytes, id)
    report_lines = []
    seen_recs, seen_by = set(), []  # the reader's own count of `seen`
    opens = []  # the reader's own count of `read` (files opened and read) per epoch
    held_carry = 0
    # the test's own tally of files admitted and evicted per epoch: a GONE
    # file has no row left in the catalog to count
    created_of, victims_of = {}, {}
    for e in range(EPOCHS):
        st = s.stats()
        t.eq(st["epoch"], e, "stats epoch")
        ent = entry(e)
        t.eq((st["schedule"]["limit"], st["schedule"]["policy"], st["schedule"]["min_uses"]),
             (ent["limit"], ent["policy"], ent["min_uses"]),
             "stats schedule entry in force at epoch %d" % e)
        ids, nread = read_current(s, src_recs, ent["policy"] == "lru", seen_recs)
        seen_by.append(len(seen_recs))  # distinct records served by the end of e
        opens.append(len(ids) + held_carry)  # each file of the view opened and read once
        held_carry = 0
        t.eq(st["current"]["files"], len(ids), "stats current.files at epoch %d" % e)
        if e + 1 == EPOCHS:
            break

        st = quiesce(s)
        files = sealed_files(s)
        created_of.update((f["id"], f["created_epoch"]) for f in files)
        rows = epochs_rows(s)
        started = {n: r["started_ms"] for n, r in rows.items()}
        nxt = entry(e + 1)
        # the plan's `other`: evicted files still held; bytes the samplers hold
        # reserved count against the new admit, not here (daemon/boundary.c)
        other = st["disk"]["draining"]
        t.eq(st["disk"]["sealed"], sum(f["bytes"] for f in files),
             "stats sealed bytes vs catalog before boundary %d" % (e + 1))
        in_view = set(int(n[len("shard-"):-len(".tfrecord")])
                      for n in os.listdir(os.path.join(s.mnt, "current")))
        fresh = set(f["id"] for f in files) - in_view
        want_victims, want_used, want_admit, want_reason = plan(nxt, files, other, started,
                                                                fresh=fresh)

        if e + 1 == HOLD_AT:
            t.eq(len(want_victims) > 0, True, "the shrink at %d evicts something" % HOLD_AT)
            vid = want_victims[0]  # the first victim, were it not open
            want_victims, want_used, want_admit, want_reason = plan(
                nxt, files, other, started, pinned={vid}, fresh=fresh)
            if vid in want_victims:
                t.fail("the model evicts the pinned file %d" % vid)
            path = os.path.join(s.mnt, "current", "shard-%d.tfrecord" % vid)
            with open(path, "rb") as f:
                full = f.read()
            fh = open(path, "rb")
            first = fh.read(len(full) // 2)
            # the victim read whole (one open), then opened again and held: an
            # open the daemon serves no read for counts when it is closed,
            # after the boundary (cachefs/fs_read.c cfs__file_close)
            opens[-1] += 1
            held_carry = 1
            held = (fh, first, full, vid)
            s.cleanups.insert(0, fh.close)

        t.run("epoch", s.mnt, "next", "--wait", timeout=120)

        rows = epochs_rows(s)
        r = rows.get(e + 1)
        if r is None or not r["started_ms"]:
            t.fail("epoch %d has no started row in the catalog" % (e + 1))
        # the victims: the files before the boundary that it made EVICTING,
        # or that are GONE already (retire = boundary: deleted at once when
        # no handle holds them, their rows with them)
        now = dict(s.catalog("SELECT id, evicted_epoch FROM shards"))
        got_victims = sorted(f["id"] for f in files
                             if f["id"] not in now or now[f["id"]] == e + 1)
        victims_of[e + 1] = len(got_victims)
        # The row records the epoch's snapshot (DESIGN "Epochs" step 3): what
        # eviction kept of the files before it, plus what the samplers sealed
        # since: the shard in progress before the boundary (its bytes were in
        # `other` as reserved; created e) and what they admitted for e + 1
        # while `--wait` waited for min_records (step 2).
        before = set(f["id"] for f in files)
        kept = before - set(got_victims)
        listed = set(int(n[len("shard-"):-len(".tfrecord")])
                     for n in os.listdir(os.path.join(s.mnt, "current")))
        created = dict(s.catalog("SELECT id, created_epoch FROM shards"))
        late = sorted(i for i in listed - kept)
        if not kept <= listed or any(created.get(i) not in (e, e + 1) for i in late):
            t.fail("epoch %d lists %r: expected the kept files %r plus files sealed "
                   "since (created %d or %d); created epochs: %r; stats before: %s"
                   % (e + 1, sorted(listed), sorted(kept), e, e + 1,
                      {i: created.get(i) for i in late}, json.dumps(st)))
        t.eq(r["resident_files"], len(listed), "catalog resident files of epoch %d" % (e + 1))
        kept_bytes = sum(f["bytes"] for f in files if f["id"] in kept)
        t.eq(got_victims, sorted(want_victims),
             "victims of boundary %d (%s)" % (e + 1, nxt["policy"]))
        t.eq((r["limit_bytes"], r["policy"]), (nxt["limit"], nxt["policy"]),
             "catalog entry of epoch %d" % (e + 1))
        t.eq(kept_bytes + other, want_used, "resident bytes after boundary %d" % (e + 1))
        t.eq(r["admit_bytes"], want_admit, "admit granted at boundary %d" % (e + 1))
        evb = sum(f["bytes"] for f in files if f["id"] in want_victims)
        t.eq(r["evicted_bytes"], evb, "evicted bytes of epoch %d" % (e + 1))
        if kept_bytes + other > nxt["limit"]:
            t.fail("epoch %d starts with %d bytes over its limit %d"
                   % (e + 1, kept_bytes + other, nxt["limit"]))
        st = s.stats()
        t.eq(st["last_boundary"]["reason"], want_reason, "stats reason of boundary %d (%s)"
             % (e + 1, st["last_boundary"]["why"]))
        t.eq(st["schedule"]["entry"].split("]")[0] + "]", "[epoch %s]" % section(e + 1),
             "stats schedule entry after boundary %d" % (e + 1))
        if want_reason != "ok":
            status = t.run("status", "--wide", s.mnt).stdout  # the whole why
            if st["last_boundary"]["why"] not in status:
                t.fail("rollcache status does not say why the admit was cut: %s" % status)
        report_lines.append((e + 1, nxt["policy"], len(got_victims), evb,
                             kept_bytes, r["admit_bytes"], want_reason))

        if held and e + 1 == HOLD_AT:
            fh, first, full, vid = held
            state = s.catalog("SELECT state FROM shards WHERE id = ?", vid)[0][0]
            t.eq(state, 0, "held file %d state after the boundary (0 = SEALED: pinned)" % vid)
            t.eq(vid in listed, True, "the held file %d is in epoch %d's view" % (vid, e + 1))
            rest = fh.read()
            t.eq(hashlib.sha256(first + rest).hexdigest(), hashlib.sha256(full).hexdigest(),
                 "bytes of shard %d read through the handle held across the boundary" % vid)
            t.eq(len([x for x in t.tfrecords(first + rest) if x not in src_recs]), 0,
                 "records of the held shard not in the source")
            print("held shard %d (%d bytes) across boundary %d: pinned; victims %r instead"
                  % (vid, len(full), HOLD_AT, got_victims))
            fh.close()
            s.cleanups.remove(fh.close)
            held = None
            t.wait_for(lambda: not any(os.path.exists(shard_path(s, x)) for x in got_victims),
                       "the evicted shards %r to be deleted" % got_victims)
            t.wait_for(lambda: s.stats()["view"]["open_handles"] == 0, "the handle's release")

    # admitted bytes per epoch never above the budget granted at its boundary
    st = quiesce(s)
    rows = epochs_rows(s)
    for n, r in rows.items():
        if n > 0 and r["admitted_bytes"] > r["admit_bytes"]:
            t.fail("epoch %d admitted %d bytes > granted admit %d"
                   % (n, r["admitted_bytes"], r["admit_bytes"]))
        if st["disk"]["peak"] > CACHE_LIMIT:
            t.fail("disk peak %d > cache limit %d" % (st["disk"]["peak"], CACHE_LIMIT))

    # the rows of the evicted files went with them (GONE): only the resident are left
    t.wait_for(lambda: s.catalog("SELECT count(*) FROM shards WHERE state != 0") == [(0,)],
               "the rows of the evicted files to be deleted")
    created_of.update(s.catalog("SELECT id, created_epoch FROM shards"))
    # stats JSON == catalog == rollcache report --json
    res = s.catalog("SELECT count(*), coalesce(sum(bytes), 0), coalesce(sum(records), 0) "
                    "FROM shards WHERE state = 0")[0]
    t.eq((st["resident"]["files"], st["resident"]["bytes"], st["resident"]["records"]),
         tuple(res), "stats resident vs catalog")
    srows = {x["epoch"]: x for x in st["epochs"]}
    t.eq(sorted(srows), sorted(rows), "epochs in stats vs catalog")
    for n, r in rows.items():
        x = srows[n]
        for k_st, k_db in (("admitted_bytes", "admitted_bytes"),
                           ("admitted_records", "admitted_records"),
                           ("evicted_bytes", "evicted_bytes"),
                           ("evicted_records", "evicted_records"), ("read_bytes", "read_bytes"),
                           ("resident_files", "resident_files"),
                           ("resident_bytes", "resident_bytes"),
                           ("limit", "limit_bytes"), ("admit", "admit_bytes"),
                           ("policy", "policy")):
            t.eq(x[k_st], r[k_db], "epoch %d %s: stats vs catalog" % (n, k_st))

    # the last epoch's reads reach the catalog with the next flush (once a second)
    deadline = time.time() + 10
    while True:
        eps = json.loads(t.run("report", s.mnt, "--json").stdout)["epochs"]
        got = [x["seen_records"] for x in eps]
        got_reads = [x["read_files"] for x in eps]
        if (got, got_reads) == (seen_by, opens) or time.time() > deadline:
            break
        time.sleep(0.2)
    t.eq(got, seen_by, "report's seen per epoch vs the reader's distinct records")
    t.eq(got_reads, opens, "report's read (files) per epoch vs the reader's opens")
    p = t.run("report", s.mnt, "--json", "--svg", os.path.join(s.root, "report.svg"))
    rep = json.loads(p.stdout)
    t.eq(rep["cache_dir"], os.path.realpath(s.cache), "report cache_dir (from stats)")
    t.eq((rep["resident"]["files"], rep["resident"]["bytes"], rep["resident"]["records"]),
         tuple(res), "report resident vs catalog")
    with open(os.path.join(s.root, "report.svg")) as f:
        if "<svg" not in f.read(4096):
            t.fail("report --svg wrote no SVG")
    for x in rep["epochs"]:
        n = x["epoch"]
        r = rows[n]
        t.eq((x["admitted_bytes"], x["admitted_records"], x["evicted_bytes"],
              x["evicted_records"], x["read_bytes"], x["start_files"], x["start_records"],
              x["start_bytes"], x["limit"], x["admit"], x["policy"]),
             (r["admitted_bytes"], r["admitted_records"], r["evicted_bytes"],
              r["evicted_records"], r["read_bytes"], r["resident_files"],
              r["resident_records"], r["resident_bytes"], r["limit_bytes"], r["admit_bytes"],
              r["policy"]), "report epoch %d vs catalog" % n)
        t.eq(x["admitted_files"], sum(1 for c in created_of.values() if c == n),
             "report admitted files of epoch %d" % n)
        t.eq(x["evicted_files"], victims_of.get(n, 0), "report evicted files of epoch %d" % n)
        # distinct records read to the end by the end of n (the reader's hashes)
        t.eq(x["seen_records"], seen_by[n], "report seen records at epoch %d" % n)
    # every file the mount showed was read to the end: nothing evicted unread
    t.eq(sum(x["evicted_unread_files"] for x in rep["epochs"]), 0, "files evicted unread")
    # the same report from the cache directory, beside the live daemon
    p2 = t.run("report", s.cache, "--json")
    t.eq(json.loads(p2.stdout)["epochs"], rep["epochs"], "report MOUNTPOINT vs CACHE_DIR")
    print(t.run("report", s.mnt).stdout)
    for line in report_lines:
        print("boundary %d (%s): %d victims, %d bytes evicted, resident %d, admit %d, %s"
              % line)
    reasons = [line[-1] for line in report_lines]
    if MODE == "min-uses":
        # the budget was cut by min_uses, and fresh data came again later
        if "min_uses" not in reasons or "ok" not in reasons[reasons.index("min_uses"):]:
            t.fail("expected a min_uses cut followed by a full admit: %r" % reasons)
    else:
        if "frozen" not in reasons:
            t.fail("expected none to freeze: %r" % reasons)
    s.umount()


t.main(body, "eviction-" + MODE)
