#!/usr/bin/python3
"""fuse-ddp-torch-gloo / fuse-ddp-two-nodes: docs/examples/ddp.py trains with
torch DistributedDataParallel (gloo, CPU, Debian's python3-torch) over real
kernel mounts of `rollcache mount`, one process per rank started the way
torchrun starts them (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE).

one mount (default): 2 ranks, 3 epochs, over a cache filled by `rollcache
ingest` and a source with nothing more to give, so every epoch holds the
same 600 distinct records.  Checks: both ranks take the same number of
steps every epoch; per epoch the ranks' records are disjoint but for the
padding and together exactly the source's records; training epoch e reads
mount epoch m0 + e and the mount advanced once per epoch (the catalog holds
one row per epoch, no more); no hang (every run is bounded by a timeout);
a run stopped after a checkpoint saved at epoch 1 step 2 and resumed by new
processes trains on the same records after that step as the run that went
on.

two-nodes: 2 mounts of one source split by the source's rank / world_size
(two "nodes"), 2 local ranks each, 4 processes, 2 epochs.  The new caches
start with an empty epoch: the feeders wait for data and ask for the next
epoch once.  Checks: every rank the same steps (the nodes' record counts
differ: FeederDataset's all-reduce MIN); the nodes' records are disjoint,
in the first epoch each node's ranks read the node's share (with the
padding), or full batches up to the other node's count; each mount advanced
once per epoch.
Fails when python3-torch is missing (scripts/deps.sh installs it); exits
77 only when /dev/fuse is.
"""
import collections
import json
import os
import socket
import subprocess
import sys

# Under `meson test --setup=asan` librollcache.so is ASan-instrumented and
# this script and the ranks load it: run again with the runtime preloaded
# (CPython's own allocations are not ours: leak checks off), and libstdc++
# with it, so that ASan's __cxa_throw interceptor finds the real one when
# libtorch throws (else: "CHECK failed ... real___cxa_throw").
if os.environ.get("RC_UNDER_ASAN") and "libasan" not in os.environ.get("LD_PRELOAD", ""):
    _asan = subprocess.check_output(["gcc", "-print-file-name=libasan.so"]).decode().strip()
    _cxx = subprocess.check_output(["gcc", "-print-file-name=libstdc++.so.6"]).decode().strip()
    os.execve(sys.executable, [sys.executable] + sys.argv,
              dict(os.environ, LD_PRELOAD=_asan + " " + _cxx,
                   ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0"))

import rcfuse as t  # noqa: E402

try:
    import torch
except ImportError:
    t.missing("python3-torch is not installed (the DDP example needs it)",
              "run scripts/deps.sh (apt-get install python3-torch)")

EXAMPLE = os.path.join(t.SRCDIR, "docs", "examples", "ddp.py")
SCHEMA = "x:float32[8],y:int64[1]"
RECORDS = 600
BATCH = 16
sys.path.insert(0, os.path.join(t.SRCDIR, "python"))
import rollcache  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_env(rank, world, local_rank, local_world, port):
    env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(local_rank),
               LOCAL_WORLD_SIZE=str(local_world), MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(port), OMP_NUM_THREADS="1",
               PYTHONPATH=os.path.join(t.SRCDIR, "python"))
    # the ranks' feeders allocate rings of batch slots: meson's MALLOC_PERTURB_
    # (glibc fills every block at malloc and free) only slows them down
    env.pop("MALLOC_PERTURB_", None)
    return env  # under ASan: LD_PRELOAD and ASAN_OPTIONS are inherited (above)


def launch(s, datas, local_world, args, timeout=240):
    """Runs ddp.py once per rank (datas[r]: rank r's path); fails on a hang."""
    world = len(datas)
    port = free_port()
    procs = []
    for r in range(world):
        cmd = ["/usr/bin/python3", EXAMPLE, datas[r], "--schema", SCHEMA, "--batch-size",
               str(BATCH), "--timeout", "60"] + args
        procs.append(subprocess.Popen(cmd, env=proc_env(r, world, r % local_world, local_world,
                                                        port),
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True))
    outs = []
    try:
        for r, p in enumerate(procs):
            out, _ = p.communicate(timeout=timeout)
            outs.append(out)
            if p.returncode != 0:
                t.fail("rank %d exited %d:\n%s" % (r, p.returncode, out[-3000:]))
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        t.fail("ddp.py did not finish in %d s (a rank hangs)" % timeout)
    return outs


def read_log(d, rank):
    """{epoch: [(step, mount_epoch, ids)]} of one rank's JSON lines."""
    out = collections.defaultdict(list)
    with open(os.path.join(d, "rank%d.jsonl" % rank)) as f:
        for line in f:
            j = json.loads(line)
            out[j["epoch"]].append((j["step"], j["mount_epoch"], j["ids"]))
    return out


def source_ids(path):
    """Every record's id in the source files, read by a one-rank feeder."""
    ids = []
    f = rollcache.Feeder(path, schema=SCHEMA, batch_size=64, world_size=1, framework="torch")
    for b in f:
        k = (b["x"][:, :2].double() * (1 << 24)).to(torch.int64)
        ids += (k[:, 0] * (1 << 24) + k[:, 1]).tolist()
    f.close()
    return ids


def catalog_epochs(cache):
    import sqlite3
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(cache, "catalog.db"), uri=True,
                         timeout=10)
    try:
        return [r[0] for r in db.execute("SELECT number FROM epochs ORDER BY number")]
    finally:
        db.close()


def check_epoch(logs, epoch, want_ids, what):
    """Equal steps; disjoint but for the padding; complete over want_ids."""
    steps = [len(lg[epoch]) for lg in logs]
    t.eq(len(set(steps)), 1, "%s epoch %d: steps per rank %s" % (what, epoch, steps))
    ids = [i for lg in logs for _, _, b in lg[epoch] for i in b]
    share = -(-len(want_ids) // len(logs))
    t.eq(len(ids), share * len(logs), "%s epoch %d: records over all ranks" % (what, epoch))
    t.eq(sorted(set(ids)), sorted(want_ids), "%s epoch %d: records read" % (what, epoch))
    t.eq(steps[0], -(-share // BATCH), "%s epoch %d: steps" % (what, epoch))


def one_mount(s):
    t.run("synth", s.src, "--records", RECORDS, "--shards", 6, "--schema", SCHEMA, "--seed", 7)
    want = source_ids(s.src)
    t.eq(len(set(want)), RECORDS, "distinct record ids in the source")
    t.run("ingest", "file://%s/" % s.src, "--cache-dir", s.cache, "--limit", "64M",
          "--shard-size", "8K")
    s.mount("file://%s/" % s.empty, "--limit", "64M", "--shard-size", "8K")
    m0 = s.stats()["epoch"]
    rows0 = catalog_epochs(s.cache)
    logs, state = os.path.join(s.root, "logA"), os.path.join(s.root, "state")
    # run A: epochs 0 and 1, a checkpoint after step 2 of epoch 1 (it goes on)
    launch(s, [s.mnt] * 2, 2, ["--epochs", "2", "--log", logs, "--state", state,
                               "--save-at", "1:2"])
    a = [read_log(logs, r) for r in range(2)]
    t.eq(s.stats()["epoch"], m0 + 1, "mount epoch after 2 training epochs")
    # run B: new processes resume from the checkpoint and finish epoch 2
    logs_b = os.path.join(s.root, "logB")
    launch(s, [s.mnt] * 2, 2, ["--epochs", "3", "--log", logs_b, "--state", state,
                               "--resume"])
    b = [read_log(logs_b, r) for r in range(2)]
    for r in range(2):
        t.eq([x[2] for x in b[r][1]], [x[2] for x in a[r][1][2:]],
             "rank %d: records after the resume point of epoch 1" % r)
        t.eq([x[0] for x in b[r][1]], [x[0] for x in a[r][1][2:]], "rank %d: steps resumed" % r)
    full = [dict(a[r]) for r in range(2)]
    for r in range(2):
        full[r][2] = b[r][2]
    for e in range(3):
        check_epoch(full, e, want, "one mount")
        for r in range(2):
            t.eq({x[1] for x in full[r][e]}, {m0 + e}, "rank %d epoch %d: mount epoch" % (r, e))
    t.eq(s.stats()["epoch"], m0 + 2, "mount epoch after 3 training epochs")
    t.eq(catalog_epochs(s.cache), rows0 + [m0 + 1, m0 + 2], "epochs in the catalog")
    s.umount()


def two_nodes(s):
    t.run("synth", s.src, "--records", RECORDS, "--shards", 12, "--schema", SCHEMA, "--seed", 8)
    want = source_ids(s.src)
    mnts, caches = [], []
    for node in range(2):
        mp, cache = os.path.join(s.root, "mnt%d" % node), os.path.join(s.root, "cache%d" % node)
        os.makedirs(mp)
        t.run("mount", "file://%s/" % s.src, mp, "--cache-dir", cache, "--limit", "64M",
              "--shard-size", "8K", "-o", "rank=%d,world_size=2" % node)
        s.mounts.append(mp)
        with open(os.path.join(mp, ".rollcache", "stats")) as f:
            s.pids.append(json.load(f)["pid"])
        mnts.append(mp)
        caches.append(cache)
    logs = os.path.join(s.root, "log")
    launch(s, [mnts[0], mnts[0], mnts[1], mnts[1]], 2, ["--epochs", "2", "--log", logs])
    lg = [read_log(logs, r) for r in range(4)]
    for e in range(2):
        steps = [len(x[e]) for x in lg]
        t.eq(len(set(steps)), 1, "epoch %d: steps of the 4 ranks %s" % (e, steps))
        if steps[0] == 0:
            t.fail("epoch %d: no steps" % e)
    node_ids = []
    for node in range(2):
        ranks = lg[2 * node:2 * node + 2]
        m = {x[1] for r in ranks for x in r[0]}
        t.eq(len(m), 1, "node %d: one mount epoch in training epoch 0" % node)
        m0 = m.pop()
        if m0 < 1:
            t.fail("node %d: training started on mount epoch %d, the empty first one" % (node, m0))
        for e in range(2):
            t.eq({x[1] for r in ranks for x in r[e]}, {m0 + e},
                 "node %d epoch %d: mount epoch" % (node, e))
        with open(os.path.join(mnts[node], ".rollcache", "stats")) as f:
            st = json.load(f)
        t.eq(st["epoch"], m0 + 1, "node %d: mount epoch after 2 training epochs" % node)
        t.eq(catalog_epochs(caches[node]), list(range(0, m0 + 2)),
             "node %d: epochs in the catalog (one advance per epoch)" % node)
        rows = {row["epoch"]: row for row in st["epochs"]}
        ids = [i for r in ranks for _, _, b in r[0] for i in b]
        # the node's own count of batches, from its first snapshot (which may
        # hold a record more than once: the samplers ran while `next wait`
        # waited); the node with more stops at the other's count
        share = -(-rows[m0]["resident_records"] // 2)
        own = -(-share // BATCH)
        took = len(ranks[0][0])
        if took == own:
            t.eq(len(ids), 2 * share, "node %d: records of epoch 0 (with the padding)" % node)
        elif took < own:
            t.eq(len(ids), 2 * took * BATCH, "node %d: records of a truncated epoch 0" % node)
        else:
            t.fail("node %d: %d steps, more than its %d batches" % (node, took, own))
        node_ids.append(set(ids))
    t.eq(node_ids[0] & node_ids[1], set(), "records of both nodes (disjoint objects)")
    if not (node_ids[0] | node_ids[1]) <= set(want):
        t.fail("records that are not in the source")
    for mp in mnts:
        s.umount(mp)


t.main(two_nodes if sys.argv[1:] == ["two-nodes"] else one_mount, "ddp")
