#!/usr/bin/python3
"""cli-healthz-nginx-faults-fuse: GET /healthz and
rollcache_errors_total{kind} of `metrics_listen`, on real FUSE mounts.

  - A mount of nginx (tests/servers/nginx.sh) with relist = 1: while nginx
    serves, /healthz answers 200 "ok" (HEAD too, without a body), and
    /metrics has one rollcache_errors_total series per key of the stats
    JSON's errors, each labelled kind, never below the JSON's value.  Then
    nginx stops and the mount is asked for its next epoch: the re-list
    fails and the samplers wait it out, and /healthz answers 503 and one
    line, "the samplers wait: waiting: ..." (sampler.state in the stats).
  - A mount of tests/servers/faults.py that answers every object GET with
    503 (its MANIFEST listing is fine): /healthz answers 503 and one line,
    "the source fails: N transfer errors and nothing admitted ...", and
    rollcache_errors_total{kind="http_5xx"} counts the 503s the stats
    JSON counts.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clitest import (SERVERS, skip, missing, check, eq, run, free_port, is_mounted,  # noqa: E402
                     finish, start_peer)


def stats(mp):
    with open(os.path.join(mp, ".rollcache", "stats")) as f:
        return json.load(f)


def get(port, path, method="GET"):
    """(status, body) of an HTTP request to the metrics endpoint."""
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def error_series(text):
    """{kind: value} of the rollcache_errors_total samples (Prometheus' parser)."""
    from prometheus_client.parser import text_string_to_metric_families
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == "rollcache_errors_total":
                out[s.labels.get("kind")] = s.value
    return out


def wait_health(port, want_prefix, limit=60):
    """Polls /healthz once a second until its body starts with want_prefix."""
    last = None
    for _ in range(limit):
        last = get(port, "/healthz")
        if last[1].startswith(want_prefix):
            return last
        time.sleep(1)
    check(False, "/healthz never said %r; last %r" % (want_prefix, last))
    return last


def main():
    if not os.path.exists("/dev/fuse"):
        skip("/dev/fuse is missing")
    try:
        import prometheus_client.parser  # noqa: F401
    except ImportError:
        missing("python3-prometheus-client is not installed",
                "run scripts/deps.sh (apt-get install python3-prometheus-client)")
    root = tempfile.mkdtemp(prefix="rc-healthz-")
    state = os.path.join(root, "nginx")
    nginx = faults = None
    mounts = []
    try:
        www = os.path.join(root, "www")
        os.makedirs(www)
        # 16 objects of 256 KiB; an epoch admits 512 KiB: most are left to fetch
        p = run("synth", os.path.join(www, "data"), "--records", 1024, "--record-size", "4K",
                "--shards", 16)
        eq(p.returncode, 0, "synth (%s)" % p.stderr)
        nginx = start_peer("nginx.sh", [www, state])
        src = nginx + "data/"
        mp = os.path.join(root, "mnt-nginx")
        os.makedirs(mp)
        port = free_port()
        p = run("mount", src, mp, "--limit", "1M", "--shard-size", "128K",
                "--cache-dir", os.path.join(root, "cache-nginx"), "--relist", 1,
                "--first-epoch", 0, "--metrics-listen", "127.0.0.1:%d" % port)
        eq(p.returncode, 0, "mount nginx (%s)" % p.stderr)
        if p.returncode != 0:
            return
        mounts.append(mp)
        eq(get(port, "/healthz"), (200, "ok\n"), "healthz while nginx serves")
        eq(get(port, "/healthz", "HEAD"), (200, ""), "HEAD /healthz")
        status, text = get(port, "/metrics")
        eq(status, 200, "GET /metrics")
        series = error_series(text)
        errs = stats(mp)["errors"]
        eq(set(series), set(errs), "one errors series per kind of the stats JSON")
        for kind, n in errs.items():
            check(series.get(kind) is not None and series[kind] >= n,
                  "errors{kind=%s}: %r, JSON %d" % (kind, series.get(kind), n))

        subprocess.run([os.path.join(SERVERS, "nginx.sh"), "stop", state], capture_output=True,
                       timeout=60)
        nginx = None
        p = run("epoch", mp, "next")
        eq(p.returncode, 0, "epoch next (%s)" % p.stderr)
        # the relist fails: the samplers wait it out (they go on once it lists)
        status, body = wait_health(port, "the samplers wait: waiting: ")
        eq(status, 503, "samplers waiting: status")
        eq(body.count("\n"), 1, "samplers waiting: one line: %r" % body)
        check(stats(mp)["sampler"]["state"].startswith("waiting"), "sampler.state waiting")

        # every object GET answered 503: the source fails
        fstate = os.path.join(root, "faults")
        p = subprocess.run([os.path.join(SERVERS, "faults.py"), "start",
                            os.path.join(www, "data"), fstate, "--plan", "503",
                            "--depth", "100000", "--retry-after", "1"],
                           capture_output=True, text=True, timeout=60)
        eq(p.returncode, 0, "faults.py start (%s)" % p.stderr)
        if p.returncode != 0:
            return
        faults = fstate
        mp = os.path.join(root, "mnt-faults")
        os.makedirs(mp)
        port = free_port()
        p = run("mount", p.stdout.strip().splitlines()[-1], mp, "--limit", "1M",
                "--shard-size", "128K", "--cache-dir", os.path.join(root, "cache-faults"),
                "--retries", 1, "--metrics-listen", "127.0.0.1:%d" % port)
        eq(p.returncode, 0, "mount faults.py (%s)" % p.stderr)
        if p.returncode != 0:
            return
        mounts.append(mp)
        status, body = wait_health(port, "the source fails: ")
        eq(status, 503, "source fails: status")
        eq(body.count("\n"), 1, "source fails: one line: %r" % body)
        errs = stats(mp)["errors"]
        check(errs["http_5xx"] > 0, "http_5xx counted: %r" % errs)
        series = error_series(get(port, "/metrics")[1])
        check(series.get("http_5xx", 0) >= errs["http_5xx"],
              "errors{kind=http_5xx} %r, JSON %d" % (series.get("http_5xx"), errs["http_5xx"]))
    finally:
        for m in mounts:
            if is_mounted(m):
                run("umount", m)
        if nginx:
            subprocess.run([os.path.join(SERVERS, "nginx.sh"), "stop", state],
                           capture_output=True, timeout=60)
        if faults:
            subprocess.run([os.path.join(SERVERS, "faults.py"), "stop", faults],
                           capture_output=True, timeout=60)
        shutil.rmtree(root, ignore_errors=True)
    finish()


main()
