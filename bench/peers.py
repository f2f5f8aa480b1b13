#!/usr/bin/python3
"""bench/peers.py - rollcache against rclone mount and s3fs (issue 15).

Serves one `rollcache synth` dataset from nginx (tests/servers/nginx.sh,
access log of the bytes sent) and from s3rver (tests/servers/s3rver.sh),
and mounts it three ways:

  rollcache  rollcache mount http://nginx/ MNT --limit LIMIT (defaults otherwise)
  rclone     rclone mount :http: MNT --http-url http://nginx/ --vfs-cache-mode full
                 --vfs-cache-max-size LIMIT --read-only --cache-dir DIR
  s3fs       s3fs bucket MNT -o url=http://s3rver,use_path_request_style,use_cache=DIR

For each system and each LIMIT (one below the dataset's size, one above)
it runs the same reader over EPOCHS epochs: every file of the view is
opened and read to the end in 1 MiB reads, the TFRecord framing is parsed
and each record is identified by (length, data CRC, first 32 bytes).
rollcache's view is MNT/epochs/N, and between epochs the reader runs
`rollcache epoch MNT next --wait` (timed); the peers' view is the whole
dataset, every epoch.

Printed per system and limit:
  first      seconds from the start of the mount command to the first
             record's bytes in the reader's hands (the reader polls the
             view every 1 ms)
  MB/s       bytes the reader read per epoch / its read time
  down MB    bytes the server sent during the epoch (nginx $bytes_sent from
             the access log; s3rver: wchar of its process, /proc/PID/io)
  disk MB    peak bytes on disk of the system's cache directory, sampled
             every 100 ms (st_blocks)
  RSS MB     peak resident set of the daemon, sampled every 100 ms
  distinct   distinct records read so far (dataset: N)
  next s     rollcache: seconds of `epoch next --wait` after the epoch
Then the daemon is killed with SIGKILL, the mount point detached, and the
system mounted again on the same cache: `first` and one epoch again
(the row "after kill -9").

Usage (after a build, rclone and s3fs installed: scripts/deps.sh):
  /usr/bin/python3 bench/peers.py [--build build] [--size 256M]
      [--record-size 64K] [--files 16] [--epochs 5] [--limits 128M,512M]
      [--systems rollcache,rclone,s3fs] [--work DIR] [--first-only N]
2 GiB as in the issue: --size 2G --files 64 --limits 1G,4G.
--first-only N: only the time to first record (and rollcache's `epoch next
--wait` at a boundary whose data is resident), N fresh mounts per system.
"""
import argparse
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
SERVERS = os.path.join(SRC, "tests", "servers")
UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
READ = 1 << 20


def size(s):
    m = re.fullmatch(r"(\d+)([KMG]?)", s.strip())
    if not m:
        raise argparse.ArgumentTypeError("%s: expected a size such as 256M" % s)
    return int(m.group(1)) * UNITS.get(m.group(2), 1)


def mib(n):
    return "%.0f" % (n / 1e6)


# ---- the reader ----------------------------------------------------------


class Reader:
    """Reads files to the end, parses TFRecord framing, counts distinct records."""

    def __init__(self):
        self.seen = set()

    def read_file(self, path, first_cb=None):
        """Returns (bytes, records); calls first_cb() when the first record is in hand."""
        nbytes = nrec = 0
        buf = bytearray()
        chunk = bytearray(READ)  # reused: a fresh 1 MiB per read costs page faults
        view = memoryview(chunk)
        with open(path, "rb", buffering=0) as f:
            while True:
                got = f.readinto(chunk)
                if not got:
                    break
                nbytes += got
                buf += view[:got]
                off = 0
                while off + 12 <= len(buf):
                    (n,) = struct.unpack_from("<Q", buf, off)
                    end = off + 12 + n + 4
                    if end > len(buf):
                        break
                    self.seen.add((n, bytes(buf[end - 4:end]),
                                   bytes(buf[off + 12:off + 12 + min(n, 32)])))
                    nrec += 1
                    if first_cb:
                        first_cb()
                        first_cb = None
                    off = end
                del buf[:off]
        if buf:
            raise RuntimeError("%s: %d bytes of a truncated record at its end" % (path, len(buf)))
        return nbytes, nrec

    def read_dir(self, d):
        files = []
        for root, _, names in os.walk(d):
            files += [os.path.join(root, n) for n in names]
        files.sort()
        t0 = time.monotonic()
        nb = nr = 0
        for p in files:
            b, r = self.read_file(p)
            nb += b
            nr += r
        return nb, nr, time.monotonic() - t0


def first_record(view, t0, timeout=60.0):
    """Polls `view` every 1 ms until a file holds a record; returns seconds since t0."""
    deadline = time.monotonic() + timeout
    got = []
    while time.monotonic() < deadline:
        try:
            names = []
            for root, _, ns in os.walk(view):
                names += [os.path.join(root, n) for n in ns]
        except OSError:
            names = []
        for p in sorted(names):
            try:
                with open(p, "rb", buffering=0) as f:
                    head = f.read(12)
                    if len(head) < 12:
                        continue
                    (n,) = struct.unpack_from("<Q", head, 0)
                    body = f.read(n + 4)
                    if len(body) == n + 4:
                        got.append(time.monotonic() - t0)
                        return got[0]
            except OSError:
                continue
        time.sleep(0.001)
    raise RuntimeError("no record in %s within %.0f s" % (view, timeout))


# ---- samplers of disk and RSS --------------------------------------------


def disk_bytes(d):
    total = 0
    for root, _, names in os.walk(d):
        for n in names:
            try:
                total += os.lstat(os.path.join(root, n)).st_blocks * 512
            except OSError:
                pass
    return total


def rss_bytes(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class Peak:
    """Samples disk use of a directory and RSS of a pid every 100 ms."""

    def __init__(self, cache_dir):
        self.cache_dir = cache_dir
        self.pid = None
        self.disk = self.rss = 0
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stop.wait(0.1):
            self.sample()

    def sample(self):
        self.disk = max(self.disk, disk_bytes(self.cache_dir))
        if self.pid:
            self.rss = max(self.rss, rss_bytes(self.pid))

    def reset(self):
        self.disk = self.rss = 0

    def close(self):
        self.stop.set()
        self.t.join()


# ---- servers -------------------------------------------------------------


def sh(*args, **kw):
    return subprocess.run([str(a) for a in args], check=True, capture_output=True, text=True, **kw)


class Nginx:
    def __init__(self, root, state, html=False):
        self.state = state
        env = dict(os.environ, NGINX_ACCESS_LOG="1")
        self.url = sh(os.path.join(SERVERS, "nginx.sh"), "start", root, state,
                      env=env).stdout.split()[-1]
        if html:
            # rclone's http backend reads HTML directory listings, rollcache's JSON
            conf = os.path.join(state, "nginx.conf")
            with open(conf) as f:
                text = f.read()
            with open(conf, "w") as f:
                f.write(text.replace("autoindex_format json;", "autoindex_format html;"))
            sh("/usr/sbin/nginx", "-p", state, "-c", conf, "-s", "reload")
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:  # the reload is asynchronous
                out = subprocess.run(["curl", "-s", self.url], capture_output=True, text=True)
                if out.stdout.lstrip().startswith("<"):
                    break
                time.sleep(0.05)

    def sent(self):
        total = 0
        try:
            with open(os.path.join(self.state, "access.log")) as f:
                for line in f:
                    parts = line.split()
                    if len(parts) >= 3 and parts[2].isdigit():
                        total += int(parts[2])
        except FileNotFoundError:
            pass
        return total

    def stop(self):
        subprocess.run([os.path.join(SERVERS, "nginx.sh"), "stop", self.state])


class S3rver:
    def __init__(self, root, state, bucket):
        self.state = state
        self.url = sh(os.path.join(SERVERS, "s3rver.sh"), "start", bucket, state).stdout.split()[-1]
        sh("/usr/bin/python3", os.path.join(SERVERS, "s3put.py"), self.url, bucket, root)
        with open(os.path.join(state, "pid")) as f:
            self.pid = int(f.read())

    def sent(self):
        """Bytes the server process passed to write()/send() (wchar): its responses."""
        with open("/proc/%d/io" % self.pid) as f:
            for line in f:
                if line.startswith("wchar:"):
                    return int(line.split()[1])
        return 0

    def stop(self):
        subprocess.run([os.path.join(SERVERS, "s3rver.sh"), "stop", self.state])


# ---- the systems ---------------------------------------------------------


def unmount(mnt):
    for _ in range(50):
        if subprocess.run(["fusermount3", "-u", "-q", mnt]).returncode == 0:
            return
        if not os.path.ismount(mnt):
            return
        time.sleep(0.1)
    subprocess.run(["fusermount3", "-u", "-z", "-q", mnt])


class Rollcache:
    name = "rollcache"
    epochs_resident = True

    def __init__(self, a, nginx, work, limit):
        self.rc = os.path.join(os.path.abspath(a.build), "cli", "rollcache")
        self.src = nginx
        self.mnt = os.path.join(work, "mnt")
        self.cache = os.path.join(work, "cache")
        self.limit = limit
        self.extra = a.rollcache_opts.split() if a.rollcache_opts else []
        self.pid = None
        self.epoch = None

    def mount(self):
        t0 = time.monotonic()
        sh(self.rc, "mount", self.src.url, self.mnt, "--cache-dir", self.cache, "--limit",
           self.limit, *self.extra)
        with open(os.path.join(self.mnt, ".rollcache", "stats")) as f:
            st = json.load(f)
        self.pid = st["pid"]
        return t0

    def view(self):
        return os.path.join(self.mnt, "current")

    def epoch_view(self):
        """The epoch the reader reads now: epochs/N, N fixed when it starts."""
        with open(os.path.join(self.mnt, ".rollcache", "stats")) as f:
            self.epoch = json.load(f)["epoch"]
        return os.path.join(self.mnt, "epochs", str(self.epoch))

    def next(self):
        t = time.monotonic()
        sh(self.rc, "epoch", self.mnt, "next", "--wait")
        return time.monotonic() - t

    def umount(self):
        subprocess.run([self.rc, "umount", self.mnt], capture_output=True)
        unmount(self.mnt)


class Rclone:
    name = "rclone"
    epochs_resident = False

    def __init__(self, a, nginx, work, limit):
        self.src = nginx
        self.mnt = os.path.join(work, "mnt")
        self.cache = os.path.join(work, "cache")
        self.limit = limit
        self.p = None
        self.pid = None

    def mount(self):
        t0 = time.monotonic()
        self.p = subprocess.Popen(
            ["rclone", "mount", ":http:", self.mnt, "--http-url", self.src.url,
             "--vfs-cache-mode", "full", "--vfs-cache-max-size", self.limit, "--read-only",
             "--cache-dir", self.cache, "--config", "/dev/null"],
            stdout=subprocess.DEVNULL, stderr=open(self.mnt + ".log", "a"))
        self.pid = self.p.pid
        return t0

    def view(self):
        return self.mnt

    def epoch_view(self):
        return self.mnt

    def next(self):
        return None

    def umount(self):
        unmount(self.mnt)
        if self.p:
            self.p.terminate()
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


class S3fs(Rclone):
    name = "s3fs"

    def __init__(self, a, s3, work, limit):
        super().__init__(a, s3, work, limit)
        self.passwd = os.path.join(work, "passwd")
        with open(self.passwd, "w") as f:
            f.write("S3RVER:S3RVER\n")
        os.chmod(self.passwd, 0o600)

    def mount(self):
        t0 = time.monotonic()
        self.p = subprocess.Popen(
            ["s3fs", "peers", self.mnt, "-f", "-o",
             "url=%s,use_path_request_style,use_cache=%s,passwd_file=%s,ro" %
             (self.src.url, self.cache, self.passwd)],
            stdout=subprocess.DEVNULL, stderr=open(self.mnt + ".log", "a"))
        self.pid = self.p.pid
        return t0


def kill9(sysm):
    os.kill(sysm.pid, signal.SIGKILL)
    for _ in range(100):
        try:
            os.kill(sysm.pid, 0)
        except ProcessLookupError:
            break
        if getattr(sysm, "p", None) and sysm.p.poll() is not None:
            break
        time.sleep(0.05)
    unmount(sysm.mnt)


# ---- runs ----------------------------------------------------------------


def run_one(a, cls, server, limit_s, dataset_records, out):
    work = tempfile.mkdtemp(prefix="peers-%s-" % cls.name, dir=a.work)
    os.makedirs(os.path.join(work, "mnt"))
    os.makedirs(os.path.join(work, "cache"))
    s = cls(a, server, work, limit_s)
    peak = Peak(s.cache)
    reader = Reader()
    rows = []
    try:
        for phase in ("fresh", "after kill -9"):
            peak.reset()
            t0 = s.mount()
            peak.pid = s.pid
            first = first_record(s.view(), t0)
            n_ep = a.epochs if phase == "fresh" else 1
            for e in range(n_ep):
                peak.reset()
                sent0 = server.sent()
                nb, nr, dt = reader.read_dir(s.epoch_view())
                nxt = s.next()
                peak.sample()
                rows.append({
                    "system": s.name, "limit": limit_s, "phase": phase, "epoch": e,
                    "first_s": first if e == 0 else None, "read_bytes": nb, "records": nr,
                    "mbps": nb / dt / 1e6 if dt > 0 else 0.0, "down": server.sent() - sent0,
                    "disk": peak.disk, "rss": peak.rss, "distinct": len(reader.seen),
                    "next_s": nxt,
                })
                r = rows[-1]
                print("%-9s %-6s %-13s %2d %7s %8.1f %8s %8s %8s %7s %6d/%d %7s" %
                      (r["system"], limit_s, phase, e,
                       "%.3f" % first if e == 0 else "", r["mbps"], mib(r["down"]),
                       mib(r["disk"]), mib(r["rss"]), mib(nb), r["distinct"], dataset_records,
                       "%.3f" % nxt if nxt is not None else "-"), flush=True)
            if phase == "fresh":
                kill9(s)
        s.umount()
    finally:
        peak.close()
        if os.path.ismount(s.mnt):
            s.umount()
        shutil.rmtree(work, ignore_errors=True)
    out += rows


def first_only(a, cls, server, limit_s, out):
    """N fresh mounts over an empty cache: time to first record; rollcache: next --wait."""
    for i in range(a.first_only):
        work = tempfile.mkdtemp(prefix="peers-first-%s-" % cls.name, dir=a.work)
        os.makedirs(os.path.join(work, "mnt"))
        os.makedirs(os.path.join(work, "cache"))
        s = cls(a, server, work, limit_s)
        try:
            t0 = s.mount()
            if a.first_via_next and cls is Rollcache:
                s.next()  # the way before issue 15: the first epoch came with `next --wait`
            first = first_record(s.view(), t0)
            waits, idle = [], []
            if cls is Rollcache:
                # a boundary whose data is resident: wait until min_records are, then advance
                time.sleep(0.5)
                for _ in range(3):
                    deadline = time.monotonic() + 30
                    while time.monotonic() < deadline:
                        with open(os.path.join(s.mnt, ".rollcache", "stats")) as f:
                            st = json.load(f)
                        if st["resident"]["records"] >= st.get("min_records", 1000):
                            break
                        time.sleep(0.05)
                    waits.append(s.next())
                # the same once the samplers are idle (the dataset is all in,
                # or the cache is full and the epoch's admit used up): the
                # boundary's cost without the samplers' pause to wait for
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    with open(os.path.join(s.mnt, ".rollcache", "stats")) as f:
                        st = json.load(f)
                    if st["sampler"]["idle"]:
                        break
                    time.sleep(0.05)
                idle = [s.next() for _ in range(3)]
            print("%-9s %-6s mount %d: first record %.3f s%s" %
                  (s.name, limit_s, i, first,
                   "; epoch next --wait %s; samplers idle: %s" % (
                       ", ".join("%.3f" % w for w in waits), ", ".join("%.3f" % w for w in idle))
                   if waits else ""), flush=True)
            out.append({"system": s.name, "limit": limit_s, "first_s": first, "next_s": waits,
                        "next_idle_s": idle if waits else []})
        finally:
            s.umount()
            shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--size", type=size, default=size("256M"))
    ap.add_argument("--record-size", default="64K")
    ap.add_argument("--files", type=int, default=16)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--limits", default="128M,512M")
    ap.add_argument("--systems", default="rollcache,rclone,s3fs")
    ap.add_argument("--work", default=None, help="scratch directory (default: a new one in /var/tmp)")
    ap.add_argument("--first-only", type=int, default=0)
    ap.add_argument("--first-via-next", action="store_true",
                    help="--first-only: rollcache's reader runs `epoch next --wait` before it "
                    "reads (how the first epoch came before issue 15)")
    ap.add_argument("--rollcache-opts", default="", help="extra `rollcache mount` arguments")
    ap.add_argument("--json", default=None, help="write the rows as JSON to this file")
    a = ap.parse_args()

    systems = {"rollcache": Rollcache, "rclone": Rclone, "s3fs": S3fs}
    want = [x for x in a.systems.split(",") if x]
    for x in want:
        if x not in systems:
            sys.exit("peers: --systems %s: expected rollcache, rclone or s3fs" % x)
    for tool, need in (("rclone", "rclone"), ("s3fs", "s3fs"), ("fusermount3", "rollcache")):
        if need in want and shutil.which(tool) is None:
            sys.exit("peers: %s is not installed: run scripts/deps.sh" % tool)
    rc = os.path.join(a.build, "cli", "rollcache")
    if "rollcache" in want and not os.access(rc, os.X_OK):
        sys.exit("peers: %s is missing: build first (meson setup build && ninja -C build)" % rc)
    rs = size(a.record_size)
    records = max(1, a.size // (rs + 16))
    own = a.work is None
    a.work = a.work or tempfile.mkdtemp(prefix="rollcache-peers-", dir="/var/tmp")
    os.makedirs(a.work, exist_ok=True)
    data = os.path.join(a.work, "data")
    nginx = html = s3 = None
    out = []
    try:
        if not os.path.isdir(data):
            sh(os.path.join(SRC, a.build, "cli", "rollcache") if "rollcache" in want
               else os.path.join(SRC, "build", "cli", "rollcache"),
               "synth", data, "--records", records, "--record-size", rs,
               "--shards", a.files)
        total = sum(os.path.getsize(os.path.join(data, n)) for n in os.listdir(data))
        print("dataset: %d files, %d records, %.1f MB; limits %s; %d epochs" %
              (a.files, records, total / 1e6, a.limits, a.epochs), flush=True)
        nginx = Nginx(data, os.path.join(a.work, "nginx"))
        if "rclone" in want:
            html = Nginx(data, os.path.join(a.work, "nginx-html"), html=True)
        if "s3fs" in want:
            s3 = S3rver(data, os.path.join(a.work, "s3rver"), "peers")
        if not a.first_only:
            print("%-9s %-6s %-13s %2s %7s %8s %8s %8s %8s %7s %13s %7s" %
                  ("system", "limit", "phase", "ep", "first s", "MB/s", "down MB", "disk MB",
                   "RSS MB", "read MB", "distinct", "next s"))
        for limit_s in [x for x in a.limits.split(",") if x]:
            for x in want:
                server = {"s3fs": s3, "rclone": html}.get(x, nginx)
                if a.first_only:
                    first_only(a, systems[x], server, limit_s, out)
                else:
                    run_one(a, systems[x], server, limit_s, records, out)
    finally:
        if nginx:
            nginx.stop()
        if html:
            html.stop()
        if s3:
            s3.stop()
        if own:
            shutil.rmtree(a.work, ignore_errors=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
