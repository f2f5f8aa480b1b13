#!/bin/sh
# run_all.sh [BUILD] [WORK] [PART...] - every figure of docs/benchmarks.md in
# one run (or only the PARTs named: catalog fuse sampler feeder),
# each rollcache figure next to its peer measured in the same run:
#   catalog  sample-row inserts and reconciliation (targets, no peer)
#   fuse     reads through the mount vs direct reads of the same files
#   sampler  ingest from nginx on loopback vs curl --parallel, same objects
#   feeder   native feeder vs python3-protobuf+numpy and a PyTorch DataLoader
# The measuring program is `rollcache-bench KIND` (bench/rollcache_bench/); the
# peers are bench/feeder_*.py and curl.  Prints to stdout; nothing asserted.
set -eu
BUILD=${1:-build}
WORK=${2:-/var/tmp/rollcache-bench}
[ $# -gt 2 ] && shift 2 || set -- catalog fuse sampler feeder
want() { case " $* " in *" $PART "*) return 0 ;; esac; return 1; }
HERE=$(cd "$(dirname "$0")" && pwd)
TOP=$(dirname "$HERE")
RC=$(cd "$BUILD" && pwd)/cli/rollcache
RCB=$(cd "$BUILD" && pwd)/bench/rollcache-bench
mkdir -p "$WORK"
echo "rollcache $("$RC" --version | cut -d' ' -f2), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)"

for PART in catalog fuse sampler feeder; do
want "$@" || continue
case $PART in
catalog)
echo "== catalog"
"$RCB" catalog --dir "$WORK/catalog"
rm -rf "$WORK/catalog"
;;
fuse)
echo "== fuse"
"$RCB" fuse --dir "$WORK/fuse"
rm -rf "$WORK/fuse"
;;
sampler)
echo "== sampler: 781 MiB of 100 KiB tf.Example records served by nginx on 127.0.0.1"
mkdir -p "$WORK/www"
[ -d "$WORK/www/syn800" ] ||
	"$RC" synth "$WORK/www/syn800" --records 8000 --record-size 100K --shards 64 --seed 7
url=$("$TOP/tests/servers/nginx.sh" start "$WORK/www" "$WORK/nginx" | tail -n 1)
trap '"$TOP/tests/servers/nginx.sh" stop "$WORK/nginx" >/dev/null 2>&1 || true' EXIT
for dir in /dev/shm "$WORK"; do
	echo "-- cache dir on $(df --output=fstype "$dir" | tail -n 1): $dir"
	"$RCB" sampler "${url}syn800/" --connections 8 --rounds 3 --cache-dir "$dir"
done
"$TOP/tests/servers/nginx.sh" stop "$WORK/nginx" >/dev/null
trap - EXIT
;;
feeder)
echo "== feeder"
"$HERE/feeder_run.sh" "$BUILD" "$WORK/feeder" all
;;
esac
done
