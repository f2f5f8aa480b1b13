#!/bin/sh
# feeder_ab.sh N DATA BIN_A BIN_B [...] [-- bench options] - before/after
# comparison of `rollcache-bench feeder` binaries on a shared, noisy machine:
# N rounds, in each round every binary runs once, one after the other, on
# DATA (x:float32[1000],y:int64[1], batch 256, 1 warm-up + 2 measured
# epochs, plus the options after --).  Prints per binary the CPU-s per GB of
# every run (sorted), their median (the 6th of 12) and the median MB/s.
# Copy the binaries somewhere first (rollcache-bench links rollcache's
# libraries statically):
#   cp build-fperf/bench/rollcache-bench /tmp/rc-after
#   bench/feeder_ab.sh 12 /tmp/fdrb/dense /tmp/rc-before /tmp/rc-after -- --shuffle
set -eu
N=$1
DATA=$2
shift 2
BINS=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
	BINS="$BINS $1"
	shift
done
[ $# -gt 0 ] && shift
S='x:float32[1000],y:int64[1]'
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
i=0
while [ "$i" -lt "$N" ]; do
	k=0
	for b in $BINS; do
		"$b" feeder "$DATA" --schema "$S" --batch 256 --warmup 1 --epochs 2 "$@" |
			awk '/CPU-s per GB/{c=$4} /MB\/s \(record/{m=$4} END{print c, m}' >>"$TMP/$k"
		k=$((k + 1))
	done
	i=$((i + 1))
done
k=0
for b in $BINS; do
	sort -n "$TMP/$k" | awk -v b="$b" '{c[NR]=$1; s=s" "$1} END{printf "%s: CPU-s/GB median %s (runs:%s)\n", b, c[int((NR+1)/2)], s}'
	sort -k2 -n "$TMP/$k" | awk '{m[NR]=$2} END{printf "    MB/s median %s\n", m[int((NR+1)/2)]}'
	k=$((k + 1))
done
