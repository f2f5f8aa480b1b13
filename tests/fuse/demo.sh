#!/usr/bin/env bash
# demo.sh RC WORK - rollcache's main job on a demo dataset, for
# scripts/quickstart.sh: mount WORK/remote (synthesized here if missing)
# with a small limit, run several epochs reading everything through the
# mount, print a per-epoch table, unmount.  The mount is always unmounted.
set -euo pipefail
RC=${1:?usage: demo.sh RC WORK}
WORK=${2:?usage: demo.sh RC WORK}
EPOCHS=${EPOCHS:-4}
PY=/usr/bin/python3

[ -e /dev/fuse ] || { echo "demo.sh: /dev/fuse is missing: cannot mount"; exit 77; }
if [ ! -d "$WORK/remote" ]; then
  "$RC" synth "$WORK/remote" --records 2000 --record-size 16K --shards 8 --seed 1 >/dev/null
fi
mkdir -p "$WORK/mnt"
cat > "$WORK/demo.ini" <<INI
[cache]
limit = 16M
min_records = 1000000
[sampler]
shard_size = 1M
[epoch 0-]
limit = 16M
admit = 6M
policy = fifo
INI
cleanup() { "$RC" umount "$WORK/mnt" >/dev/null 2>&1 || fusermount3 -u -z "$WORK/mnt" 2>/dev/null || true; }
trap cleanup EXIT

echo "== mount file://$WORK/remote/ on $WORK/mnt (limit 16 MiB, 6 MiB fresh data per epoch, fifo)"
"$RC" mount "file://$WORK/remote/" "$WORK/mnt" --cache-dir "$WORK/cache" --config "$WORK/demo.ini"
printf '%5s %6s %8s %10s %10s %10s %10s\n' epoch files records bytes admitted evicted "read MB/s"
for _ in $(seq 1 "$EPOCHS"); do
  "$RC" epoch "$WORK/mnt" next --wait >/dev/null 2>&1
  $PY - "$WORK/mnt" <<'PY'
import json, os, sys, time
mnt = sys.argv[1]
cur = os.path.join(mnt, "current")
t0, n = time.perf_counter(), 0
for name in sorted(os.listdir(cur)):
    with open(os.path.join(cur, name), "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            n += len(b)
dt = time.perf_counter() - t0
st = json.load(open(os.path.join(mnt, ".rollcache", "stats")))
rows = {r["epoch"]: r for r in st["epochs"]}
e = st["epoch"]
prev = rows.get(e - 1, {})
mib = lambda b: "%.1f MiB" % (b / 1048576)
print("%5d %6d %8d %10s %10s %10s %10.1f" % (
    e, st["current"]["files"], st["current"]["records"], mib(st["current"]["bytes"]),
    mib(prev.get("admitted_bytes", 0)), mib(rows.get(e, {}).get("evicted_bytes", 0)),
    n / 1e6 / dt if dt > 0 else 0))
PY
done
"$RC" status "$WORK/mnt"
echo "== unmount"
"$RC" umount "$WORK/mnt"
trap - EXIT
