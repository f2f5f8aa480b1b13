#!/bin/sh
# raw_ingest.sh [BUILD] [WORK] [N_SMALL] [N_LARGE] [ROUNDS] [FOLDERS] -
# issue 15: raw objects (format=raw) ingested by `rollcache ingest
# file://...` against `cp -r SRC DST && sync` of the same tree, in one run:
#   small  N_SMALL objects of 2 KiB (default 100000)
#   large  N_LARGE objects of 128 KiB (default 4000; 0 leaves it out)
# in FOLDERS class folders (default 1000), ImageNet-like keys
# (n00000000/img_00000000.JPEG).
#
# Method.  Each size runs ROUNDS (default 3) rounds of cp and ingest; the
# one that goes first alternates from round to round (with RC_BASE, the
# three rotate).  Each command writes into a fresh directory on the file
# system of WORK and starts after a `sync`, with nothing of this script
# pending: the script deletes nothing it wrote.  Every output stays in
# WORK/out-TIME until you delete it, at a time when no measurement follows:
# on a host-cached virtio disk with online discard (ext4 -o discard, no
# journal), deleting 10^5 files slowed the writes of the next minutes by up
# to 5x after `sync` had returned (ext4 without a journal skips inodes
# freed in the last minutes when it allocates one), so a deletion between
# or just before rounds would slow whichever command came next.  The source trees
# (WORK/src-*) are kept for the next run.  The source tree is read once
# before the rounds, so every command reads it from the page cache.
#
# Prints each round (seconds, its ratio, the load average), the medians,
# ratio = median cp time / median ingest time (>= 1.0: ingest is at least
# as fast as cp -r && sync), and the ingest's peak RSS (GNU time's %M).
# With RC_BASE=/path/to/other/rollcache, each round also runs that
# binary's ingest (the "before" of a change, in the same rounds).  The
# daemon's RSS with many files in the view is bench/raw_rss.sh.  Nothing
# is asserted.
set -eu
BUILD=${1:-build}
WORK=${2:-/var/tmp/rollcache-raw-bench}
N_SMALL=${3:-100000}
N_LARGE=${4:-4000}
ROUNDS=${5:-3}
FOLDERS=${6:-1000}
RC=$(cd "$BUILD" && pwd)/cli/rollcache
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
OUT=$WORK/out-$(date -u +%Y%m%dT%H%M%S)
echo "rollcache $("$RC" --version | cut -d' ' -f2), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)"
echo "file system of $WORK: $(df -T "$WORK" | awk 'NR==2 {print $2}'), $FOLDERS folders, $ROUNDS rounds"

mkdir "$OUT"

make_tree() { # DIR N SIZE
	[ -f "$1.done" ] && return 0
	rm -rf "$1" "$1.done"
	/usr/bin/python3 - "$1" "$2" "$3" "$FOLDERS" <<'EOF'
import os, sys
root, n, size, folders = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rnd = os.urandom(size + 4096)
for i in range(n):
    d = os.path.join(root, "n%08d" % (i % folders))
    if i < folders:
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

# run_one WHO LABEL N ROUND: one timed command into a fresh directory after
# a sync; appends its seconds to $WORK/WHO.s (and the ingest's peak RSS in
# KiB to $WORK/rc.kb).
run_one() {
	dst=$OUT/$2-$1-$4
	sync
	case $1 in
	cp)
		t=$(secs sh -c "cp -r '$SRC' '$dst' && sync")
		;;
	rc | base)
		bin=$RC
		[ "$1" = base ] && bin=$RC_BASE
		t=$(secs "$bin" ingest "file://$SRC/" --cache-dir "$dst" --limit $((total * 2)) \
			--format raw --quiet)
		[ "$1" = rc ] && cut -d' ' -f2 "$WORK/time.out" >>"$WORK/rc.kb"
		n=$(find "$dst/objects" -type f | wc -l)
		[ "$n" -eq "$3" ] || {
			echo "$1 ingest left $n objects, expected $3" >&2
			exit 1
		}
		;;
	esac
	echo "$t" >>"$WORK/$1.s"
}

run_size() { # LABEL N SIZE
	label=$1
	nobj=$2
	[ "$nobj" -gt 0 ] || return 0
	SRC=$WORK/src-$label-$nobj-$FOLDERS
	make_tree "$SRC" "$nobj" "$3"
	find "$SRC" -type f -exec cat {} + >/dev/null # in the page cache for all
	total=$(du -sb "$SRC" | cut -f1)
	who="cp rc"
	[ -n "${RC_BASE:-}" ] && who="cp rc base"
	for w in cp rc base; do : >"$WORK/$w.s"; done
	: >"$WORK/rc.kb"
	r=1
	while [ "$r" -le "$ROUNDS" ]; do
		# round r starts with contender (r - 1) mod k of $who
		order=$(echo "$who" | awk -v s=$((r - 1)) '{
			for (j = 0; j < NF; j++) printf "%s%s", j ? " " : "", $((j + s) % NF + 1); print "" }')
		load=$(cut -d' ' -f1 /proc/loadavg)
		for w in $order; do
			run_one "$w" "$label" "$nobj" "$r"
		done
		c=$(tail -n 1 "$WORK/cp.s")
		i=$(tail -n 1 "$WORK/rc.s")
		kb=$(tail -n 1 "$WORK/rc.kb")
		b=
		[ -s "$WORK/base.s" ] && b=", base ingest $(tail -n 1 "$WORK/base.s") s"
		awk -v l="$label" -v r="$r" -v o="$order" -v c="$c" -v i="$i" -v kb="$kb" -v b="$b" \
			-v ld="$load" 'BEGIN {
			printf "%s round %d (%s, load %s): cp -r && sync %s s, rollcache ingest %s s, ratio %.2fx (peak RSS %s KiB)%s\n",
				l, r, o, ld, c, i, c / i, kb, b }'
		r=$((r + 1))
	done
	cm=$(median <"$WORK/cp.s")
	im=$(median <"$WORK/rc.s")
	km=$(median <"$WORK/rc.kb")
	awk -v l="$label" -v n="$nobj" -v c="$cm" -v i="$im" -v k="$km" 'BEGIN {
		printf "%s: %d objects: cp -r && sync %.2f s (%.0f/s), ingest %.2f s (%.0f/s), ratio %.2fx, ingest peak RSS %.0f MB\n",
			l, n, c, n / c, i, n / i, c / i, k / 1024 }'
	if [ -s "$WORK/base.s" ]; then
		bm=$(median <"$WORK/base.s")
		awk -v l="$label" -v n="$nobj" -v c="$cm" -v b="$bm" 'BEGIN {
			printf "%s: base (RC_BASE) ingest %.2f s (%.0f/s), ratio %.2fx\n", l, b, n / b, c / b }'
	fi
}

run_size small-2KiB "$N_SMALL" 2048
run_size large-128KiB "$N_LARGE" 131072
echo "load after the rounds: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "outputs left in $OUT ($(du -sh "$OUT" | cut -f1)): delete them when no measurement follows"
