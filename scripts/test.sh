#!/usr/bin/env bash
# Installs what is missing, checks the format of every C file
# (clang-format, counted as one test), builds, and runs every test: the
# default suite in build/, then the unit and integration suites under
# ASan+UBSan in build-asan/.  Prints Check's summary line of each suite and one closing
# line "N passed, N failed, N skipped".
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/deps.sh

configure() { # dir, options...
  local dir=$1; shift
  if [ -f "$dir/build.ninja" ]; then
    meson setup --reconfigure "$dir" "$@" >/dev/null
  else
    meson setup "$dir" "$@" >/dev/null
  fi
}

passed=0 failed=0 skipped=0
run_suite() { # dir, meson test args...
  local dir=$1; shift
  local rc=0
  meson test -C "$dir" --print-errorlogs --num-processes 2 "$@" || rc=$?
  # Check's own summary lines ("100%: Checks: 12, Failures: 0, Errors: 0").
  grep -h -E '^[0-9]+%: Checks: ' "$dir/meson-logs/testlog"*.txt 2>/dev/null | sed "s|^|$dir: |" || true
  local counts
  counts=$(/usr/bin/python3 - "$dir/meson-logs" <<'PY'
import json, glob, os, sys
p = f = s = 0
logs = sorted(glob.glob(os.path.join(sys.argv[1], 'testlog*.json')), key=os.path.getmtime)
for line in open(logs[-1]) if logs else []:
    r = json.loads(line).get('result')
    if r in ('OK', 'EXPECTEDFAIL'): p += 1
    elif r == 'SKIP': s += 1
    else: f += 1
print(p, f, s)
PY
)
  read -r p f s <<<"$counts"
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
  return $rc
}

status=0

# .clang-format is the law of the tree: every tracked C file must pass it.
unformatted=$(git ls-files '*.c' '*.h' 2>/dev/null | while read -r f; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || echo "$f"
done)
if [ -n "$unformatted" ]; then
  echo "clang-format: these files differ from .clang-format (run clang-format -i on them):"
  echo "$unformatted" | sed 's/^/  /'
  failed=$((failed + 1))
  status=1
else
  echo "clang-format: $(git ls-files '*.c' '*.h' | wc -l) C files clean"
  passed=$((passed + 1))
fi

configure build
meson compile -C build
run_suite build || status=1

configure build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug
meson compile -C build-asan
run_suite build-asan --setup=asan || status=1

echo "$passed passed, $failed failed, $skipped skipped"
exit $status
