#!/usr/bin/python3
"""fuse-hold-open: a reader that holds files of current/ open across five
boundaries, over a real nginx ("a reader holding every file of
current/ open across 5 boundaries").

The cache is filled to its limit; then the reader opens every file of
current/, reads it, and keeps it open, and for five boundaries reads every
file of the new view (the first set stays open all along, later files are
read and closed).  Proves:
  - no epoch view is empty (pinned files are never victims and their bytes
    never count against the room of fresh data twice);
  - no file that was admitted but never in a view is evicted (the plan's
    `fresh` rule), and every evicted file had been read;
  - nothing is downloaded and thrown away: once the samplers wait for
    room, the bytes nginx sent for data objects (its access log) equal the
    bytes the catalog admitted plus the heads of records whose transfer
    waits for its next range (stats sampler.partial_bytes), exactly -
    transfers ask only for the room they hold (sampler/fetch.h, grant);
  - du of the cache never exceeds the limit (invariant 4).
"""
import os
import time

import rcfuse as t

LIMIT = 2 << 20


def nginx_object_bytes(state):
    """Body bytes nginx sent for .tfrecord objects (listings and probes aside)."""
    total = 0
    try:
        with open(os.path.join(state, "access.log")) as f:
            for line in f:
                parts = line.split()
                # "STATUS BODY_BYTES BYTES_SENT METHOD URI PROTO"
                if len(parts) >= 5 and parts[0] in ("200", "206") and \
                        parts[4].split("?")[0].endswith(".tfrecord"):
                    total += int(parts[1])
    except FileNotFoundError:
        pass
    return total


def admitted_bytes(s):
    return s.catalog("SELECT COALESCE(SUM(admitted_bytes), 0) FROM epochs")[0][0]


def body(s):
    s.synth(records=320, size="16K", shards=16)  # ~5.2 MB > LIMIT
    url, state = t.start_nginx(s, access_log=True)

    # min_records is below what one epoch's admit brings: `next --wait`
    # returns as soon as the cache holds that much, never on a timeout
    cfg = s.config("[cache]\nlimit = 2M\nmin_records = 40\nretire = boundary\n"
                   "[sampler]\nshard_size = 128K\nconnections = 4\n"
                   "[epoch 0-]\nlimit = 2M\nadmit = 1M\npolicy = fifo\n")
    disk = t.DiskPeak(s)
    s.mount(url, "--config", cfg)

    # ids of the files of every view from the first `next` on (after the
    # mount's own first epoch, epochs advance only by `next`)
    shown = set()
    # the test's own record of the victims: a GONE file has no row left, so
    # each boundary's victims are the files SEALED before it that it made
    # EVICTING or GONE; every victim must be one of them (the epochs row
    # counts them all), or it was admitted and evicted unseen
    created = {}  # id -> created_epoch of every file seen SEALED
    victims = {}  # epoch -> ids its boundary evicted

    def next_epoch():
        before = dict(s.catalog("SELECT id, created_epoch FROM shards WHERE state = 0"))
        created.update(before)
        t.run("epoch", s.mnt, "next", "--wait", timeout=120)
        e = s.stats()["epoch"]
        now = dict(s.catalog("SELECT id, evicted_epoch FROM shards"))
        victims[e] = [i for i in before if i not in now or now[i] == e]
        t.eq(s.catalog("SELECT evicted_files FROM epochs WHERE number = ?", e),
             [(len(victims[e]),)], "epoch %d: victims, all sealed before its boundary" % e)

    def view():
        e = s.stats()["epoch"]
        d = os.path.join(s.mnt, "epochs", str(e))
        names = sorted(os.listdir(d))
        shown.update(int(n[len("shard-"):-len(".tfrecord")]) for n in names)
        return e, d, names

    # fill the cache: two epochs' admits, then one more boundary
    first = None
    for _ in range(3):
        t.wait_for(lambda: any(s.stats()["admission"][k] for k in ("waiting_admit",
                                                                   "waiting_limit")),
                   "the samplers to wait for room", timeout=60)
        next_epoch()
        first = first if first is not None else view()[0]
        view()

    def read_all(path):
        with open(path, "rb") as f:
            while f.read(1 << 16):
                pass

    e, d, names = view()
    e0 = e
    if not names:
        t.fail("epoch %d is empty before the reader starts" % e)
    held = []
    for n in names:  # the held set: read once, kept open through five boundaries
        f = open(os.path.join(d, n), "rb")
        while f.read(1 << 16):
            pass
        held.append(f)
    held_names = set(names)
    sizes = []
    for _ in range(5):
        time.sleep(0.3)  # fresh data arrives meanwhile, in the room evictions left
        next_epoch()
        e, d, names = view()
        sizes.append(len(names))
        if not names:
            t.fail("epoch %d view is empty with %d files held open" % (e, len(held)))
        missing = held_names - set(names)
        if missing:
            t.fail("held-open files left the view of epoch %d: %s" % (e, sorted(missing)))
        for n in names:
            if n not in held_names:
                read_all(os.path.join(d, n))
    print("views (files) with %d held open: %r" % (len(held), sizes))

    # the samplers wait for room: everything nginx sent is in the catalog
    last = [None]

    # (the heads of records whose transfer waits for room are not thrown
    # away: they are admitted with the rest of their record, next epoch)
    def settled():
        st = s.stats()
        last[0] = (nginx_object_bytes(state), admitted_bytes(s),
                   st["sampler"]["partial_bytes"], st)
        return last[0][0] == last[0][1] + last[0][2]
    try:
        t.wait_for(settled, "nginx bytes == admitted bytes + partial records", timeout=15)
    except AssertionError:
        st = last[0][3]
        t.fail("downloaded and not admitted: nginx sent %d bytes of objects, the catalog "
               "admitted %d, %d wait in partial records; sampler %r errors %r"
               % (last[0][:3] + (st["sampler"], st["errors"])))
    print("nginx sent %d object bytes; the catalog admitted %d, %d wait in partial records"
          % last[0][:3])

    # No fresh file evicted: every evicted file admitted from the first
    # listed view's epoch on was in a view listed above (a file admitted
    # during epoch E may be in E's own view: `next --wait` snapshots after
    # the samplers began on E's admit).  And since the
    # reader reads every view, every file evicted after it began had been
    # read (reads are flushed into the catalog before each boundary's plan).
    evicted = [(i, created[i], ev) for ev, ids in victims.items() for i in ids
               if created[i] >= first]
    if not evicted:
        t.fail("no file admitted from epoch %d on was evicted: nothing checked" % first)
    t.eq([r for r in evicted if r[0] not in shown], [],
         "files evicted before they were ever in a view")
    # the reader reads every file to the end: none left unread, whether
    # deleted (counted when its row went) or still EVICTING
    unread = s.catalog("SELECT coalesce(sum(unread_files), 0) FROM epochs WHERE number > ?",
                       e0)[0][0]
    unread += s.catalog("SELECT count(*) FROM shards WHERE evicted_epoch > ? AND "
                        "full_reads = 0", e0)[0][0]
    t.eq(unread, 0, "files evicted unread after the reader began at epoch %d" % e0)
    for f in held:
        f.close()
    peak = disk.stop()
    if peak > LIMIT:
        t.fail("disk usage peaked at %d bytes > limit %d" % (peak, LIMIT))
    s.umount()


t.main(body, "hold-open")
