#!/bin/bash
# bench/feeder_gpu.sh BUILD [DATA_DIR] - the feeder's device checks on a GPU
# machine: the device tests (C and Python) and the host-to-device bench,
# whose "h2d feeder / peak" row puts the feeder's copies (timed by CUDA
# events) next to a plain pinned cudaMemcpy of one batch in the same process.
#
# BUILD needs no FUSE, libcurl or SQLite:
#   meson setup BUILD -Dcatalog=disabled -Dfuse=disabled -Dcurl=disabled \
#       -Dsystemd=disabled -Dcuda=enabled -Dbuildtype=release
# libcudart is dlopened: set ROLLCACHE_CUDART where it is not found by name.
# Data: 8 files x 256 records of one 224x224x3 float32 image (602 KB), 1.23 GB.
set -u
B=$(cd "${1:?usage: bench/feeder_gpu.sh BUILD [DATA_DIR]}" && pwd)
D=${2:-/tmp/rc-feeder-gpu-bench}
SRC=$(cd "$(dirname "$0")/.." && pwd)
export RC_LIBDIR=$B RC_SRCDIR=$SRC
if [ -z "${ROLLCACHE_CUDART:-}" ] && [ -e /usr/local/cuda/lib64/libcudart.so ]; then
	export ROLLCACHE_CUDART=/usr/local/cuda/lib64/libcudart.so
fi
nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current \
	--format=csv,noheader || { echo "bench/feeder_gpu.sh: no GPU (nvidia-smi failed)"; exit 77; }
rc=0
echo "== feeder-gpu (C)"
"$B/tests/feeder/test_feeder_gpu" || rc=1
echo "== feeder-python-gpu"
python3 "$SRC/tests/python/test_feeder.py" "$B/tests/feeder/fdr_gen" --gpu || rc=1
S='x:float32[224,224,3],y:int64'
mkdir -p "$D"
[ -e "$D/part-00007.tfrecord" ] || "$B/tests/feeder/fdr_gen" "$D" "$S" 8 256 >/dev/null || exit 1
for args in "--threads 4 --readers 2 --device 0" "--threads 8 --readers 2 --device 0" \
	"--threads 8 --readers 2" "--threads 8 --readers 2 --device 0 --no-crc"; do
	echo "== bench feeder $args"
	# shellcheck disable=SC2086
	"$B/bench/rollcache-bench" feeder "$D" --schema "$S" --batch 64 --epochs 3 --warmup 1 $args || rc=1
done
exit $rc
