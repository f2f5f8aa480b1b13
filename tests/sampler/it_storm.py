#!/usr/bin/python3
"""sampler-storm-faults-server: `rollcache ingest` through a fault storm of
our fault-injecting HTTP server (tests/servers/faults.py --storm).

For each seed: a dataset of 10 uncompressed TFRecord objects of 40-80
records; the server answers every object request with a fault with
probability 0.5, the kind drawn uniformly from 500, 503, 429, reset, cut,
short, flip, stall (a 3 s stall; ingest runs with --timeout 1s, --retries 4).
The suite runs seeds 1-3; the full run, by hand from the repository root
after `meson compile -C build`:

  RC_BIN=build/cli/rollcache /usr/bin/python3 tests/sampler/it_storm.py --seeds 1-20

Checks, per seed, against the source and the server's log (GET /__log:
one entry per request with its Range, fault, status and body bytes sent):
  - 0 corrupt: every payload in the cache is a source record, none twice;
  - requests == requests in the log, the MANIFEST included (the sampler
    counts its MANIFEST probe; the storm never faults the MANIFEST);
    retries == object requests - objects requested;
  - http_5xx == 500s + 503s served, http_408_429 == 429s served,
    http_4xx == 0; net_errors == resets + cuts (curl: a reset or a body
    shorter than its Content-Length), timeouts == stalls (the low-speed
    limit cuts a stall longer than --timeout), truncated == shorts (an
    honest Content-Length shorter than the range asked for);
  - bytes_fetched == body bytes the server sent (error bodies and the
    MANIFEST included), less what the client never received: the half
    body a reset sent may never reach curl (the RST can come before curl
    reads it: seen on Linux as the reset's bytes missing), and the reader stops reading a
    flipped body at the bad record; so sent - (resets' + flips' bytes) <=
    bytes_fetched <= sent;
  - records: a model of the reader (sampler/reader.c) walked over each
    object's requests in the log - an attempt delivered records when the
    next request resumes further on (Range from good_end), a flip on a
    retried attempt makes its record pending, the next delivered record
    recovers it, a flip on the last attempt loses 1 record, an object
    given up (retries exhausted) loses its pending record - must give
    records_recovered, records_lost and failed_objects exactly; objects
    not failed lose no record; objects_done == objects not given up;
    ingest names every failed object on stderr and exits 1 when there is
    one;
  - every record not delivered is accounted for: source - admitted ==
    records_lost + uncounted, where uncounted is only ever records of an
    object given up part-way (retries exhausted) or whose framing a flip
    broke on the last attempt: docs/counters.md says records_lost does not
    count those (how many records the rest held is unknown; the object
    counts in failed_objects).  The figure is printed per seed.
One line per seed; exit 1 with a one-line reason naming the seed on any
mismatch.
"""
import argparse
import bisect
import collections
import json
import os
import shutil
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rcsamp  # noqa: E402

PLAN = "500,503,429,reset,cut,short,flip,stall"
P = 0.5
RETRIES = 4
OBJECTS = 10


def server_log(url):
    with urllib.request.urlopen(url + "__log", timeout=10) as r:
        return json.load(r)


def range_start(rng):
    if not rng:
        return 0
    return int(rng[len("bytes="):].partition("-")[0] or 0)


def model(key, reqs, ends, admitted):
    """The reader's counters for one object from its requests (in order).
    ends: object offsets of its record ends; admitted: its records in the
    cache.  Returns (recovered, lost, failed, given_up)."""
    pending = recovered = lost = 0
    failed = given_up = False
    for i, e in enumerate(reqs):
        start = range_start(e["range"])
        before = bisect.bisect_right(ends, start)  # records wholly before start
        final = i == len(reqs) - 1
        lenient = i == RETRIES
        if not final:
            delivered = range_start(reqs[i + 1]["range"]) > start
        elif e["fault"] == "flip":
            delivered = bisect.bisect_right(ends, e["flip"]) > before
        else:
            delivered = admitted > before
        if delivered:
            recovered += pending
            pending = 0
        if e["fault"] == "flip":
            if lenient:
                lost += 1
                pending = 0
                failed = True
            else:
                pending = max(pending, 1)
        if final and e["fault"] not in ("ok", "flip"):
            if i != RETRIES:
                rcsamp.fail("%s: its last request (%d of %d) was a fault, not retried: %r" %
                            (key, i + 1, RETRIES + 1, e))
            lost += pending
            failed = given_up = True
        elif final and e["fault"] == "flip" and not lenient:
            rcsamp.fail("%s: a flipped body on attempt %d was not retried" % (key, i + 1))
    return recovered, lost, failed, given_up


def run_seed(work, seed):
    name = "seed%d" % seed
    root = os.path.join(work, name)
    keys = ["s%02d-%02d.tfrecord" % (seed, i) for i in range(OBJECTS)]
    data = {}
    # 40-80 records per object: make_dataset writes one count per call
    for i, k in enumerate(keys):
        n = 40 + (seed * 7 + i * 13) % 41
        data.update(rcsamp.make_dataset(root, 1, n, 64, 1500, seed=seed * 100 + i, names=[k]))
    srv = rcsamp.Server("faults.py", [root, "--storm", str(P), "--seed", str(seed),
                                      "--plan", PLAN, "--stall", "3"],
                        os.path.join(work, name + "-srv"))
    try:
        cache = os.path.join(work, name + "-cache")
        extra = ["--timeout", "1s", "--retries", str(RETRIES), "--connections", "4"]
        code, st, err = rcsamp.ingest(srv.url, cache, "64M", extra, check=False)
        log = server_log(srv.url)
    finally:
        srv.stop()
    why = lambda s: rcsamp.fail("seed %d: %s" % (seed, s))  # noqa: E731
    if "requests" not in st:
        why("ingest wrote no stats (exit %d): %s" % (code, err.strip()[-300:]))

    # 0 corrupt: every cached payload is a source record, none twice
    got = rcsamp.cache_payloads(cache)
    want = collections.Counter(p for v in data.values() for p in v)
    extra_recs = got - want
    if extra_recs:
        why("%d corrupt or foreign records in the cache (e.g. %r)" % (
            sum(extra_recs.values()), next(iter(extra_recs))[:40]))
    twice = [p for p, n in got.items() if n > 1]
    if twice:
        why("%d records admitted twice (e.g. %r)" % (len(twice), twice[0][:40]))
    admitted = sum(got.values())
    if st["records_admitted"] != admitted:
        why("records_admitted %d, the cache holds %d" % (st["records_admitted"], admitted))

    # the server's log
    faults = collections.Counter(e["fault"] for e in log if e["key"] != "MANIFEST")
    status = collections.Counter(e["status"] for e in log)
    objreqs = collections.defaultdict(list)
    for e in log:
        if e["key"] != "MANIFEST":
            objreqs[e["key"]].append(e)
    if set(objreqs) - set(keys):
        why("requests for keys not in the dataset: %r" % sorted(set(objreqs) - set(keys)))
    n_obj = sum(len(v) for v in objreqs.values())
    checks = [
        ("requests", len(log), "requests in the server's log (MANIFEST included)"),
        ("retries", n_obj - len(objreqs), "object requests - objects requested"),
        ("http_5xx", status[500] + status[503], "500s + 503s served"),
        ("http_408_429", status[408] + status[429], "408s + 429s served"),
        ("http_4xx", sum(n for s, n in status.items() if s and 400 <= s < 500 and
                         s not in (408, 429)), "other 4xx served"),
        ("net_errors", faults["reset"] + faults["cut"], "resets + cuts served"),
        ("timeouts", faults["stall"], "stalls served"),
        ("truncated", faults["short"], "short bodies served"),
    ]
    for counter, logged, what in checks:
        if st[counter] != logged:
            why("%s %d != %d %s (faults %s)" % (counter, st[counter], logged, what,
                                                dict(faults)))
    sent = sum(e["sent"] for e in log)
    unreceivable = sum(e["sent"] for e in log if e["fault"] in ("reset", "flip"))
    if not sent - unreceivable <= st["bytes_fetched"] <= sent:
        why("bytes_fetched %d outside [%d, %d]: body bytes sent %d, of them %d by resets "
            "and flips" % (st["bytes_fetched"], sent - unreceivable, sent, sent, unreceivable))

    # records: the reader's model over the log, and what is missing
    recovered = lost = failed = given_up = uncounted = 0
    by_key = collections.Counter()
    for p in got:
        by_key[p.split(b"#", 1)[0].decode()] += got[p]
    for k in keys:
        ends, off = [], 0
        for p in data[k]:
            off += len(p) + 16
            ends.append(off)
        r, lo, f, g = model(k, objreqs.get(k, []), ends, by_key[k])
        if not objreqs.get(k):
            why("%s was never requested" % k)
        missing = len(data[k]) - by_key[k]
        recovered += r
        lost += lo
        failed += f
        given_up += g
        if not f and missing:
            why("%s: %d records missing although its transfer succeeded" % (k, missing))
        if f and k not in err:
            why("%s failed but ingest did not name it:\n%s" % (k, err.strip()[-500:]))
        if f and missing < lo:
            why("%s: %d records missing, %d counted lost" % (k, missing, lo))
        uncounted += missing - lo
    for counter, modelled in (("records_recovered", recovered), ("records_lost", lost),
                              ("failed_objects", failed),
                              ("objects_done", OBJECTS - given_up)):
        if st[counter] != modelled:
            why("%s %d != %d from the server's log (faults %s)" % (
                counter, st[counter], modelled, dict(faults)))
    missing_total = sum(want.values()) - admitted
    if missing_total != st["records_lost"] + uncounted:
        why("internal: missing %d != lost %d + uncounted %d" % (
            missing_total, st["records_lost"], uncounted))
    if (code != 0) != (failed > 0):
        why("ingest exited %d with %d failed objects" % (code, failed))
    fig = {
        "seed": seed, "requests": st["requests"], "faults": dict(faults),
        "records": sum(want.values()), "admitted": admitted, "lost": st["records_lost"],
        "uncounted": uncounted, "recovered": st["records_recovered"],
        "failed_objects": st["failed_objects"], "given_up": given_up,
        "bytes_fetched": st["bytes_fetched"], "bytes_sent": sent, "wall_s": st["_wall_s"],
    }
    print("seed %2d: requests %3d faults %3d (%s) records %d admitted %d lost %d "
          "uncounted %d recovered %d failed_objects %d bytes sent %d fetched %d corrupt 0 "
          "%.1f s" % (
              seed, st["requests"], sum(v for k, v in faults.items() if k != "ok"),
              " ".join("%s:%d" % (k, faults[k]) for k in PLAN.split(",")),
              fig["records"], admitted, st["records_lost"], uncounted,
              st["records_recovered"], st["failed_objects"], sent, st["bytes_fetched"],
              st["_wall_s"]), flush=True)
    return fig


def parse_seeds(s):
    out = []
    for part in s.split(","):
        a, _, b = part.partition("-")
        out += list(range(int(a), int(b or a) + 1))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="1-3")
    ap.add_argument("--json", help="write the per-seed figures here")
    a = ap.parse_args()
    rcsamp.rc_bin()
    work = rcsamp.tmpdir("storm")
    try:
        figs = [run_seed(work, s) for s in parse_seeds(a.seeds)]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    tot = collections.Counter()
    kinds = collections.Counter()
    for f in figs:
        for k in ("requests", "records", "admitted", "lost", "uncounted", "recovered",
                  "failed_objects", "given_up"):
            tot[k] += f[k]
        kinds.update(f["faults"])
    print("ok: %d seeds: requests %d, faults %d (%s), records %d, admitted %d, lost %d, "
          "uncounted %d, recovered %d, failed objects %d (given up %d), corrupt 0" % (
              len(figs), tot["requests"], sum(v for k, v in kinds.items() if k != "ok"),
              " ".join("%s:%d" % (k, kinds[k]) for k in PLAN.split(",")), tot["records"],
              tot["admitted"], tot["lost"], tot["uncounted"], tot["recovered"],
              tot["failed_objects"], tot["given_up"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(figs, f, indent=1)


if __name__ == "__main__":
    main()
