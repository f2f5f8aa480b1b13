#!/usr/bin/python3
"""sampler-storm-faults-server: `rollcache ingest` through a fault storm of
our fault-injecting HTTP server (tests/servers/faults.py --storm), then
`ingest` again into the same cache with the storm over.

For each seed: a dataset of 10 uncompressed TFRecord objects of 40-80
records; the server answers every object request with a fault with
probability 0.5, the kind drawn uniformly from 500, 503, 429, reset, cut,
short, flip, stall (a 3 s stall; ingest runs with --timeout 1s, --retries 4).
--hard seeds run at probability 0.85 as well, and two of their objects get
a fault on every request (faults.py --always): one a short body (it is
given up part-way), one a 500 (given up before its first byte), so that
objects are still given up after ingest's rounds.  The suite runs seeds 1-3 and hard
seed 1; the full run, by hand from the repository root after
`meson compile -C build`:

  RC_BIN=build/cli/rollcache /usr/bin/python3 tests/sampler/it_storm.py --seeds 1-20

Checks, per seed, against the source and the server's log (GET /__log:
one entry per request with its Range, fault, status and body bytes sent):
  - 0 corrupt: every payload in the cache is a source record, none twice;
  - requests == requests in the log, the MANIFEST included (the sampler
    counts its MANIFEST probe; the storm never faults the MANIFEST);
    retries == object requests - objects requested (the first request of
    an ingest round for an object is a retry too);
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
  - records: a model of the reader (sampler/reader.c) and of ingest's
    rounds (sampler/plan.c) walked over each object's requests in the log,
    transfer by transfer - RETRIES + 1 attempts each; an object given up
    on faults that may pass gets up to ROUNDS more transfers, each resuming
    at good_end; an attempt delivered records when the next request
    resumes further on; a flip on a retried attempt makes its record
    pending, the next delivered record (in a later round too) recovers it;
    a flip in a record's payload on the last attempt loses 1 record (the
    object is read on), one in its framing (length or length CRC) is
    retried as exhausted; an object still given up after the rounds is
    partial, its pending record not lost - must give records_recovered,
    records_lost, failed_objects, objects_partial exactly; objects_done ==
    objects not partial; ingest names every failed object on stderr, exits
    1 when there is one and says to run again when one is partial;
  - every record not delivered is accounted for: an object read to its end
    misses exactly its records_lost; source - admitted == records_lost +
    the unread records of partial objects;
  - then GET /__calm (no more faults) and `ingest` again into the same
    cache: exit 0, nothing lost or failed, one request per partial object
    starting at the offset after its last record admitted (nothing else
    asked for), objects_done == the partial objects, and it admits exactly
    the records still missing less those counted lost, none twice: at the
    end source - admitted == records_lost of the storm's run.
Once per run (gzip_rounds): GZIP objects, which a resume reads again from
their first byte - one cut, one flipped on every request - are left
partial with 0 records_lost (what a round skipped, the next reads again),
and the clean ingest admits every other record, none twice.
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
ROUNDS = 2  # ingest's rounds after the pass (sampler_i.h, SMP_ROUNDS)
HARD_P = 0.85  # --hard seeds: objects are still given up after the rounds
OBJECTS = 10


def server_log(url):
    with urllib.request.urlopen(url + "__log", timeout=10) as r:
        return json.load(r)


def range_start(rng):
    if not rng:
        return 0
    return int(rng[len("bytes="):].partition("-")[0] or 0)


def record_spans(payloads):
    """Object offsets (starts, ends) of the records of one object."""
    starts, ends, off = [], [], 0
    for p in payloads:
        starts.append(off)
        off += len(p) + 16
        ends.append(off)
    return starts, ends


def framing_flip(flip, starts):
    """Whether the flipped byte is in a record's length or its CRC (the
    first 12 bytes): the reader loses the framing, not one record's CRC."""
    k = bisect.bisect_right(starts, flip) - 1
    return k >= 0 and flip - starts[k] < 12


def model(key, reqs, starts, ends, admitted):
    """The reader's counters for one object from its requests (in order),
    walked transfer by transfer: RETRIES + 1 attempts each, then (given up
    on faults that may pass) up to ROUNDS more transfers, each resuming at
    good_end.  admitted: its records in the cache.  Returns (recovered,
    lost, failed, partial, transfers)."""
    pending = recovered = lost = attempt = transfer = 0
    failed = partial = False
    for i, e in enumerate(reqs):
        start = range_start(e["range"])
        before = bisect.bisect_right(ends, start)  # records wholly before start
        final = i == len(reqs) - 1
        lenient = attempt == RETRIES
        flip = e["fault"] == "flip"
        skipped = flip and lenient and not framing_flip(e["flip"], starts)
        if not final:
            delivered = range_start(reqs[i + 1]["range"]) > start
        elif flip:
            delivered = bisect.bisect_right(ends, e["flip"]) > before
        else:
            delivered = admitted > before
        if delivered:
            recovered += pending
            pending = 0
        if skipped:  # a CRC on the last attempt: skipped, the object read on
            lost += 1
            pending = 0
            failed = True
        elif flip:  # re-read from good_end (lost framing: on the last attempt too)
            pending = max(pending, 1)
        if e["fault"] == "ok" or skipped:
            if not final:
                rcsamp.fail("%s: requested again after it was read: %r" % (key, reqs[i + 1]))
            break
        if attempt < RETRIES:
            if final:
                rcsamp.fail("%s: its last request (attempt %d of %d) was a fault, not retried: "
                            "%r" % (key, attempt + 1, RETRIES + 1, e))
            attempt += 1
        elif final:  # exhausted in its last round: left partial, its pending record not lost
            if transfer != ROUNDS:
                rcsamp.fail("%s: given up after %d transfers, not %d" % (key, transfer + 1,
                                                                         ROUNDS + 1))
            failed = partial = True
        else:  # exhausted: the next round resumes it
            transfer += 1
            attempt = 0
            if transfer > ROUNDS:
                rcsamp.fail("%s: more than %d transfers" % (key, ROUNDS + 1))
    return recovered, lost, failed, partial, transfer + 1


def storm_ingest(url, cache):
    extra = ["--timeout", "1s", "--retries", str(RETRIES), "--connections", "4"]
    code, st, err = rcsamp.ingest(url, cache, "64M", extra, check=False)
    return code, st, err, server_log(url)


def check_cache(why, cache, want, st):
    """0 corrupt, none twice, records_admitted is what the cache holds.
    Returns the cache's payloads (a Counter)."""
    got = rcsamp.cache_payloads(cache)
    extra_recs = got - want
    if extra_recs:
        why("%d corrupt or foreign records in the cache (e.g. %r)" % (
            sum(extra_recs.values()), next(iter(extra_recs))[:40]))
    twice = [p for p, n in got.items() if n > 1]
    if twice:
        why("%d records admitted twice (e.g. %r)" % (len(twice), twice[0][:40]))
    return got


def check_log(why, st, log, keys):
    """Transfer counters against the server's log.  Returns (faults, bytes sent)."""
    faults = collections.Counter(e["fault"] for e in log if e["key"] != "MANIFEST")
    status = collections.Counter(e["status"] for e in log)
    objreqs = [e for e in log if e["key"] != "MANIFEST"]
    if set(e["key"] for e in objreqs) - set(keys):
        why("requests for keys not in the dataset: %r" % sorted(
            set(e["key"] for e in objreqs) - set(keys)))
    checks = [
        ("requests", len(log), "requests in the server's log (MANIFEST included)"),
        ("retries", len(objreqs) - len(set(e["key"] for e in objreqs)),
         "object requests - objects requested (a round's first request is a retry)"),
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
    return faults, sent


def run_seed(work, seed, p=P):
    name = "seed%d" % seed if p == P else "seed%d-hard" % seed
    root = os.path.join(work, name)
    keys = ["s%02d-%02d.tfrecord" % (seed, i) for i in range(OBJECTS)]
    data = {}
    # 40-80 records per object: make_dataset writes one count per call
    for i, k in enumerate(keys):
        n = 40 + (seed * 7 + i * 13) % 41
        data.update(rcsamp.make_dataset(root, 1, n, 64, 1500, seed=seed * 100 + i, names=[k]))
    cache = os.path.join(work, name + "-cache")
    # hard seeds: two objects that no round heals, one part-way, one before its first byte
    always = ["--always", keys[0] + "=short", "--always", keys[1] + "=500"] if p != P else []
    srv = rcsamp.Server("faults.py", [root, "--storm", str(p), "--seed", str(seed),
                                      "--plan", PLAN, "--stall", "3"] + always,
                        os.path.join(work, name + "-srv"))
    try:
        return check_seed(srv.url, cache, seed, p, keys, data)
    finally:
        srv.stop()


def check_seed(url, cache, seed, p, keys, data):
    """The storm's ingest and its checks, then the clean ingest's."""
    code, st, err, log = storm_ingest(url, cache)
    why = lambda s: rcsamp.fail("seed %d: %s" % (seed, s))  # noqa: E731
    if "requests" not in st:
        why("ingest wrote no stats (exit %d): %s" % (code, err.strip()[-300:]))
    want = collections.Counter(q for v in data.values() for q in v)
    got = check_cache(why, cache, want, st)
    admitted = sum(got.values())
    if st["records_admitted"] != admitted:
        why("records_admitted %d, the cache holds %d" % (st["records_admitted"], admitted))
    objreqs = collections.defaultdict(list)
    for e in log:
        if e["key"] != "MANIFEST":
            objreqs[e["key"]].append(e)
    faults, sent = check_log(why, st, log, keys)

    # records: the reader's model over the log, and what is missing
    recovered = lost = failed = partial = rounds = unread = 0
    resume = {}  # partial object -> object offset after its last record admitted
    for k in keys:
        starts, ends = record_spans(data[k])
        idx = [i for i, q in enumerate(data[k]) if got[q]]
        if not objreqs.get(k):
            why("%s was never requested" % k)
        r, lo, f, pa, tr = model(k, objreqs[k], starts, ends, len(idx))
        missing = len(data[k]) - len(idx)
        recovered, lost, failed, partial = recovered + r, lost + lo, failed + f, partial + pa
        rounds += tr - 1
        if pa:
            resume[k] = ends[idx[-1]] if idx else 0
            unread += missing - lo
            if idx and idx != list(range(len(idx))) and lo == 0:
                why("%s: records admitted with a gap and none lost: %r" % (k, idx))
        elif missing != lo:
            why("%s: %d records missing, %d counted lost (its transfer ended)" % (
                k, missing, lo))
        if f and k not in err:
            why("%s failed but ingest did not name it:\n%s" % (k, err.strip()[-500:]))
    for counter, modelled in (("records_recovered", recovered), ("records_lost", lost),
                              ("failed_objects", failed), ("objects_partial", partial),
                              ("objects_done", OBJECTS - partial)):
        if st[counter] != modelled:
            why("%s %d != %d from the server's log (faults %s)" % (
                counter, st[counter], modelled, dict(faults)))
    # every record not delivered is lost, or an unread record of a partial object
    if sum(want.values()) - admitted != st["records_lost"] + unread:
        why("missing %d != lost %d + unread of partial objects %d" % (
            sum(want.values()) - admitted, st["records_lost"], unread))
    if (code != 0) != (failed > 0):
        why("ingest exited %d with %d failed objects" % (code, failed))
    if partial and "run again" not in err:
        why("%d objects left partial and ingest did not say to run again:\n%s" % (
            partial, err.strip()[-500:]))
    again = clean_ingest(url, len(log), cache, want, got, resume, st["records_lost"], why)
    fig = {
        "seed": seed, "p": p, "requests": st["requests"], "faults": dict(faults),
        "records": sum(want.values()), "admitted": admitted, "lost": st["records_lost"],
        "partial": partial, "unread": unread, "rounds": rounds, "again": again,
        "recovered": st["records_recovered"], "failed_objects": st["failed_objects"],
        "bytes_fetched": st["bytes_fetched"], "bytes_sent": sent, "wall_s": st["_wall_s"],
    }
    print("seed %2d (p %.2f): requests %3d faults %3d (%s) records %d admitted %d lost %d "
          "recovered %d failed_objects %d rounds %d partial %d (unread %d) again %d "
          "bytes sent %d fetched %d corrupt 0 %.1f s" % (
              seed, p, st["requests"], sum(v for k, v in faults.items() if k != "ok"),
              " ".join("%s:%d" % (k, faults[k]) for k in PLAN.split(",")),
              fig["records"], admitted, st["records_lost"], st["records_recovered"],
              st["failed_objects"], rounds, partial, unread, again, sent,
              st["bytes_fetched"], st["_wall_s"]), flush=True)
    return fig


def clean_ingest(url, logged, cache, want, got, resume, lost, why):
    """`ingest` again into the same cache from the same server, the storm
    over (/__calm): it resumes each partial object where it stopped (one
    request each, from the offset after its last record admitted) and admits
    exactly the records still missing that were not counted lost, none
    twice.  logged: entries of the server's log before it.  Returns the
    records it admitted."""
    with urllib.request.urlopen(url + "__calm", timeout=10) as r:
        r.read()
    code, st, err = rcsamp.ingest(url, cache, "64M", ["--retries", "0"], check=False)
    log = server_log(url)[logged:]
    if code != 0 or st.get("records_lost") or st.get("failed_objects"):
        why("the clean ingest: exit %d, records_lost %r, failed_objects %r:\n%s" % (
            code, st.get("records_lost"), st.get("failed_objects"), err.strip()[-500:]))
    after = check_cache(why, cache, want, st)
    added = sum(after.values()) - sum(got.values())
    if st["records_admitted"] != added:
        why("the clean ingest: records_admitted %d, the cache gained %d" % (
            st["records_admitted"], added))
    missing = sum(want.values()) - sum(got.values())
    if added != missing - lost:
        why("the clean ingest admitted %d, want %d (missing %d - lost %d)" % (
            added, missing - lost, missing, lost))
    if sum(want.values()) - sum(after.values()) != lost:
        why("after the clean ingest %d records are missing, %d counted lost" % (
            sum(want.values()) - sum(after.values()), lost))
    asked = {e["key"]: range_start(e["range"]) for e in log if e["key"] != "MANIFEST"}
    nreq = sum(1 for e in log if e["key"] != "MANIFEST")
    if asked != resume or nreq != len(resume):
        why("the clean ingest asked %r (%d requests), want each partial object once from "
            "where it stopped: %r" % (asked, nreq, resume))
    if st["objects_done"] != len(resume):
        why("the clean ingest: objects_done %d, want %d" % (st["objects_done"], len(resume)))
    return added


def gzip_rounds(work):
    """GZIP objects, which a resume reads again from their first byte (its
    resident records skipped): one cut on every request, one flipped on
    every request (its last attempts skip a record, then the stream breaks)
    and one clean.  Both faulted objects are left partial after the rounds
    with nothing in records_lost - what a round skipped, the next reads
    again; the clean ingest after /__calm admits the rest, none twice."""
    root = os.path.join(work, "gz")
    keys = ["gz-%d.tfrecord.gz" % i for i in range(3)]
    data = rcsamp.make_dataset(root, 3, 60, 64, 1500, seed=5, gz=True, names=keys)
    want = collections.Counter(q for v in data.values() for q in v)
    why = lambda s: rcsamp.fail("gzip: %s" % s)  # noqa: E731
    cache = os.path.join(work, "gz-cache")
    srv = rcsamp.Server("faults.py", [root, "--storm", "0", "--always", keys[0] + "=cut",
                                      "--always", keys[1] + "=flip"],
                        os.path.join(work, "gz-srv"))
    try:
        extra = ["--retries", "2", "--compression", "gzip"]
        code, st, err = rcsamp.ingest(srv.url, cache, "64M", extra, check=False)
        got = check_cache(why, cache, want, st)
        first = {k: st.get(k) for k in ("records_lost", "objects_partial", "failed_objects",
                                         "objects_done")}
        if code != 1 or first != {"records_lost": 0, "objects_partial": 2,
                                   "failed_objects": 2, "objects_done": 1}:
            why("the faulted ingest: exit %d, %r" % (code, first))
        with urllib.request.urlopen(srv.url + "__calm", timeout=10) as r:
            r.read()
        code, st, err = rcsamp.ingest(srv.url, cache, "64M", extra, check=False)
        after = check_cache(why, cache, want, st)
        added = sum(after.values()) - sum(got.values())
        if code != 0 or st.get("records_lost") or after != want or \
                st["records_admitted"] != added:
            why("the clean ingest: exit %d, records_lost %r, admitted %d, the cache holds "
                "%d of %d" % (code, st.get("records_lost"), st["records_admitted"],
                              sum(after.values()), sum(want.values())))
    finally:
        srv.stop()
    print("gzip: %d records, %d admitted, 2 objects left partial, 0 lost; the clean ingest "
          "admitted the other %d" % (sum(want.values()), sum(got.values()), added), flush=True)


def parse_seeds(s):
    out = []
    for part in s.split(","):
        a, _, b = part.partition("-")
        out += list(range(int(a), int(b or a) + 1))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default="1-3")
    ap.add_argument("--hard", default="1", help="seeds run at fault probability HARD_P too "
                    "(\"\": none)")
    ap.add_argument("--json", help="write the per-seed figures here")
    a = ap.parse_args()
    rcsamp.rc_bin()
    work = rcsamp.tmpdir("storm")
    try:
        figs = [run_seed(work, s) for s in parse_seeds(a.seeds)]
        figs += [run_seed(work, s, HARD_P) for s in (parse_seeds(a.hard) if a.hard else [])]
        gzip_rounds(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    tot = collections.Counter()
    kinds = collections.Counter()
    for f in figs:
        for k in ("requests", "records", "admitted", "lost", "partial", "unread", "again",
                  "rounds", "recovered", "failed_objects"):
            tot[k] += f[k]
        kinds.update(f["faults"])
    print("ok: %d seeds: requests %d, faults %d (%s), records %d, admitted %d, lost %d, "
          "recovered %d, failed objects %d, rounds %d, left partial %d (unread %d), "
          "admitted again %d, corrupt 0" % (
              len(figs), tot["requests"], sum(v for k, v in kinds.items() if k != "ok"),
              " ".join("%s:%d" % (k, kinds[k]) for k in PLAN.split(",")), tot["records"],
              tot["admitted"], tot["lost"], tot["recovered"], tot["failed_objects"],
              tot["rounds"], tot["partial"], tot["unread"], tot["again"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(figs, f, indent=1)


if __name__ == "__main__":
    main()
