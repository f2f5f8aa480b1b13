#!/usr/bin/python3
"""`rollcache mount` fails fast and says why; later failures show in
`status` (docs/reliability.md, "Fail fast").  Three tests, one part
each (the argument), so that each stays a few seconds:
  sources  cli-mount-failfast-nginx-fuse   (nginx, file://, the FUSE kernel)
  s3       cli-mount-failfast-s3rver       (s3rver)
  disk     cli-mount-enospc-tmpfs-fuse     (nginx, a tmpfs as a small disk: root)
  wait     cli-epoch-wait-timeout-faults-fuse (our fault server, stalling)

Proves:
  - each unusable source makes `mount` (detached, the default, and -f) exit 1 - 2
    for a URL that cannot be parsed - with one line naming the source and
    the cause, and nothing is left mounted: a directory that does not
    exist, a plain file, a refused port, an unresolvable host, a prefix
    nginx answers 404 for, `http://[::1`, a wrong S3 key id (s3rver);
  - a source that lists 0 objects - a real empty directory, an empty S3
    bucket, a mistyped prefix of a bucket that has data (s3rver) - makes
    `mount` and `ingest` exit 1 with one line naming the URL, "0 objects
    listed" and what to do; with allow_empty = true it mounts and `status`
    says "0 objects listed" (sampler.listed_objects; 2 for the right prefix);
  - a file:// source that vanishes after the mount: the next re-list fails,
    sampler.state says "waiting: the source cannot be listed: ..." (not
    stopped, JSON and `status`); once it is back (with new objects) the
    same daemon lists it and admits them by itself; a warm mount of that
    cache while the source is away again mounts (it does not wait for a
    listing), serves what it holds, and its samplers wait saying why;
  - an nginx source without a MANIFEST: the probe's 404 is no error
    (errors.* all 0 once every record is resident, status says "errors   0");
  - a full disk under the cache (a 64 MiB tmpfs, a filler file, `limit`
    256M) heals by itself: errors.enospc counts it, sampler.state says
    "waiting: disk full (ENOSPC) on CACHE_DIR, retry in N s" (JSON and
    `status`), the last error and the log file given by --log-file have the
    line, the records admitted before stay resident, `epoch next --wait`
    waits wait_timeout and goes ahead with the old view saying why; once the
    filler is removed the same daemon admits again and the next epoch shows
    it;
  - every counter of the stats JSON's sampler and errors objects is a row
    of docs/counters.md, and every row of it is in the JSON;
  - transfers that stall (tests/servers/faults.py): `epoch next --wait` goes
    ahead after wait_timeout (1 s) saying "wait_timeout passed", exit 0.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clitest import (RC, SERVERS, SRCDIR, skip, check, eq, run, free_port, is_mounted,  # noqa: E402
                     finish, wait_for, start_peer as start)


def stats(mp):
    with open(os.path.join(mp, ".rollcache", "stats")) as f:
        return json.load(f)


def doc_counters():
    """The `name` column of docs/counters.md's table: {"sampler.x", "errors.y", ...}."""
    names = set()
    with open(os.path.join(SRCDIR, "docs", "counters.md")) as f:
        for line in f:
            if line.startswith("Not counters"):
                break
            m = re.match(r"\|\s*`((?:sampler|errors)\.[a-z0-9_]+)`", line)
            if m:
                names.add(m.group(1))
    return names


def start_refused(root, src, extra=(), env=None):
    """Starts `mount src` on a mount point of its own; returns (process, mount point)."""
    mp = tempfile.mkdtemp(prefix="mp-", dir=root)
    cache = tempfile.mkdtemp(prefix="c-", dir=root)
    base = ["--limit", "4M", "--shard-size", "256K", "--retries", "1", "--timeout", "5s"]
    e = dict(os.environ, **env) if env else None
    p = subprocess.Popen([RC, "mount", src, mp, *base, *extra, "--cache-dir", cache], env=e,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return p, mp


def expect_refused_done(name, src, code, words, started):
    """The mount failed: exit code, one line naming src and holding words, nothing mounted."""
    p, mp = started
    try:
        _, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
    lines = err.strip().splitlines()
    eq(p.returncode, code, "%s: exit (%s)" % (name, err.strip()))
    eq(len(lines), 1, "%s: one line: %r" % (name, err))
    line = lines[0] if lines else ""
    check(src in line, "%s: the line names the source %s: %r" % (name, src, line))
    for w in words:
        check(w in line, "%s: the line says %r: %r" % (name, w, line))
    check(not is_mounted(mp), "%s: mounted anyway" % name)
    if is_mounted(mp):
        run("umount", mp)
    return line


def expect_refused(root, name, src, code, words, extra=(), env=None):
    return expect_refused_done(name, src, code, words, start_refused(root, src, extra, env))


def bad_sources(root, nginx):
    plain = os.path.join(root, "plain.tfrecord")
    open(plain, "wb").close()
    log = os.path.join(root, "fg.log")
    cases = [
        # (name, source, exit, words the line must hold, extra flags)
        ("no such dir", "file://%s/nothing/" % root, 1, ["No such file or directory"], []),
        ("plain file", "file://%s" % plain, 1, ["Not a directory"], []),
        ("refused port", "http://127.0.0.1:%d/data/" % free_port(), 1, ["Couldn't connect"], []),
        ("unresolvable host", "http://no-such-host.invalid/data/", 1, ["resolve"], []),
        ("404 prefix", nginx + "no/such/prefix/", 1, ["HTTP 404"], []),
        ("malformed URL", "http://[::1", 2, ["malformed URL"], []),
        # in the foreground too: one line on stderr, and the same in --log-file
        ("no such dir, -f", "file://%s/nothing/" % root, 1, ["No such file or directory"],
         ["-f", "--log-file", log]),
    ]
    # side by side: each has its own mount point and cache
    started = [start_refused(root, src, extra) for _, src, _, _, extra in cases]
    for (name, src, code, words, _), st in zip(cases, started):
        line = expect_refused_done(name, src, code, words, st)
    with open(log) as f:
        text = f.read()
    check(line.split("rollcache mount: ", 1)[-1] in text, "-f: the log file %r" % text)


def wrong_s3_key(root, s3):
    """A key id s3rver does not know: 403 at the listing, before the mount."""
    env = {"AWS_ACCESS_KEY_ID": "NOTAKEY", "AWS_SECRET_ACCESS_KEY": "SECRETVALUE",
           "AWS_SHARED_CREDENTIALS_FILE": os.path.join(root, "none")}
    line = expect_refused(root, "wrong S3 key id", "s3://bucket/ds/", 1,
                          ["InvalidAccessKeyId", "access key id"], extra=["--endpoint", s3],
                          env=env)
    check("SECRETVALUE" not in line, "the secret in the message: %r" % line)


def expect_empty(root, name, src, extra=(), env=None):
    """A source that lists 0 objects: mount and ingest exit 1, one line naming
    the URL, the count and what to do; allow_empty = true mounts it, and
    `status` says 0 objects listed."""
    words = ["%s: 0 objects listed" % src, "check the URL", "allow_empty = true"]
    expect_refused(root, name, src, 1, words, extra=extra, env=env)
    cache = tempfile.mkdtemp(prefix="c-", dir=root)
    p = subprocess.run([RC, "ingest", src, "--cache-dir", cache, "--limit", "4M", "--shard-size",
                        "256K", *extra],
                       env=dict(os.environ, **env) if env else None, capture_output=True,
                       text=True, timeout=60)
    lines = p.stderr.strip().splitlines()
    eq((p.returncode, len(lines)), (1, 1), "%s: ingest exit, one line: %r" % (name, p.stderr))
    for w in words:
        check(w in p.stderr, "%s: ingest says %r: %r" % (name, w, p.stderr))
    mp = tempfile.mkdtemp(prefix="mp-", dir=root)
    p = subprocess.run([RC, "mount", src, mp, "--limit", "4M", "--shard-size", "256K",
                        "--allow-empty", "true",
                        "--cache-dir", tempfile.mkdtemp(prefix="c-", dir=root), *extra],
                       env=dict(os.environ, **env) if env else None, capture_output=True,
                       text=True, timeout=60)
    eq(p.returncode, 0, "%s: mount with allow_empty (%s)" % (name, p.stderr.strip()))
    if p.returncode:
        return
    try:
        eq(stats(mp)["sampler"]["listed_objects"], 0, "%s: sampler.listed_objects" % name)
        out = run("status", mp, "--wide").stdout
        check(re.search(r"^sampler  (running|idle); 0 objects listed$", out, re.M),
              "%s: status shows the objects listed: %r" % (name, out))
    finally:
        run("umount", mp)


def empty_dir(root):
    """A real empty directory: refused unless allow_empty."""
    empty = os.path.join(root, "empty")
    os.makedirs(empty)
    expect_empty(root, "empty dir", "file://%s/" % empty)


def empty_s3(root, s3):
    """An empty bucket, then a mistyped prefix of a bucket that has data."""
    env = {"AWS_ACCESS_KEY_ID": "S3RVER", "AWS_SECRET_ACCESS_KEY": "S3RVER",
           "AWS_SHARED_CREDENTIALS_FILE": os.path.join(root, "none")}
    extra = ["--endpoint", s3]
    expect_empty(root, "empty S3 bucket", "s3://bucket/", extra, env)
    data = os.path.join(root, "s3data")
    p = run("synth", data, "--records", 40, "--record-size", "1K", "--shards", 2)
    eq(p.returncode, 0, "synth (%s)" % p.stderr)
    p = subprocess.run([os.path.join(SERVERS, "s3put.py"), s3, "bucket", data, "ds/"],
                       capture_output=True, text=True, timeout=120)
    eq(p.returncode, 0, "upload (%s)" % p.stderr)
    expect_empty(root, "mistyped S3 prefix", "s3://bucket/sd/", extra, env)
    mp = tempfile.mkdtemp(prefix="mp-", dir=root)
    p = subprocess.run([RC, "mount", "s3://bucket/ds/", mp, "--limit", "4M", "--shard-size",
                        "256K", "--cache-dir",
                        tempfile.mkdtemp(prefix="c-", dir=root), *extra],
                       env=dict(os.environ, **env), capture_output=True, text=True, timeout=60)
    eq(p.returncode, 0, "the right prefix mounts (%s)" % p.stderr.strip())
    if p.returncode == 0:
        try:
            eq(stats(mp)["sampler"]["listed_objects"], 2, "sampler.listed_objects of ds/")
            out = run("status", mp, "--wide").stdout
            check(re.search(r"^sampler  \w+; 2 objects listed$", out, re.M),
                  "status shows the objects listed: %r" % out)
        finally:
            run("umount", mp)


def source_comes_back(root, mounts):
    """A file:// source that vanishes after the mount: the re-list at the next
    epoch fails, the samplers wait (not stop) saying why, and once the
    directory is back they list it again by themselves and take new data."""
    src = os.path.join(root, "vanishing")
    p = run("synth", src, "--records", 40, "--record-size", "1K", "--shards", 4)
    eq(p.returncode, 0, "synth (%s)" % p.stderr)
    mp = os.path.join(root, "mp-vanish")
    os.makedirs(mp)
    # in the foreground: its exit status is checked after the unmount below
    daemon = subprocess.Popen([RC, "mount", "file://%s/" % src, mp, "--limit", "8M",
                               "--shard-size", "256K", "--relist", "1", "-f", "--cache-dir",
                               os.path.join(root, "c-vanish")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if not wait_for(lambda: is_mounted(mp) or daemon.poll() is not None, "mounted"):
        return
    eq(daemon.poll(), None, "the -f mount runs")
    if daemon.poll() is not None:
        return
    mounts.append(mp)
    st = wait_for(lambda: (lambda s: s if s["resident"]["records"] == 40 and
                           s["sampler"]["state"] == "idle" else None)(stats(mp)),
                  "the 40 records resident")
    if not st:
        return
    pid = st["pid"]
    os.rename(src, src + ".away")
    eq(run("epoch", mp, "next").returncode, 0, "epoch next while the source is away")
    st = wait_for(lambda: (lambda s: s if s["sampler"]["state"].startswith("waiting") else None)(
        stats(mp)), "samplers waiting for the source")
    if not st:
        return
    check(re.match(r"waiting: the source cannot be listed: .*No such file or directory, "
                   r"retry in \d+ s$", st["sampler"]["state"]), "state %r" % st["sampler"])
    eq(st["sampler"]["stopped"], False, "sampler.stopped while the source is away")
    out = run("status", mp, "--wide").stdout
    check(re.search(r"^sampler  waiting: the source cannot be listed: ", out, re.M),
          "status says why: %r" % out)
    os.rename(src + ".away", src)
    p = run("synth", os.path.join(src, "more"), "--records", 20, "--record-size", "1K",
            "--shards", 2)
    eq(p.returncode, 0, "synth more (%s)" % p.stderr)
    st = wait_for(lambda: (lambda s: s if s["resident"]["records"] == 60 and
                           s["sampler"]["state"] == "idle" else None)(stats(mp)),
                  "the source back: its 6 objects listed, the 20 new records admitted")
    if st:
        eq(st["pid"], pid, "the same daemon (no remount)")
        eq(st["sampler"]["listed_objects"], 6, "sampler.listed_objects")
    # away again, and unmounted while the samplers wait: the daemon ends cleanly
    os.rename(src, src + ".away")
    eq(run("epoch", mp, "next").returncode, 0, "epoch next while the source is away again")
    wait_for(lambda: stats(mp)["sampler"]["state"].startswith("waiting"),
             "samplers waiting for the source again")
    p = run("umount", mp)
    eq(p.returncode, 0, "umount while the samplers wait (%s)" % p.stderr.strip())
    try:
        _, err = daemon.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        daemon.kill()
        _, err = daemon.communicate()
    eq(daemon.returncode, 0, "the daemon's exit after an unmount while its samplers wait (%s)"
       % err.strip()[-300:])
    mounts.remove(mp)
    # a warm mount does not wait for a listing: with the source still away it
    # mounts, serves the 60 records it holds, and its samplers wait saying why
    p = run("mount", "file://%s/" % src, mp, "--limit", "8M", "--shard-size", "256K",
            "--relist", "1", "--cache-dir", os.path.join(root, "c-vanish"))
    eq(p.returncode, 0, "a warm mount while the source is away (%s)" % p.stderr.strip())
    if p.returncode:
        return
    mounts.append(mp)
    st = wait_for(lambda: (lambda s: s if s["sampler"]["state"].startswith("waiting") else None)(
        stats(mp)), "the warm mount's samplers waiting for the source")
    if st:
        eq(st["resident"]["records"], 60, "the warm mount's resident records")
        check(re.match(r"waiting: the source cannot be listed: .*No such file or directory",
                       st["sampler"]["state"]), "warm state %r" % st["sampler"]["state"])
    cur = os.path.join(mp, "current")
    n = sum(int(os.getxattr(os.path.join(cur, f), "user.rollcache.records"))
            for f in os.listdir(cur))
    eq(n, 60, "records in the warm mount's current/")
    p = run("umount", mp)
    eq(p.returncode, 0, "umount of the warm mount (%s)" % p.stderr.strip())
    mounts.remove(mp)


def manifest_probe(root, nginx, mounts):
    """nginx without a MANIFEST: its 404 is an answer, not an error."""
    mp = os.path.join(root, "mp-nginx")
    os.makedirs(mp)
    p = run("mount", nginx + "data/", mp, "--limit", "8M", "--shard-size", "256K",
            "--cache-dir", os.path.join(root, "c-nginx"))
    eq(p.returncode, 0, "nginx mount (%s)" % p.stderr.strip())
    if p.returncode:
        return
    mounts.append(mp)
    st = wait_for(lambda: (lambda s: s if s["resident"]["records"] >= 200 else None)(stats(mp)),
                  "the 200 records of the nginx source resident")
    if st:
        eq({k: v for k, v in st["errors"].items() if v}, {}, "errors after a clean nginx pass")
        eq(st["sampler"]["stopped"], False, "sampler.stopped")
        eq(st["last_error"], None, "last_error of a clean mount")
        names = set("sampler." + k for k, v in st["sampler"].items() if isinstance(v, int)
                    and not isinstance(v, bool))
        names |= set("errors." + k for k in st["errors"])
        doc = doc_counters()
        eq(sorted(names - doc), [], "stats JSON counters missing from docs/counters.md")
        eq(sorted(doc - names), [], "docs/counters.md rows missing from the stats JSON")
    lines = run("status", mp).stdout.splitlines()
    check("errors   0" in lines, "status errors line: %r" % lines)
    run("umount", mp)


def full_disk(root, nginx, mounts):
    """A 64 MiB tmpfs under a cache whose limit is 256M, nearly all of it taken
    by a filler file: the samplers hit ENOSPC and wait, saying why; once the
    filler is gone they go on by themselves (no remount) and the next epoch
    admits again."""
    disk = os.path.join(root, "disk")
    os.makedirs(disk)
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64M", "tmpfs", disk],
                       capture_output=True, text=True)
    if p.returncode:
        check(False, "mount tmpfs (root was checked): %s" % p.stderr)
        return
    cache = os.path.join(disk, "cache")
    mp = os.path.join(root, "mp-full")
    os.makedirs(mp)
    log = os.path.join(root, "daemon.log")
    filler = os.path.join(disk, "filler")
    try:
        # all of the disk but 2 MiB: the first shards fit, the rest do not
        with open(filler, "wb") as f:
            left = 64 << 20
            chunk = b"\0" * (1 << 20)
            try:
                while left > (2 << 20):
                    f.write(chunk)
                    f.flush()
                    left -= len(chunk)
            except OSError:
                pass
        p = run("mount", nginx + "data/", mp, "--limit", "256M", "--shard-size", "256K",
                "--cache-dir", cache, "--log-file", log, "--min-records", 100000,
                "--wait-timeout", "2s")
        eq(p.returncode, 0, "mount over a full disk (%s)" % p.stderr.strip())
        if p.returncode:
            return
        mounts.append(mp)
        pid = stats(mp)["pid"]
        st = wait_for(lambda: (lambda s: s if s["sampler"]["state"].startswith("waiting")
                               else None)(stats(mp)), "samplers waiting on ENOSPC")
        if not st:
            return
        sm = st["sampler"]
        check(sm["state"].startswith("waiting: disk full (ENOSPC) on %s, retry in " % cache),
              "sampler.state names the cause: %r" % sm["state"])
        eq(sm["stopped"], False, "sampler.stopped while it waits")
        eq(sm["listed_objects"], 64, "sampler.listed_objects")
        check(st["errors"]["enospc"] >= 1, "errors.enospc: %r" % st["errors"])
        last = st["last_error"] or {}
        check("ENOSPC" in last.get("message", ""), "last_error %r" % last)
        check(abs(last.get("unix_ms", 0) / 1000 - time.time()) < 3600,
              "last_error time is now-ish: %r" % last)
        resident = st["resident"]["records"]
        check(resident > 0, "records admitted before the disk filled stay: %r" % st["resident"])
        out = run("status", mp, "--wide").stdout
        check(re.search(r"^sampler  waiting: disk full \(ENOSPC\) on %s, retry in \d+ s; "
                        r"64 objects listed$" % re.escape(cache), out, re.M),
              "status says why the samplers wait: %r" % out)
        check(re.search(r"^errors   [1-9]", out, re.M), "status errors counted: %r" % out)
        # the wait is bounded by wait_timeout (2 s) and says why it could not admit
        p = run("epoch", mp, "next", "--wait", timeout=120)
        eq(p.returncode, 0, "epoch next --wait (%s)" % p.stderr.strip())
        check(re.search(r"^waiting for min_records or admit: .*\n  samplers waiting: "
                        r"disk full \(ENOSPC\) on %s, retry in \d+ s$"
                        % re.escape(cache), p.stderr, re.M),
              "epoch next --wait says why it cannot admit while it waits: %r" % p.stderr)
        check("wait_timeout passed while the samplers were waiting: disk full (ENOSPC)"
              in p.stderr, "epoch next --wait says why it went ahead: %r" % p.stderr)
        eq(stats(mp)["current"]["records"], resident, "the old view went ahead")
        # the cause goes away: the samplers go on by themselves, in the same daemon,
        # until the pass is over (objects partly in before the disk filled count as
        # resident, as after a remount: docs/reliability.md)
        os.unlink(filler)
        st = wait_for(lambda: (lambda s: s if s["sampler"]["state"] == "idle" else None)(
            stats(mp)), "the pass over once the disk has room", limit=45)
        if not st:
            return
        eq(st["pid"], pid, "the same daemon (no remount)")
        after = st["resident"]["records"]
        check(after > resident + 100, "admitted after the heal: %d, then %d records resident"
              % (resident, after))
        p = run("epoch", mp, "next", timeout=120)
        eq(p.returncode, 0, "epoch next (%s)" % p.stderr.strip())
        eq(stats(mp)["current"]["records"], after, "the next epoch shows what came after the heal")
        with open(log) as f:
            text = f.read()
        check(re.search(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z rollcache\[\d+\]: error: "
                        r"samplers: .*No space left", text, re.M), "log file: %r" % text[-500:])
    finally:
        if is_mounted(mp):
            run("umount", mp)
        for _ in range(50):
            if subprocess.run(["umount", disk], capture_output=True).returncode == 0:
                break
            time.sleep(0.1)


def wait_timeout(root, faults, mounts):
    """Transfers stalled by the server: `epoch next --wait` goes ahead after
    wait_timeout and says so (the samplers run, so nothing else ends it)."""
    mp = os.path.join(root, "mp-wait")
    os.makedirs(mp)
    p = run("mount", faults, mp, "--limit", "8M", "--shard-size", "256K", "--timeout", "60s",
            "--min-records", 1000, "--wait-timeout", "1s", "--cache-dir",
            os.path.join(root, "c-wait"))
    eq(p.returncode, 0, "mount of the stalling server (%s)" % p.stderr.strip())
    if p.returncode:
        return
    mounts.append(mp)
    p = run("epoch", mp, "next", "--wait", timeout=120)
    eq(p.returncode, 0, "epoch next --wait (%s)" % p.stderr.strip())
    check(re.search(r"^rollcache epoch: went ahead without min_records: 0 of min_records 1000 "
                    r"resident after [\d.]+ s: wait_timeout passed .*samplers running\)$",
                    p.stderr, re.M), "epoch next --wait says why: %r" % p.stderr)
    check(p.stdout.startswith("epoch 1: "), "the epoch advanced: %r" % p.stdout)
    eq(stats(mp)["last_boundary"]["wait"].split(": ")[-1][:19], "wait_timeout passed",
       "last_boundary.wait")
    run("umount", mp)


def main():
    part = sys.argv[1] if len(sys.argv) > 1 else ""
    if part not in ("sources", "s3", "disk", "wait"):
        print("usage: test_mount_failfast.py sources|s3|disk|wait")
        sys.exit(2)
    if not os.path.exists("/dev/fuse"):
        skip("/dev/fuse is missing")
    if part == "disk" and os.geteuid() != 0:
        skip("mounting a tmpfs (the full disk) needs root")
    root = tempfile.mkdtemp(prefix="rc-failfast-")
    state = os.path.join(root, "peer")
    script = peer = None
    mounts = []
    try:
        if part == "sources":
            www = os.path.join(root, "www")
            os.makedirs(www)
            p = run("synth", os.path.join(www, "data"), "--records", 200, "--record-size", "1K",
                    "--shards", 2)
            eq(p.returncode, 0, "synth (%s)" % p.stderr)
            script = "nginx.sh"
            peer = start(script, [www, state])
            bad_sources(root, peer)
            empty_dir(root)
            source_comes_back(root, mounts)
            manifest_probe(root, peer, mounts)
        elif part == "wait":
            data = os.path.join(root, "data")
            p = run("synth", data, "--records", 200, "--record-size", "1K", "--shards", 2)
            eq(p.returncode, 0, "synth (%s)" % p.stderr)
            script = "faults.py"
            peer = start(script, [data, state, "--plan", "stall", "--stall", "30"])
            wait_timeout(root, peer, mounts)
        elif part == "s3":
            script = "s3rver.sh"
            peer = start(script, ["bucket", state])
            wrong_s3_key(root, peer)
            empty_s3(root, peer)
        else:
            www = os.path.join(root, "www")
            os.makedirs(www)
            p = run("synth", os.path.join(www, "data"), "--records", 512, "--record-size", "16K",
                    "--shards", 64)
            eq(p.returncode, 0, "synth (%s)" % p.stderr)
            script = "nginx.sh"
            peer = start(script, [www, state])
            full_disk(root, peer, mounts)
    finally:
        for m in mounts:
            if is_mounted(m):
                run("umount", m)
        if peer:
            subprocess.run([os.path.join(SERVERS, script), "stop", state], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)
    finish()


main()
