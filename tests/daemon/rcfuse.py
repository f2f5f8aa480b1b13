"""rcfuse.py - helpers for the FUSE integration tests (real kernel mounts).

Every test builds its own scratch directory, mounts with the real
`rollcache mount`, and always unmounts and stops the daemon in a finally
block (and on SIGTERM from meson), even when an assertion failed.  A test
skips (exit 77, skip()) only for a device, kernel feature or privilege the
machine lacks (/dev/fuse, passthrough, root); a package scripts/deps.sh
installs (fuse3, nginx, python3-torch) missing fails it with one line
(missing()).
"""
import errno
import json
import os
import shutil
import signal
import sqlite3
import struct
import subprocess
import sys
import tempfile
import time

RC = os.environ.get("RC_BIN", "rollcache")
SRCDIR = os.environ.get("RC_SRCDIR", os.path.join(os.path.dirname(__file__), "..", ".."))


def skip(reason):
    """Exit 77 (meson's SKIP): only for a device, kernel feature or privilege
    this machine lacks."""
    print("SKIP: " + reason)
    sys.exit(77)


def missing(what, fix):
    """A package scripts/deps.sh installs is absent: the machine is broken, so
    the test fails (exit 1) with one line, "FAIL: WHAT: FIX".  Safe at import
    time and inside main()'s body (the scratch tree is still cleaned up)."""
    print("FAIL: " + " ".join(("%s: %s" % (what, fix)).split()))
    sys.exit(1)


def need_fuse():
    if not os.path.exists("/dev/fuse"):
        skip("/dev/fuse is missing: these tests need a real FUSE mount")
    if shutil.which("fusermount3") is None:
        missing("fusermount3 is not installed", "run scripts/deps.sh (apt-get install fuse3)")


def fail(msg):
    raise AssertionError(msg)


def _short(v):
    r = repr(v)
    if len(r) > 300:
        n = len(v) if hasattr(v, "__len__") else "?"
        r = "%s... (%s items/bytes)" % (r[:200], n)
    return r


def eq(got, want, what):
    if got != want:
        fail("%s: got %s, expected %s" % (what, _short(got), _short(want)))


def run(*args, check=True, env=None, timeout=120):
    """Runs rollcache ARGS...; returns CompletedProcess (text)."""
    p = subprocess.run([RC] + [str(a) for a in args], capture_output=True, text=True,
                       env=env, timeout=timeout)
    if check and p.returncode != 0:
        fail("rollcache %s: exit %d\nstdout: %s\nstderr: %s"
             % (" ".join(map(str, args)), p.returncode, p.stdout, p.stderr))
    return p


def tfrecords(data):
    """The payloads of an uncompressed TFRecord byte string (framing checked by length)."""
    out, off = [], 0
    while off < len(data):
        if off + 12 > len(data):
            fail("truncated header at %d" % off)
        (n,) = struct.unpack_from("<Q", data, off)
        start = off + 12
        if start + n + 4 > len(data):
            fail("truncated record at %d" % off)
        out.append(bytes(data[start:start + n]))
        off = start + n + 4
    return out


def read_records_dir(path):
    recs = []
    for name in sorted(os.listdir(path)):
        with open(os.path.join(path, name), "rb") as f:
            recs += tfrecords(f.read())
    return recs


# include/rollcache/control.h's ioctl, computed here from Linux's _IOW
# layout (dir 1 << 30 | size << 16 | type << 8 | nr) rather than taken from
# the C header, so a mistake there cannot hide in both.
CONTROL_CMD_MAX = 64
CONTROL_IOC = (1 << 30) | (CONTROL_CMD_MAX << 16) | (ord("R") << 8) | 1


def control(mnt, cmd):
    """Sends cmd ("next", "next 7 wait") to the mount's daemon by its ioctl;
    returns 0 or the errno of the refusal."""
    import fcntl
    data = cmd.encode()
    if len(data) >= CONTROL_CMD_MAX:
        return errno.EINVAL
    fd = os.open(os.path.join(mnt, ".rollcache", "control"), os.O_RDONLY)
    try:
        fcntl.ioctl(fd, CONTROL_IOC, data.ljust(CONTROL_CMD_MAX, b"\0"))
        return 0
    except OSError as e:
        return e.errno
    finally:
        os.close(fd)


def is_mounted(mp):
    mp = os.path.realpath(mp)
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == mp for line in f)


def pid_alive(pid):
    """Whether pid runs; a zombie (exited, not yet reaped by init) does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


class Scratch:
    """A scratch tree: src/ (remote data), cache/, mnt/; cleaned up on exit."""

    def __init__(self, name):
        self.root = tempfile.mkdtemp(prefix="rc-fuse-%s-" % name)
        self.src = os.path.join(self.root, "src")
        self.empty = os.path.join(self.root, "empty")
        self.cache = os.path.join(self.root, "cache")
        self.mnt = os.path.join(self.root, "mnt")
        for d in (self.src, self.empty, self.mnt):
            os.makedirs(d)
        self.pids = []
        self.mounts = []
        if os.environ.get("RC_UNDER_ASAN"):
            # the daemon's stderr is /dev/null: sanitizer reports go to files
            for var in ("ASAN_OPTIONS", "UBSAN_OPTIONS"):
                os.environ[var] = os.environ.get(var, "") + ":log_path=%s/san" % self.root
        self.cleanups = []
        signal.signal(signal.SIGTERM, self._on_term)

    def _on_term(self, signum, frame):
        self.close()
        sys.exit(1)

    def synth(self, records, size, shards, seed=1):
        run("synth", self.src, "--records", records, "--record-size", size,
            "--shards", shards, "--seed", seed)

    def config(self, text):
        path = os.path.join(self.root, "rc.ini")
        with open(path, "w") as f:
            f.write(text)
        return path

    def mount(self, source, *args, mp=None):
        """rollcache mount (daemonized); returns the daemon pid from stats."""
        mp = mp or self.mnt
        if source == "file://%s/" % self.empty:  # no new data: an empty start, allowed
            args = ("--allow-empty", "true", *args)
        run("mount", source, mp, "--cache-dir", self.cache, *args)
        self.mounts.append(mp)
        st = self.stats(mp)
        self.pids.append(st["pid"])
        return st["pid"]

    def stats(self, mp=None):
        with open(os.path.join(mp or self.mnt, ".rollcache", "stats")) as f:
            return json.load(f)

    def catalog(self, sql, *params):
        db = sqlite3.connect("file:%s?mode=ro" % os.path.join(self.cache, "catalog.db"),
                             uri=True, timeout=10)
        try:
            return db.execute(sql, params).fetchall()
        finally:
            db.close()

    def umount(self, mp=None):
        mp = mp or self.mnt
        run("umount", mp)
        if mp in self.mounts:
            self.mounts.remove(mp)

    def close(self):
        for fn in self.cleanups:
            try:
                fn()
            except Exception:
                pass
        for mp in list(self.mounts):
            if is_mounted(mp):
                subprocess.run(["fusermount3", "-u", mp], capture_output=True)
            if is_mounted(mp):
                subprocess.run(["fusermount3", "-u", "-z", mp], capture_output=True)
        for pid in self.pids:
            for _ in range(50):
                if not pid_alive(pid):
                    break
                time.sleep(0.1)
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
        self.mounts, self.pids = [], []
        shutil.rmtree(self.root, ignore_errors=True)


def disk_files(cache):
    """{name: (inode, size)} of the files under a cache's shards/, objects/
    and tmp/ (what invariant 4 bounds), read without locks while the daemon
    works.  A file keeps its name and inode when it is renamed from tmp/."""
    files = {}
    for sub in ("shards", "objects", "tmp"):
        d = os.path.join(cache, sub)
        try:
            with os.scandir(d) as it:
                for e in it:
                    try:
                        st = e.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue
                    files[e.name] = (st.st_ino, st.st_size)
        except FileNotFoundError:
            pass
    return files


def disk_usage(cache):
    """Bytes of the files under a cache's shards/, objects/ and tmp/."""
    return sum(size for _, size in disk_files(cache).values())


def start_nginx(s, access_log=False):
    """nginx (tests/servers/nginx.sh) serving s.src until s closes; returns
    (url, state dir).  access_log: STATE/access.log with the bytes sent."""
    nginx = os.path.join(SRCDIR, "tests", "servers", "nginx.sh")
    state = os.path.join(s.root, "nginx")
    env = dict(os.environ, NGINX_ACCESS_LOG="1" if access_log else "0")
    p = subprocess.run([nginx, "start", s.src, state], capture_output=True, text=True,
                       timeout=60, env=env)
    if p.returncode != 0:  # nginx missing: its one line
        fail("nginx.sh start exited %d: %s" % (p.returncode, (p.stdout + p.stderr).strip()))
    s.cleanups.append(lambda: subprocess.run([nginx, "stop", state], capture_output=True))
    return p.stdout.strip().splitlines()[-1], state


class DiskPeak:
    """Samples the cache's bytes on disk every `every` seconds from a
    thread, from now until stop(), which returns the peak (invariant 4's
    witness).

    One scan of three directories is not one instant: it may count a victim
    before its unlink and then the file that took its room after, bytes
    that were never on disk together.  So each sample is two scans, and
    counts only the files seen in both (same name, same inode), at their
    size in the first: each of them was on disk from its first stat to its
    second, so all of them at the instant between the two scans, and at
    least that big (files only grow).  The sum is bytes that were on disk
    at one instant, never more."""

    def __init__(self, s, every=0.01):
        import threading
        self.peak = 0
        self.one_scan_peak = 0  # the sum of single scans, for comparison
        self._stop = threading.Event()
        self._cache, self._every = s.cache, every
        self._th = threading.Thread(target=self._run, daemon=True)
        self._th.start()
        s.cleanups.insert(0, self._stop.set)

    def _run(self):
        prev = disk_files(self._cache)
        while not self._stop.is_set():
            cur = disk_files(self._cache)
            both = sum(size for name, (ino, size) in prev.items()
                       if cur.get(name, (None,))[0] == ino)
            self.peak = max(self.peak, both)
            self.one_scan_peak = max(self.one_scan_peak,
                                     sum(size for _, size in cur.values()))
            prev = cur
            time.sleep(self._every)

    def stop(self):
        self._stop.set()
        self._th.join()
        return self.peak


def wait_for(pred, what, timeout=10.0):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if pred():
            return
        time.sleep(0.05)
    fail("timed out waiting for " + what)


def sanitizer_reports(s):
    reports = [n for n in os.listdir(s.root) if n.startswith("san.")]
    for n in reports:
        with open(os.path.join(s.root, n)) as f:
            print("sanitizer report %s:\n%s" % (n, f.read()[:4000]))
    return reports


def main(body, name):
    """Runs body(scratch) with cleanup; exit 0 ok, 1 failed."""
    need_fuse()
    s = Scratch(name)
    try:
        body(s)
        for pid in s.pids:  # let daemons finish their exit (leak checks)
            wait_for(lambda: not pid_alive(pid), "daemon %d to exit" % pid, timeout=30)
        if sanitizer_reports(s):
            fail("the sanitizers reported errors (above)")
    except AssertionError as e:
        print("FAIL: %s" % e)
        sanitizer_reports(s)
        s.close()
        sys.exit(1)
    except BaseException:
        sanitizer_reports(s)
        s.close()
        raise
    s.close()
    print("ok")
    sys.exit(0)
