#!/bin/sh
# feeder_run.sh BUILD DATA [dense|pc|all] - the feeder benchmarks of
# docs/bench-feeder.md in one run: the native feeder and its two peers on the
# same files, generated with BUILD/tests/feeder/fdr_gen under DATA.
#   dense: x:float32[1000], y:int64[1] (4 KB records, 64000 of them, 16 files)
#   pc:    the producer/consumer workload: x:float32[1000000,3], y:int64[1],
#          batch 4, consumer step 100 ms (200 records of 12 MB, 8 files)
set -eu
BUILD=$(cd "$1" && pwd)
DATA=$2
WHAT=${3:-all}
HERE=$(cd "$(dirname "$0")" && pwd)
RCB=$BUILD/bench/rollcache-bench
GEN=$BUILD/tests/feeder/fdr_gen
PY=/usr/bin/python3
mkdir -p "$DATA"

if [ "$WHAT" = dense ] || [ "$WHAT" = all ]; then
	S='x:float32[1000],y:int64[1]'
	D=$DATA/dense
	[ -d "$D" ] || { mkdir -p "$D" && "$GEN" "$D" "$S" 16 4000; }
	echo "== dense float32, batch 256"
	"$RCB" feeder "$D" --schema "$S" --batch 256 --warmup 1 --epochs 2
	"$RCB" feeder "$D" --schema "$S" --batch 256 --warmup 1 --epochs 2 --no-crc
	"$RCB" feeder "$D" --schema "$S" --batch 256 --warmup 1 --epochs 2 --shuffle
	"$PY" "$HERE/feeder_protobuf_numpy.py" "$D" --schema "$S" --batch 256 --warmup 0 --max-batches 20
	"$PY" "$HERE/feeder_torch_dataloader.py" "$D" --schema "$S" --batch 256 --workers 2 --max-batches 30
fi
if [ "$WHAT" = pc ] || [ "$WHAT" = all ]; then
	S='x:float32[1000000,3],y:int64[1]'
	D=$DATA/pc
	[ -d "$D" ] || { mkdir -p "$D" && "$GEN" "$D" "$S" 8 25; }
	echo "== producer/consumer: batch 4 x float32[1000000,3] + int64[1], step 100 ms"
	"$RCB" feeder "$D" --schema "$S" --batch 4 --warmup 1 --epochs 1 --step-ms 100
	"$RCB" feeder "$D" --schema "$S" --batch 4 --warmup 1 --epochs 1
	"$PY" "$HERE/feeder_protobuf_numpy.py" "$D" --schema "$S" --batch 4 --max-batches 3 --step-ms 100
	"$PY" "$HERE/feeder_torch_dataloader.py" "$D" --schema "$S" --batch 4 --workers 2 --max-batches 6 --step-ms 100
fi
