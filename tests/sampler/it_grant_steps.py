#!/usr/bin/python3
"""sampler-grant-steps-nginx: a mount asks for its objects in ranges of a
whole step, each reserved before it is asked for (sampler/reader.c
obj_grant; DESIGN invariant 4, "room before bytes"), against a real nginx
and a real FUSE mount.

A cache of 48 MiB with one connection has a step of 48 MiB / 16 = 3 MiB
(limit / (SMP_GRANT_SHARE * connections), sampler_i.h).  The dataset, 12
objects of 6 MB, is larger than the cache and policy=none freezes it when
full.  Proves, from nginx's access log:
  - the ranges are steps: every object response carries at most 3 MiB,
    and the largest more than 1 MiB (the floor), so the cold fill is not
    asked for 1 MiB at a time;
  - nothing is fetched without room: once the samplers wait for room, the
    body bytes nginx sent for objects equal the bytes admitted plus the
    heads of records whose transfer waits for its next range
    (sampler.partial_bytes), exactly;
  - du of the cache never exceeds the limit (invariant 4).
"""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "daemon"))
import rcfuse as t  # noqa: E402

LIMIT = 48 << 20
STEP = LIMIT // 16  # one connection


def object_bodies(state):
    """Body bytes of each response nginx sent for a .tfrecord object."""
    out = []
    try:
        with open(os.path.join(state, "access.log")) as f:
            for line in f:
                parts = line.split()
                # "STATUS BODY_BYTES BYTES_SENT METHOD URI PROTO MSEC"
                if len(parts) >= 5 and parts[0] in ("200", "206") and \
                        parts[4].split("?")[0].endswith(".tfrecord"):
                    out.append(int(parts[1]))
    except FileNotFoundError:
        pass
    return out


def body(s):
    s.synth(records=1152, size="64K", shards=12)  # ~75.7 MB > LIMIT
    url, state = t.start_nginx(s, access_log=True)
    cfg = s.config("[cache]\nlimit = 48M\nmin_records = 100000\nfirst_epoch = 0\n"
                   "[source]\nrelist = 1000\n"
                   "[sampler]\nshard_size = 4M\nconnections = 1\n"
                   "[epoch 0-]\nlimit = 48M\nadmit = 48M\npolicy = none\n")
    disk = t.DiskPeak(s)
    s.mount(url, "--config", cfg)
    t.wait_for(lambda: any(s.stats()["admission"][k] for k in ("waiting_admit",
                                                               "waiting_limit")),
               "the samplers to wait for room", timeout=120)
    last = [None]

    def settled():
        st = s.stats()
        admitted = s.catalog("SELECT COALESCE(SUM(admitted_bytes), 0) FROM epochs")[0][0]
        last[0] = (sum(object_bodies(state)), admitted, st["sampler"]["partial_bytes"], st)
        return last[0][0] == last[0][1] + last[0][2]
    try:
        t.wait_for(settled, "nginx bytes == admitted bytes + partial records", timeout=30)
    except AssertionError:
        st = last[0][3]
        t.fail("downloaded and not admitted: nginx sent %d bytes of objects, the catalog "
               "admitted %d, %d wait in partial records; sampler %r"
               % (last[0][:3] + (st["sampler"],)))
    time.sleep(0.5)  # nothing more comes: the cache is full and frozen
    bodies = object_bodies(state)
    if sum(bodies) != last[0][0]:
        t.fail("nginx sent %d more object bytes after the samplers waited for room"
               % (sum(bodies) - last[0][0]))
    big = max(bodies)
    if big > STEP:
        t.fail("a response of %d bytes: more than one step (%d)" % (big, STEP))
    if big <= 1 << 20:
        t.fail("the largest response is %d bytes: ranges of 1 MiB, not steps of %d"
               % (big, STEP))
    peak = disk.stop()
    if peak > LIMIT:
        t.fail("disk usage peaked at %d bytes > limit %d" % (peak, LIMIT))
    print("%d object responses, the largest %d bytes (step %d); nginx sent %d object "
          "bytes = %d admitted + %d in partial records; disk peak %d of %d"
          % ((len(bodies), big, STEP) + last[0][:3] + (peak, LIMIT)))
    s.umount()


t.main(body, "grant-steps")
