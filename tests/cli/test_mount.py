#!/usr/bin/python3
"""cli-mount-conventions-fuse: `rollcache mount` behaves like rclone and s3fs
mounts do, on a real FUSE kernel mount.

Proves: a mount point that holds files is refused with one line and exit 2,
and accepted with --allow-non-empty or -o nonempty; the source may come from
the config file's [source] url; a schedule with a gap is exit 2 naming the
line; [epoch] keys given as flags or -o reach the schedule (stats JSON);
`metrics_listen` serves the Prometheus text over HTTP, parsed by
prometheus_client's own parser (python3-prometheus-client), every sample
labelled with source and mountpoint (and rollcache_errors_total with one
series per kind of the stats JSON's errors); sd_notify: with NOTIFY_SOCKET set, the
daemon sends READY=1 once the mount is up.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clitest import RC, skip, missing, check, eq, run, free_port, is_mounted, finish  # noqa: E402


def umount(mp):
    if is_mounted(mp):
        run("umount", mp)


def main():
    if not os.path.exists("/dev/fuse"):
        skip("/dev/fuse is missing")
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        missing("python3-prometheus-client is not installed",
                "run scripts/deps.sh (apt-get install python3-prometheus-client)")
    root = tempfile.mkdtemp(prefix="rc-mount-cli-")
    mounts = []
    try:
        remote = os.path.join(root, "remote")
        p = run("synth", remote, "--records", 400, "--record-size", "4K", "--shards", 4)
        eq(p.returncode, 0, "synth (%s)" % p.stderr)
        src = "file://%s/" % remote
        base = ["--limit", "4M", "--shard-size", "256K"]

        # a mount point that is not empty
        full = os.path.join(root, "full")
        os.makedirs(full)
        open(os.path.join(full, "keep"), "w").close()
        p = run("mount", src, full, *base, "--cache-dir", os.path.join(root, "c0"))
        eq(p.returncode, 2, "mount on a non-empty dir: exit")
        eq(len(p.stderr.strip().splitlines()), 1, "one line: %r" % p.stderr)
        check("not empty" in p.stderr and "--allow-non-empty" in p.stderr,
              "non-empty: says what to do: %r" % p.stderr)
        check(not is_mounted(full), "non-empty dir was mounted")
        for extra in (["--allow-non-empty"], ["-o", "nonempty"]):
            p = run("mount", src, full, *base, "--cache-dir", os.path.join(root, "c0"), *extra)
            eq(p.returncode, 0, "mount %s (%s)" % (extra, p.stderr))
            mounts.append(full)
            check(is_mounted(full), "%s: not mounted" % extra)
            umount(full)

        # the source from the config file, [epoch] keys as flags and -o
        ini = os.path.join(root, "train.ini")
        with open(ini, "w") as f:
            f.write("[cache]\nlimit = 4M\ndir = %s\n[source]\nurl = %s\n[sampler]\n"
                    "shard_size = 256K\n[epoch 0-1]\nlimit = 2M\n[epoch 2-]\npolicy = fifo\n"
                    % (os.path.join(root, "c1"), src))
        mnt = os.path.join(root, "mnt")
        os.makedirs(mnt)
        port = free_port()
        p = run("mount", mnt, "--config", ini, "--policy", "lru", "-o", "min_uses=1",
                "--metrics-listen", "127.0.0.1:%d" % port)
        eq(p.returncode, 0, "mount MOUNTPOINT --config (url in the file): %s" % p.stderr)
        mounts.append(mnt)
        if p.returncode == 0:
            st = json.load(open(os.path.join(mnt, ".rollcache", "stats")))
            eq(st["source"], src, "source from the config file")
            desc = json.dumps(st["schedule"])
            check("lru" in desc and "fifo" not in desc,
                  "--policy lru overrides every entry: %s" % desc)
            check("min_uses" not in st["schedule"] or st["schedule"]["min_uses"] == 1,
                  "-o min_uses=1: %s" % desc)

            # metrics over HTTP, with labels, through Prometheus' own parser
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port,
                                        timeout=30) as r:
                eq(r.status, 200, "GET /metrics")
                check(r.headers["Content-Type"].startswith("text/plain; version=0.0.4"),
                      "content type %r" % r.headers["Content-Type"])
                text = r.read().decode()
            fams = {f.name: f for f in text_string_to_metric_families(text)}
            check("rollcache_limit_bytes" in fams, "families: %r" % sorted(fams))
            n = 0
            kinds = set()
            for fam in fams.values():
                for s in fam.samples:
                    n += 1
                    labels = dict(s.labels)
                    if s.name == "rollcache_errors_total":
                        kinds.add(labels.pop("kind", None))
                    eq(labels, {"source": src, "mountpoint": mnt},
                       "labels of %s" % s.name)
            # one errors series per key of the stats JSON's errors, by kind
            eq(kinds, set(st["errors"]), "rollcache_errors_total kinds")
            check(n >= 20, "%d samples" % n)
            eq(fams["rollcache_limit_bytes"].samples[0].value, 2 << 20, "limit_bytes of [epoch 0-1]")
            try:
                urllib.request.urlopen("http://127.0.0.1:%d/nothing" % port, timeout=30)
                check(False, "GET /nothing answered 2xx")
            except urllib.error.HTTPError as e:
                eq(e.code, 404, "GET /nothing")
            umount(mnt)

        # a schedule with a gap is a configuration error: exit 2, with the line
        gap = os.path.join(root, "gap.ini")
        with open(gap, "w") as f:
            f.write("[cache]\nlimit = 4M\n[epoch 0]\nlimit = 2M\n[epoch 5-]\nlimit = 4M\n")
        p = run("mount", src, mnt, "--config", gap, "--shard-size", "256K",
                "--cache-dir", os.path.join(root, "c2"))
        eq(p.returncode, 2, "schedule with a gap: exit (%s)" % p.stderr)
        check("gap.ini" in p.stderr, "names the file: %r" % p.stderr)
        check(not is_mounted(mnt), "a gap mounted")

        # sd_notify: READY=1 once the mount is up (-f: as a Type=notify unit runs it)
        sock_path = os.path.join(root, "notify")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(sock_path)
        sock.settimeout(60)
        env = dict(os.environ, NOTIFY_SOCKET=sock_path)
        d = subprocess.Popen([RC, "mount", src, mnt, *base, "--cache-dir",
                              os.path.join(root, "c3"), "-f"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        mounts.append(mnt)
        try:
            msg = sock.recv(4096).decode()
            check("READY=1" in msg.split("\n"), "notify message %r" % msg)
            check(is_mounted(mnt), "READY=1 before the mount was up")
        except socket.timeout:
            check(False, "no READY=1 within 60 s")
        finally:
            umount(mnt)
            try:
                d.wait(timeout=60)
            except subprocess.TimeoutExpired:
                d.kill()
            sock.close()
        eq(d.returncode, 0, "mount -f exit after umount (%s)" % d.stderr.read()[-300:])
    finally:
        for m in mounts:
            try:
                umount(m)
            except Exception:
                pass
        for m in mounts:
            for _ in range(50):
                if not is_mounted(m):
                    break
                time.sleep(0.1)
        shutil.rmtree(root, ignore_errors=True)
    finish()


main()
