#!/usr/bin/python3
"""sampler-faults: `rollcache ingest` through our fault-injecting HTTP server
(tests/servers/faults.py) on 127.0.0.1.

Every object's first request fails one way: 503 and 429 with Retry-After,
500, 408, a TCP reset mid-body, a clean close mid-body, an honest short body
(a truncated object), a flipped byte, a stall.  One key answers 403 and one
404 on every request.

Proves: ingest completes; every admitted record equals its source record and
counts match (plain and GZIP); no corrupt record is admitted; the flipped
byte is counted in records_recovered and nothing in records_lost
(docs/counters.md); each faulted
object is fetched at most retries+1 times and Retry-After is honoured (the
retry comes no sooner than it says); 403 and 404 are tried exactly once,
counted and named; the stall is cut by the low-speed limit (the run ends
long before the server's 60 s stall would).
"""
import collections
import json
import os
import shutil
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rcsamp  # noqa: E402

PLAN = "503,500,429,408,reset,cut,short,flip,stall"
RETRIES = 4


def server_stats(url):
    with urllib.request.urlopen(url + "__stats", timeout=10) as r:
        return json.load(r)


def run(work, name, gz):
    root = os.path.join(work, name)
    data = rcsamp.make_dataset(root, 9, 40, 64, 1200, seed=7 if gz else 8, gz=gz,
                               names=["f-%02d.tfrecord" % i for i in range(9)])
    srv = rcsamp.Server("faults.py", [root, "--plan", PLAN, "--stall", "60",
                                      "--deny403", "secret.tfrecord", "--deny404", "gone.tfrecord"],
                        os.path.join(work, name + "-srv"))
    try:
        cache = os.path.join(work, name + "-cache")
        extra = ["--timeout", "2s", "--retries", str(RETRIES), "--connections", "4"]
        if gz:
            extra += ["--compression", "gzip"]
        code, st, err = rcsamp.ingest(srv.url, cache, "64M", extra, check=False)
        want = collections.Counter(p for v in data.values() for p in v)
        rcsamp.expect_equal_sets(rcsamp.cache_payloads(cache), want, name)
        if code != 1 or "secret.tfrecord" not in err or "gone.tfrecord" not in err:
            rcsamp.fail("%s: want exit 1 naming the 403 and 404 keys, got %d:\n%s" % (name, code, err))
        if st["objects_done"] != len(data) or st["records_admitted"] != sum(want.values()):
            rcsamp.fail("%s: counts %r" % (name, st))
        if st["http_4xx"] != 2 or st["failed_objects"] != 2:
            rcsamp.fail("%s: 403/404 not counted once each: %r" % (name, st))
        ss = server_stats(srv.url)
        for key in ("secret.tfrecord", "gone.tfrecord"):
            if ss["counts"].get(key) != 1:
                rcsamp.fail("%s: %s requested %r times, want 1" % (name, key, ss["counts"].get(key)))
        kinds = collections.Counter()
        for key in data:
            n = ss["counts"].get(key, 0)
            if n < 2 or n > RETRIES + 1:
                rcsamp.fail("%s: %s requested %d times (faults %r)" % (name, key, n, ss["faults"][key]))
            first = ss["faults"][key][0]
            kinds[first] += 1
            if first in ("503", "429"):
                gap = ss["times"][key][1] - ss["times"][key][0]
                if gap < 0.95:  # Retry-After: 1
                    rcsamp.fail("%s: %s retried after %.2f s despite Retry-After: 1" % (name, key, gap))
        if set(kinds) != set(PLAN.split(",")):
            rcsamp.fail("%s: not every fault was served: %r" % (name, kinds))
        for k in ("retries", "http_5xx", "http_408_429", "timeouts", "net_errors", "truncated"):
            if st[k] < 1:
                rcsamp.fail("%s: %s not counted: %r" % (name, k, st))
        if not gz and st["records_recovered"] < 1:
            rcsamp.fail("%s: the flipped byte was not detected and recovered: %r" % (name, st))
        if st["records_lost"] != 0:
            rcsamp.fail("%s: records counted lost although all were admitted: %r" % (name, st))
        # bounded: the 60 s stall was cut by the 2 s low-speed limit
        if st["_wall_s"] > 45:
            rcsamp.fail("%s: ingest took %.1f s: the stall was not cut" % (name, st["_wall_s"]))
        return st
    finally:
        srv.stop()


def main():
    rcsamp.rc_bin()
    work = rcsamp.tmpdir("faults")
    try:
        a = run(work, "plain", False)
        b = run(work, "gzip", True)
        print("ok: plain retries %d recovered %d; gzip retries %d recovered %d" % (
            a["retries"], a["records_recovered"], b["retries"], b["records_recovered"]))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
