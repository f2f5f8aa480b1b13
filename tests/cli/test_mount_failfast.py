#!/usr/bin/python3
"""`rollcache mount` fails fast and says why; later failures show in
`status` (issue 14, docs/reliability.md, "Fail fast").  Three tests, one part
each (the argument), so that each stays a few seconds:
  sources  cli-mount-failfast-nginx-fuse   (nginx, file://, the FUSE kernel)
  s3       cli-mount-failfast-s3rver       (s3rver)
  disk     cli-mount-enospc-tmpfs-fuse     (a tmpfs as a small disk: root)
  wait     cli-epoch-wait-timeout-faults-fuse (our fault server, stalling)

Proves:
  - each unusable source makes `mount` (detached, the default, and -f) exit 1 - 2
    for a URL that cannot be parsed - with one line naming the source and
    the cause, and nothing is left mounted: a directory that does not
    exist, a plain file, a refused port, an unresolvable host, a prefix
    nginx answers 404 for, `http://[::1`, a wrong S3 key id (s3rver);
  - an nginx source without a MANIFEST: the probe's 404 is no error
    (errors.* all 0 once every record is resident, status says "errors   0");
  - a full disk under the cache (tmpfs smaller than `limit`): errors.enospc
    counts it, sampler.stopped and the last error (with its time) are in the
    stats JSON and in `status`, the log file given by --log-file has the
    line, the records admitted before stay resident, and `epoch next --wait`
    goes ahead at once saying the samplers stopped instead of waiting;
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
from clitest import RC, SERVERS, SRCDIR, skip, check, eq, run, free_port, is_mounted, finish  # noqa: E402


def start(script, args):
    p = subprocess.run([os.path.join(SERVERS, script), "start", *args], capture_output=True,
                       text=True, timeout=60)
    if p.returncode == 77:
        skip(p.stdout.strip() or p.stderr.strip())
    if p.returncode != 0:
        print("FAIL: %s start: %s%s" % (script, p.stdout, p.stderr))
        sys.exit(1)
    return p.stdout.strip().splitlines()[-1]


def stats(mp):
    with open(os.path.join(mp, ".rollcache", "stats")) as f:
        return json.load(f)


def wait_for(pred, what, limit=30):
    """Polls pred() (bounded); a failure names what it waited for."""
    for _ in range(limit * 10):
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    check(False, "not reached within %d s: %s" % (limit, what))
    return None


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


def full_disk(root, mounts):
    """A tmpfs of 1 MiB under a cache whose limit is 8 MiB: ENOSPC."""
    src = os.path.join(root, "src")
    p = run("synth", src, "--records", 1000, "--record-size", "4K", "--shards", 4)
    eq(p.returncode, 0, "synth (%s)" % p.stderr)
    cache = os.path.join(root, "c-tmpfs")
    os.makedirs(cache)
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1M", "tmpfs", cache],
                       capture_output=True, text=True)
    if p.returncode:
        check(False, "mount tmpfs (root was checked): %s" % p.stderr)
        return
    mp = os.path.join(root, "mp-full")
    os.makedirs(mp)
    log = os.path.join(root, "daemon.log")
    try:
        p = run("mount", "file://%s/" % src, mp, "--limit", "8M", "--shard-size", "256K",
                "--cache-dir", cache, "--log-file", log, "--min-records", 100000,
                "--wait-timeout", "5m")
        eq(p.returncode, 0, "mount over a small disk (%s)" % p.stderr.strip())
        if p.returncode:
            return
        mounts.append(mp)
        st = wait_for(lambda: (lambda s: s if s["sampler"]["stopped"] else None)(stats(mp)),
                      "samplers stopped by ENOSPC")
        if not st:
            return
        check(st["errors"]["enospc"] >= 1, "errors.enospc: %r" % st["errors"])
        check("No space left" in st["sampler"]["error"], "sampler.error %r" % st["sampler"])
        last = st["last_error"] or {}
        check("No space left" in last.get("message", ""), "last_error %r" % last)
        check(abs(last.get("unix_ms", 0) / 1000 - time.time()) < 3600,
              "last_error time is now-ish: %r" % last)
        resident = st["resident"]["records"]
        check(resident > 0, "records admitted before the disk filled stay: %r" % st["resident"])
        out = run("status", mp, "--wide").stdout
        check("sampler  STOPPED" in out, "status says stopped: %r" % out)
        check(re.search(r"^last     \d{4}-\d\d-\d\d \d\d:\d\d:\d\d error: .*No space left", out,
                        re.M), "status last line: %r" % out)
        check(re.search(r"^errors   [1-9]", out, re.M), "status errors counted: %r" % out)
        # the wait bound is 5 min: it must go ahead at once, saying why
        p = run("epoch", mp, "next", "--wait", timeout=120)
        eq(p.returncode, 0, "epoch next --wait (%s)" % p.stderr.strip())
        check("samplers stopped" in p.stderr and "No space left" in p.stderr,
              "epoch next --wait says why: %r" % p.stderr)
        eq(stats(mp)["resident"]["records"], resident, "resident records after the boundary")
        with open(log) as f:
            text = f.read()
        check(re.search(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z rollcache\[\d+\]: error: "
                        r".*No space left", text, re.M), "log file: %r" % text[-500:])
    finally:
        if is_mounted(mp):
            run("umount", mp)
        for _ in range(50):
            if subprocess.run(["umount", cache], capture_output=True).returncode == 0:
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
        else:
            full_disk(root, mounts)
    finally:
        for m in mounts:
            if is_mounted(m):
                run("umount", m)
        if peer:
            subprocess.run([os.path.join(SERVERS, script), "stop", state], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)
    finish()


main()
