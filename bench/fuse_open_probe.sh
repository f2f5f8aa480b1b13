#!/bin/bash
# fuse_open_probe.sh [BUILD] [WORK] - what one open+close costs through the
# mount (through current/, after the file was read once) with passthrough,
# with -o no_passthrough, and directly on the backing file: median of 5
# loops of 4000 open+close each (docs/bench-fuse.md, "per open").
#   bench/fuse_open_probe.sh build /var/tmp/rcb-probe
# Makes its bench cache once with `rollcache-bench fuse --keep` (4 x 63 MiB).
set -eu
BUILD=${1:-build}
WORK=${2:-/var/tmp/rollcache-fuse-probe}
RC=$(cd "$BUILD" && pwd)/cli/rollcache
RCB=$(cd "$BUILD" && pwd)/bench/rollcache-bench
if [ ! -d "$WORK/cache/shards" ]; then
	"$RCB" fuse --modes pread --reps 1 --ops 10 --keep --dir "$WORK" > /dev/null
fi
probe() { # PATH LABEL
	/usr/bin/python3 - "$1" "$2" <<'PY'
import os, sys, time
path, label, n, ts = sys.argv[1], sys.argv[2], 4000, []
for _ in range(5):
    t0 = time.perf_counter()
    for _ in range(n):
        os.close(os.open(path, os.O_RDONLY))
    ts.append((time.perf_counter() - t0) / n * 1e6)
ts.sort()
print("%-15s median %.1f us per open+close (%s)" % (label, ts[2], " ".join("%.0f" % t for t in ts)))
PY
}
for mode in passthrough no_passthrough; do
	"$RC" mount "file://$WORK/empty/" "$WORK/mnt" --cache-dir "$WORK/cache" --limit 1G -o "$mode"
	f=$(ls "$WORK/mnt/current" | head -n 1)
	cat "$WORK/mnt/current/$f" > /dev/null # the first pass: the daemon serves it
	sleep 0.3
	probe "$WORK/mnt/current/$f" "$mode"
	"$RC" umount "$WORK/mnt"
done
probe "$(ls -d "$WORK"/cache/shards/*.tfrecord | head -n 1)" direct
