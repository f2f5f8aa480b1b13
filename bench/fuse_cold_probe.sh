#!/bin/bash
# fuse_cold_probe.sh [BUILD] [WORK] [REPS] [-o OPTS] - the first pass of
# files through a fresh mount, cold, against direct reads of the same files,
# REPS times (default 5), alternating: one line per run.  This is the
# "seq 1M, cold, first pass" row of `rollcache-bench fuse` without the
# median, to see the spread on a noisy disk (docs/benchmarks.md).
#   bench/fuse_cold_probe.sh build /var/tmp/rcb-probe 15
#   bench/fuse_cold_probe.sh build /var/tmp/rcb-probe 5 -o readahead_kb=16384
# Makes its bench cache once with `rollcache-bench fuse --keep` (4 x 63 MiB).
set -eu
BUILD=${1:-build}
WORK=${2:-/var/tmp/rollcache-fuse-probe}
REPS=${3:-5}
OPTS=no_splice_read
if [ "${4:-}" = "-o" ] && [ -n "${5:-}" ]; then OPTS="$OPTS,$5"; fi
RC=$(cd "$BUILD" && pwd)/cli/rollcache
RCB=$(cd "$BUILD" && pwd)/bench/rollcache-bench
if [ ! -d "$WORK/cache/shards" ]; then
	"$RCB" fuse --modes pread --reps 1 --ops 10 --keep --dir "$WORK" > /dev/null
fi
drop() {
	/usr/bin/python3 -c '
import os, sys
for p in sys.argv[1:]:
    fd = os.open(p, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)' "$@"
}
# MB/s of reading FILES... in 1 MiB reads (dd), one after the other
rate() {
	local bytes=0 t0 t1 f
	for f in "$@"; do bytes=$((bytes + $(stat -c %s "$f"))); done
	t0=$(date +%s%N)
	for f in "$@"; do dd if="$f" of=/dev/null bs=1M status=none; done
	t1=$(date +%s%N)
	echo $((bytes * 1000 / (t1 - t0)))
}
for r in $(seq "$REPS"); do
	drop "$WORK"/cache/shards/*.tfrecord
	d=$(rate "$WORK"/cache/shards/*.tfrecord)
	"$RC" mount "file://$WORK/empty/" "$WORK/mnt" --cache-dir "$WORK/cache" --limit 1G -o "$OPTS"
	drop "$WORK"/cache/shards/*.tfrecord "$WORK"/mnt/current/*.tfrecord
	m=$(rate "$WORK"/mnt/current/*.tfrecord)
	"$RC" umount "$WORK/mnt"
	echo "run $r: mount $m MB/s, direct $d MB/s, ratio $(awk "BEGIN { printf \"%.2f\", $m / $d }")"
done
