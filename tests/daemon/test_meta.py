#!/usr/bin/python3
"""fuse-meta-*: what a real FUSE mount says about its files without reading
them (DESIGN "The mount", invariant 3's "metadata never needs a read").

  - every file of an epoch answers getxattr("user.rollcache.records") with
    its record count as decimal ASCII without a NUL, equal to the records
    an independent TFRecord parser (rcfuse.tfrecords, Python) counts in the
    bytes read through the mount; listxattr lists that one name; a size-0
    getxattr (libc, ctypes) returns the length, a short buffer ERANGE, any
    other name (and any directory) ENODATA;
  - .rollcache/epochs/<E> has one line "name bytes records" per file that
    epochs/<E> lists, equal to the listing, st_size and the xattr; its
    directory lists the same epochs as epochs/; it reads the same at any
    offset; an index open keeps its epoch listed, which leaves once closed;
  - neither counts as a read: after both, before any file is read, the
    stats' current.read_bytes and files_read_full are 0 and the catalog's
    reads of every file are 0.
Argument `raw`: format = raw objects (each counts 1), names with '/' and
spaces, and enough long names that the index is made in several chunks.
"""
import ctypes
import ctypes.util
import errno
import os
import random
import sys

import rcfuse as t

XATTR = "user.rollcache.records"
libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
libc.getxattr.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
libc.getxattr.restype = ctypes.c_ssize_t


def raw_getxattr(path, name, size):
    """getxattr(2) with a buffer of `size` bytes (0: NULL): (ret, errno, bytes)."""
    buf = ctypes.create_string_buffer(size) if size else None
    r = libc.getxattr(path.encode(), name.encode(), buf, size)
    return r, ctypes.get_errno() if r < 0 else 0, buf.raw[:r] if buf and r > 0 else b""


def errno_of(fn, *args):
    try:
        fn(*args)
    except OSError as e:
        return e.errno
    return 0


def files_under(d):
    """{relative path: full path} of the files under d (raw keys make directories)."""
    out = {}
    for root, _, files in os.walk(d):
        for n in files:
            p = os.path.join(root, n)
            out[os.path.relpath(p, d)] = p
    return out


def read_index(mnt, e):
    with open(os.path.join(mnt, ".rollcache", "epochs", str(e)), "rb") as f:
        return f.read()


def parse_index(text):
    """{name: (bytes, records)}; a name may hold spaces: split at the last two."""
    out = {}
    if text and not text.endswith(b"\n"):
        t.fail("index text does not end with a newline: %r" % text[-80:])
    for line in text.decode().splitlines():
        name, size, recs = line.rsplit(" ", 2)
        if name in out:
            t.fail("index lists %r twice" % name)
        out[name] = (int(size), int(recs))
    return out


def check_xattrs(path):
    """The xattr of one file, checked every way; returns its value as an int."""
    v = os.getxattr(path, XATTR)
    if not v or not v.isdigit() or (v != b"0" and v.startswith(b"0")):
        t.fail("%s: %s = %r, expected a decimal count without a NUL" % (path, XATTR, v))
    t.eq(os.listxattr(path), [XATTR], "listxattr of " + path)
    t.eq(raw_getxattr(path, XATTR, 0)[:2], (len(v), 0), "size-0 getxattr of " + path)
    t.eq(raw_getxattr(path, XATTR, len(v))[2], v, "getxattr with an exact buffer")
    if len(v) > 1:
        t.eq(raw_getxattr(path, XATTR, len(v) - 1)[:2], (-1, errno.ERANGE),
             "getxattr with a short buffer")
    t.eq(errno_of(os.getxattr, path, "user.other"), errno.ENODATA, "another name")
    t.eq(errno_of(os.getxattr, path, "trusted.rollcache.records"), errno.ENODATA,
         "the name outside user.")
    t.eq(errno_of(os.setxattr, path, XATTR, b"7"), errno.EROFS, "setxattr")
    t.eq(errno_of(os.removexattr, path, XATTR), errno.EROFS, "removexattr")
    return int(v)


def body(s, mode):
    raw = mode == "raw"
    if raw:
        objects = {"top.bin": b"top\n", "a/b/c.bin": bytes(range(256)) * 9,
                   "sp ace/two words.bin": b"odd names\n", "x/empty.bin": b""}
        for i in range(900):  # 900 lines of ~260 bytes: several 64 KiB chunks
            objects["long/%03d-%s.bin" % (i, "n" * 240)] = b"%d\n" % i
        for key, data in objects.items():
            p = os.path.join(s.src, key)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "wb") as f:
                f.write(data)
        s.mount("file://%s/" % s.src, "--limit", "8M", "--shard-size", "1M", "--format", "raw")
    else:
        s.synth(records=300, size="3K", shards=3)
        s.mount("file://%s/" % s.src, "--limit", "8M", "--shard-size", "256K")
    # idle alone also reads true before the sampler's thread runs: wait for the files too
    want = 904 if raw else 2
    t.wait_for(lambda: (lambda st: st["sampler"]["idle"] and st["resident"]["files"] >= want)(
        s.stats()), "the first sampler pass", timeout=60)
    t.run("epoch", s.mnt, "next")
    st = s.stats()
    e = st["epoch"]
    ep = os.path.join(s.mnt, "epochs", str(e))
    files = files_under(ep)
    if len(files) < want:
        t.fail("epoch %d lists %d files" % (e, len(files)))

    # metadata first: xattrs, the index, the listing; no file is opened
    xattrs = {n: check_xattrs(p) for n, p in files.items()}
    for d in (ep, os.path.join(s.mnt, "current")):
        t.eq(os.listxattr(d), [], "listxattr of the directory " + d)
        t.eq(errno_of(os.getxattr, d, XATTR), errno.ENODATA, "getxattr of the directory " + d)
    text = read_index(s.mnt, e)
    index = parse_index(text)
    t.eq(sorted(index), sorted(files), "index names vs the listing of epochs/%d" % e)
    for n, p in files.items():
        t.eq(index[n], (os.stat(p).st_size, xattrs[n]), "index line of " + n)
    t.eq(sorted(os.listdir(os.path.join(s.mnt, ".rollcache", "epochs"))),
         sorted(os.listdir(os.path.join(s.mnt, "epochs"))), ".rollcache/epochs vs epochs")
    t.eq(errno_of(os.stat, os.path.join(s.mnt, ".rollcache", "epochs", str(e + 7))),
         errno.ENOENT, "the index of an epoch that does not exist")
    if raw and len(text) <= 3 * (64 << 10):
        t.fail("the raw index is %d bytes: too small to span several chunks" % len(text))
    # the same bytes at any offset, and in small reads (made as it is read)
    with open(os.path.join(s.mnt, ".rollcache", "epochs", str(e)), "rb", buffering=0) as f:
        rng = random.Random(e)
        for _ in range(40):
            off, n = rng.randrange(0, len(text) + 10), rng.choice([1, 100, 4096, 70000])
            t.eq(os.pread(f.fileno(), n, off), text[off:off + n], "index pread(%d, %d)" % (n, off))
        f.seek(0)
        small = b"".join(iter(lambda: f.read(777), b""))
        t.eq(small, text, "the index read 777 bytes at a time")
    t.eq(sum(r for _, r in index.values()), st["current"]["records"],
         "records in the index vs stats current.records")
    st = s.stats()  # flushes the read statistics into the catalog
    t.eq((st["current"]["read_bytes"], st["current"]["files_read_full"]), (0, 0),
         "stats current read_bytes, files_read_full after xattrs and the index only")
    t.eq(s.catalog("SELECT coalesce(sum(reads), 0), coalesce(sum(full_reads), 0) FROM shards"),
         [(0, 0)], "catalog reads and full_reads after xattrs and the index only")

    # the counts against an independent parser of the bytes read through the mount
    for n, p in files.items():
        with open(p, "rb") as f:
            data = f.read()
        want = 1 if raw else len(t.tfrecords(data))
        t.eq(xattrs[n], want, "%s of %s vs the records in its bytes" % (XATTR, n))
        t.eq(len(data), index[n][0], "bytes of " + n)

    # an open index holds its epoch listed; closed, it leaves with its epoch
    f = open(os.path.join(s.mnt, ".rollcache", "epochs", str(e)), "rb")
    t.run("epoch", s.mnt, "next")
    t.eq(s.stats()["epoch"], e + 1, "epoch after next")
    t.eq(f.read(), text, "the index of epoch %d read after the advance" % e)
    if str(e) not in os.listdir(os.path.join(s.mnt, ".rollcache", "epochs")):
        t.fail("epoch %d left .rollcache/epochs while its index is open" % e)
    f.close()
    t.wait_for(lambda: str(e) not in os.listdir(os.path.join(s.mnt, ".rollcache", "epochs")),
               "epoch %d to leave .rollcache/epochs once its index closed" % e)
    t.wait_for(lambda: not os.path.exists(os.path.join(s.mnt, ".rollcache", "epochs", str(e))),
               "the index of epoch %d to answer ENOENT" % e)
    t.eq(sorted(parse_index(read_index(s.mnt, e + 1))), sorted(files),
         "index of epoch %d (same files)" % (e + 1))
    s.umount()


mode = sys.argv[1] if len(sys.argv) > 1 else "tfrecord"
t.main(lambda s: body(s, mode), "meta-" + mode)
