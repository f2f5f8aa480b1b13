#!/usr/bin/python3
"""fuse-advance-to: `next N` sent by several processes at once advances the
mount to epoch N exactly once (DESIGN "Epochs": several ranks asking for N
advance the mount once), over a real kernel mount.

- 6 processes send `next E+1` to .rollcache/control (its ioctl) at the same moment: the
  mount is at E+1 afterwards, and the catalog holds one new epoch, not 6;
- `next N` for N <= current returns at once and changes nothing;
- 4 processes ask for E+3 while others ask for E+2: the mount ends at E+3,
  every epoch in between exists once;
- `rollcache epoch MNT next N` does the same from the command line;
- plain `next` and `next wait` still advance by one each;
- malformed commands are refused with EINVAL.
"""
import errno
import multiprocessing as mp
import os

import rcfuse as t


def write_control(mnt, cmd, barrier, out):
    barrier.wait(timeout=30)
    out.put((cmd, t.control(mnt, cmd)))


def concurrently(mnt, cmds):
    """Writes every command of cmds from its own process, all at once."""
    barrier = mp.Barrier(len(cmds))
    out = mp.Queue()
    procs = [mp.Process(target=write_control, args=(mnt, c, barrier, out)) for c in cmds]
    for p in procs:
        p.start()
    res = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        t.eq(p.exitcode, 0, "writer exit code")
    return res


def epochs_in_catalog(s):
    return [r[0] for r in s.catalog("SELECT number FROM epochs ORDER BY number")]


def write(mnt, cmd):
    return t.control(mnt, cmd)


def body(s):
    s.synth(records=40, size="1K", shards=4)
    # first_epoch 0: every epoch here is one a command asked for
    s.mount("file://%s/" % s.src, "--limit", "4M", "--shard-size", "16K", "--first-epoch", "0")
    e = s.stats()["epoch"]
    before = epochs_in_catalog(s)
    t.eq(before[-1], e, "the catalog's last epoch is the current one")

    res = concurrently(s.mnt, ["next %d" % (e + 1)] * 6)
    t.eq(sorted(r[1] for r in res), [0] * 6, "answers to 6 x 'next %d'" % (e + 1))
    t.eq(s.stats()["epoch"], e + 1, "epoch after 6 concurrent 'next %d'" % (e + 1))
    t.eq(epochs_in_catalog(s), before + [e + 1], "epochs in the catalog (one advance)")
    t.eq(os.readlink(os.path.join(s.mnt, "current")), "epochs/%d" % (e + 1), "current")

    # asking again, or for an older epoch, is a no-op
    for n in (e + 1, e, 0):
        t.eq(write(s.mnt, "next %d" % n), 0, "'next %d' at epoch %d" % (n, e + 1))
    t.eq(s.stats()["epoch"], e + 1, "epoch after 'next N' with N <= current")
    t.eq(epochs_in_catalog(s), before + [e + 1], "epochs after no-op requests")

    # mixed targets: some ranks ask for e+2, others already for e+3
    res = concurrently(s.mnt, ["next %d" % (e + 2)] * 3 + ["next %d wait" % (e + 3)] * 4)
    t.eq(sorted(r[1] for r in res), [0] * 7, "answers to mixed 'next N'")
    t.eq(s.stats()["epoch"], e + 3, "epoch after asking for %d and %d" % (e + 2, e + 3))
    t.eq(epochs_in_catalog(s), before + [e + 1, e + 2, e + 3], "epochs after mixed requests")

    # the command line, twice: one advance
    for _ in range(2):
        p = t.run("epoch", s.mnt, "next", e + 4)
        if not p.stdout.startswith("epoch %d:" % (e + 4)):
            t.fail("rollcache epoch next %d printed %r" % (e + 4, p.stdout))
    t.eq(s.stats()["epoch"], e + 4, "epoch after 'rollcache epoch MNT next %d' twice" % (e + 4))

    # plain next and next wait still advance by one each
    t.eq(write(s.mnt, "next"), 0, "'next'")
    t.eq(write(s.mnt, "next wait"), 0, "'next wait'")
    t.eq(s.stats()["epoch"], e + 6, "epoch after 'next' and 'next wait'")
    t.eq(epochs_in_catalog(s), before + list(range(e + 1, e + 7)), "epochs in the end")

    for bad in ("next x", "next 3x", "next -1", "nextx", "next 5 later", "next 99999999999"):
        t.eq(write(s.mnt, bad), errno.EINVAL, "answer to %r" % bad)
    t.eq(write(s.mnt, "next %d" % (e + 6 + 5000)), errno.ERANGE, "'next' far ahead")
    t.eq(s.stats()["epoch"], e + 6, "epoch after refused commands")
    p = t.run("epoch", s.mnt, "next", "abc", check=False)
    t.eq(p.returncode, 2, "exit code of 'rollcache epoch MNT next abc'")
    s.umount()


t.main(body, "advance")
