#!/bin/sh
# raw_ingest.sh [BUILD] [WORK] [N_SMALL] [N_LARGE] [ROUNDS] - issue 15: raw
# objects (format=raw) ingested by `rollcache ingest file://...` against
# `cp -r SRC DST && sync` of the same tree, in one run:
#   small  N_SMALL objects of 2 KiB (default 100000), ImageNet-like keys
#          (1000 class folders, n00000000/img_00000000.JPEG)
#   large  N_LARGE objects of 128 KiB (default 4000)
# Each size: ROUNDS (default 3) pairs, cp first then ingest, each into a
# fresh directory on the same file system as WORK; the source tree is
# read once before, so both read it from the page cache.  Prints each
# round's seconds, the medians and ratio = cp_time / ingest_time (>= 1.0:
# ingest is at least as fast as cp -r && sync), and the ingest process's
# VmHWM (peak RSS) from GNU time.  With RC_BASE=/path/to/other/rollcache,
# each round also runs that binary's ingest (the "before" of a change, in
# the same rounds).  The daemon's RSS with many files in the view is
# bench/raw_rss.sh.  Nothing is asserted.
set -eu
BUILD=${1:-build}
WORK=${2:-/var/tmp/rollcache-raw-bench}
N_SMALL=${3:-100000}
N_LARGE=${4:-4000}
ROUNDS=${5:-3}
RC=$(cd "$BUILD" && pwd)/cli/rollcache
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
echo "rollcache $("$RC" --version | cut -d' ' -f2), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)"
echo "file system of $WORK: $(df -T "$WORK" | awk 'NR==2 {print $2}')"

make_tree() { # DIR N SIZE
	[ -f "$1.done" ] && return 0
	rm -rf "$1" "$1.done"
	/usr/bin/python3 - "$1" "$2" "$3" <<'EOF'
import os, sys
root, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rnd = os.urandom(size + 4096)
for i in range(n):
    d = os.path.join(root, "n%08d" % (i % 1000))
    if i < 1000:
        os.makedirs(d, exist_ok=True)
    off = (i * 7919) % 4096  # distinct bytes per object, no urandom per file
    with open(os.path.join(d, "img_%08d.JPEG" % i), "wb") as f:
        f.write(rnd[off:off + size])
EOF
	touch "$1.done"
}

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

secs() { # command... -> seconds on stdout (GNU time's %e), its output to $WORK/last.log
	/usr/bin/time -f "%e %M" -o "$WORK/time.out" "$@" >"$WORK/last.log" 2>&1 || {
		echo "failed: $*" >&2
		cat "$WORK/last.log" >&2
		exit 1
	}
	cut -d' ' -f1 "$WORK/time.out"
}

run_size() { # LABEL N SIZE
	SRC=$WORK/src-$1-$2
	make_tree "$SRC" "$2" "$3"
	find "$SRC" -type f -exec cat {} + >/dev/null # in the page cache for both
	total=$(du -sb "$SRC" | cut -f1)
	: >"$WORK/cp.s"
	: >"$WORK/rc.s"
	: >"$WORK/rc.kb"
	: >"$WORK/base.s"
	r=1
	while [ "$r" -le "$ROUNDS" ]; do
		rm -rf "$WORK/dst" "$WORK/cache"
		sync
		c=$(secs sh -c "cp -r '$SRC' '$WORK/dst' && sync")
		rm -rf "$WORK/dst"
		sync
		i=$(secs "$RC" ingest "file://$SRC/" --cache-dir "$WORK/cache" --limit $((total * 2)) \
			--format raw --quiet)
		kb=$(cut -d' ' -f2 "$WORK/time.out")
		n=$(find "$WORK/cache/objects" -type f | wc -l)
		[ "$n" -eq "$2" ] || {
			echo "ingest left $n objects, expected $2" >&2
			exit 1
		}
		b=
		if [ -n "${RC_BASE:-}" ]; then
			rm -rf "$WORK/cache"
			sync
			b=$(secs "$RC_BASE" ingest "file://$SRC/" --cache-dir "$WORK/cache" \
				--limit $((total * 2)) --format raw --quiet)
			echo "$b" >>"$WORK/base.s"
			b=", base ingest ${b} s"
		fi
		echo "$1 round $r: cp -r && sync ${c} s, rollcache ingest ${i} s (peak RSS ${kb} KiB)$b"
		echo "$c" >>"$WORK/cp.s"
		echo "$i" >>"$WORK/rc.s"
		echo "$kb" >>"$WORK/rc.kb"
		r=$((r + 1))
	done
	rm -rf "$WORK/cache"
	cm=$(median <"$WORK/cp.s")
	im=$(median <"$WORK/rc.s")
	km=$(median <"$WORK/rc.kb")
	awk -v l="$1" -v n="$2" -v c="$cm" -v i="$im" -v k="$km" 'BEGIN {
		printf "%s: %d objects: cp -r && sync %.2f s (%.0f/s), ingest %.2f s (%.0f/s), ratio %.2fx, ingest peak RSS %.0f MB\n",
			l, n, c, n / c, i, n / i, c / i, k / 1024 }'
	if [ -s "$WORK/base.s" ]; then
		bm=$(median <"$WORK/base.s")
		awk -v l="$1" -v n="$2" -v c="$cm" -v b="$bm" 'BEGIN {
			printf "%s: base (RC_BASE) ingest %.2f s (%.0f/s), ratio %.2fx\n", l, b, n / b, c / b }'
	fi
}

run_size small-2KiB "$N_SMALL" 2048
run_size large-128KiB "$N_LARGE" 131072
