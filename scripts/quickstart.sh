#!/usr/bin/env bash
# Installs what is missing, builds, and runs rollcache's main job on a
# built-in demo dataset: a synthetic "remote" TFRecord dataset twice the
# size of the cache, mounted through FUSE with a rolling cache, read for
# several epochs the way a training job would, then a per-epoch table, and
# the native feeder reading the current epoch into batches.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD

scripts/deps.sh
if [ -f build/build.ninja ]; then meson setup --reconfigure build >/dev/null; else meson setup build >/dev/null; fi
meson compile -C build >/dev/null
RC=$top/build/cli/rollcache
PY=/usr/bin/python3

work=$(mktemp -d /tmp/rollcache-demo.XXXXXX)
mnt=$work/mnt
mkdir -p "$mnt"
cleanup() { "$RC" umount "$mnt" >/dev/null 2>&1 || true; }
trap cleanup EXIT

echo "== rollcache $("$RC" --version | cut -d' ' -f2): demo in $work"

echo "== 1. a demo 'remote' dataset: 4000 tf.train.Example records of 16 KiB in 16 TFRecord files (64 MiB)"
"$RC" synth "$work/remote" --records 4000 --record-size 16K --shards 16 \
	--schema 'x:float32[4000],y:int64[1]' --seed 1
"$RC" check -q "$work/remote"

cat >"$work/demo.ini" <<INI
; The cache holds at most 24 MiB of the 64 MiB dataset.  Epochs 0-1 keep a
; small rolling window (fifo), later epochs grow to the full limit.
[cache]
limit = 24M
min_records = 300
[sampler]
shard_size = 1M
connections = 4
[epoch 0-1]
limit = 12M
admit = 6M
policy = fifo
[epoch 2-]
limit = 24M
admit = 8M
policy = fifo
INI
echo "== 2. mount it: rollcache mount file://$work/remote/ $mnt --config demo.ini (limit 24 MiB, 12 MiB for epochs 0-1)"
"$RC" mount "file://$work/remote/" "$mnt" --config "$work/demo.ini" --cache-dir "$work/cache"

echo "== 3. six epochs: 'rollcache epoch MNT next --wait', then read every file of MNT/current with open()"
for e in 1 2 3 4 5 6; do
	"$RC" epoch "$mnt" next --wait >/dev/null 2>&1
	$PY - "$mnt" "$work/epoch-$e.json" <<'PY'
import json, os, sys, time
mnt, out = sys.argv[1], sys.argv[2]
cur = os.path.join(mnt, "current")
t0, n = time.monotonic(), 0
for name in sorted(os.listdir(cur)):
    with open(os.path.join(cur, name), "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            n += len(b)
dt = time.monotonic() - t0
st = json.load(open(os.path.join(mnt, ".rollcache", "stats")))
json.dump({"stats": st, "read_bytes": n, "read_s": dt}, open(out, "w"))
print(f"epoch {st['epoch']}: read {st['current']['files']} files, {n / (1 << 20):.1f} MiB through open()")
PY
	"$RC" check -q "$mnt/current"   # framing and CRCs, through the mount
done

echo "== 4. what happened, per epoch (from $mnt/.rollcache/stats after each epoch's read)"
$PY - "$work" <<'PY'
import json, sys, os
work = sys.argv[1]
# One table: each row's view, disk and read rate come from the stats taken
# after that epoch was read; admitted/evicted come from the last stats, where
# the counters of every earlier epoch are complete.
final = json.load(open(os.path.join(work, "epoch-6.json")))["stats"]
counters = {x["epoch"]: x for x in final["epochs"]}
print(f"{'epoch':>5} {'files':>5} {'records':>7} {'MiB':>6} {'evicted':>8} {'admitted':>9} {'disk MiB':>8} {'read MB/s':>9}  policy")
for e in range(1, 7):
    d = json.load(open(os.path.join(work, f"epoch-{e}.json")))
    st = d["stats"]
    cur, c = st["current"], counters.get(st["epoch"], {})
    mb = lambda b: b / (1 << 20)
    rate = d["read_bytes"] / d["read_s"] / 1e6 if d["read_s"] > 0 else 0.0
    print(f"{st['epoch']:>5} {cur['files']:>5} {cur['records']:>7} {mb(cur['bytes']):>6.1f} "
          f"{mb(c.get('evicted_bytes', 0)):>7.1f}M {mb(c.get('admitted_bytes', 0)):>8.1f}M "
          f"{mb(st['disk']['used']):>8.1f} {rate:>9.0f}  {st['schedule']['entry']}")
print("files/records/MiB: the epoch's view (what the reader saw); evicted: bytes that left")
print("the cache at the boundary that began the epoch; admitted: fresh bytes fetched during")
print("it, which the next epoch's view shows (the last epoch's figure is still growing).")
print("disk stays within the limit of the schedule entry in force (invariant 4).")
v = st["view"]
if v.get("passthrough"):
    print(f"reads: {v['passthrough_opens']} opens were passed through to the kernel (FUSE "
          "passthrough: files the daemon had served once are read from the local disk directly)")
else:
    print("reads: every read was served by the daemon (FUSE passthrough needs Linux >= 6.9 and root)")
PY

echo "== 5. the native feeder (librollcache, host mode here) reads the current epoch through the mount"
PYTHONPATH="$top/python" RC_LIBDIR="$top/build" $PY - "$mnt" <<'PY'
import os, sys, time
import numpy as np
import rollcache
feeder = rollcache.Feeder(os.path.join(sys.argv[1], "current"), schema="x:float32[4000],y:int64[1]",
                          batch_size=64, device="cpu", shuffle=True, seed=0, framework="numpy")
t0, records = time.monotonic(), 0
for batch in feeder:                      # numpy arrays via DLPack; Python never parses a record
    records += batch["x"].shape[0]
    assert batch["x"].dtype == np.float32 and batch["x"].shape[1:] == (4000,)
dt = time.monotonic() - t0
st = feeder.stats()
feeder.close()
print(f"feeder: {records} records in {st['batches']} shuffled batches of x:float32[64,4000] + y:int64[64,1], "
      f"{st['record_bytes'] / dt / 1e6:.0f} MB/s, mean consumer wait {st['wait_ns'] / max(st['batches'], 1) / 1e6:.2f} ms/batch")
PY

echo "== 6. unmount"
"$RC" umount "$mnt"
trap - EXIT
echo "== done: the cache in $work/cache survives; 'rollcache mount' on it again serves it at once"
