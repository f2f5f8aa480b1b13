#!/bin/sh
# raw_rss.sh [BUILD] [WORK] [N] - issue 15: memory and times of a cache of N
# raw objects (format=raw, 64 bytes each, default N=100000; 1000 folders):
#   ingest     `rollcache ingest` of the tree: seconds and peak RSS (VmHWM)
#   mount      `rollcache mount -f` of that existing cache (reconciliation +
#              catalog load + first epoch view): seconds until `current`
#              exists; the daemon's VmHWM after `find` walked the whole view
#   epoch      `rollcache epoch MNT next --wait`: a new epoch view of N files
#   crash      the daemon killed with SIGKILL, then mounted again: seconds
#              until `current` exists (reconciliation after a crash)
# Prints one line per figure.  Nothing is asserted.  Needs /dev/fuse.
set -eu
BUILD=${1:-build}
WORK=${2:-/var/tmp/rollcache-raw-rss}
N=${3:-100000}
RC=$(cd "$BUILD" && pwd)/cli/rollcache
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
SRC=$WORK/src-$N
CACHE=$WORK/cache-$N
MNT=$WORK/mnt
echo "rollcache $("$RC" --version | cut -d' ' -f2), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ), N=$N"

if [ ! -f "$SRC.done" ]; then
	rm -rf "$SRC"
	/usr/bin/python3 - "$SRC" "$N" <<'EOF'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
rnd = os.urandom(64 + 4096)
for i in range(n):
    d = os.path.join(root, "n%08d" % (i % 1000))
    if i < 1000:
        os.makedirs(d, exist_ok=True)
    fd = os.open(os.path.join(d, "img_%08d.JPEG" % i), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, rnd[(i * 7919) % 4096:][:64])
    os.close(fd)
EOF
	touch "$SRC.done"
fi
now() { date +%s.%N; }
hwm() { awk '/VmHWM/ {print $2}' "/proc/$1/status"; }

if [ ! -f "$CACHE/.rss-ingested" ]; then
	rm -rf "$CACHE"
	/usr/bin/time -f "%e %M" -o "$WORK/time.out" "$RC" ingest "file://$SRC/" --cache-dir "$CACHE" \
		--limit 10G --format raw --quiet
	echo "ingest: $N objects in $(cut -d' ' -f1 "$WORK/time.out") s, peak RSS $(($(cut -d' ' -f2 "$WORK/time.out") / 1024)) MB"
	touch "$CACHE/.rss-ingested"
fi

mount_wait() { # sets MOUNT_S (seconds until MNT/current exists) and PID (the daemon)
	t0=$(now)
	"$RC" mount "file://$SRC/" "$MNT" --cache-dir "$CACHE" --limit 10G --format raw -f \
		>"$WORK/mount.log" 2>&1 &
	PID=$!
	i=0
	until [ -e "$MNT/current" ]; do
		i=$((i + 1))
		[ $i -lt 2400 ] || {
			echo "mount did not come up:" >&2
			cat "$WORK/mount.log" >&2
			exit 1
		}
		sleep 0.05
	done
	MOUNT_S=$(awk -v a="$(now)" -v b="$t0" 'BEGIN {printf "%.2f", a - b}')
}

mkdir -p "$MNT"
mount_wait
echo "mount of the existing cache: $MOUNT_S s to current/, daemon VmHWM $(($(hwm $PID) / 1024)) MB"
n=$(find "$MNT/current/" -type f | wc -l)
echo "view walked with find: $n files, daemon VmHWM $(($(hwm $PID) / 1024)) MB"
t0=$(now)
"$RC" epoch "$MNT" next --wait >/dev/null 2>"$WORK/epoch.err"
echo "epoch next --wait (a new view of $n files): $(awk -v a="$(now)" -v b="$t0" 'BEGIN {printf "%.2f", a - b}') s, daemon VmHWM $(($(hwm $PID) / 1024)) MB"
kill -9 "$PID"
wait "$PID" 2>/dev/null || true
fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null || true
mount_wait
echo "mount after kill -9 (reconciliation after a crash): $MOUNT_S s to current/, daemon VmHWM $(($(hwm $PID) / 1024)) MB"
"$RC" umount "$MNT"
wait "$PID" 2>/dev/null || true
