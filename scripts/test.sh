#!/usr/bin/env bash
# Installs what is missing, checks the format of every C file
# (clang-format, counted as one test), builds, and runs every test: the
# default suite in build/, then the unit and integration suites under
# ASan+UBSan in build-asan/.  Prints Check's summary line of each suite,
# every skipped test with the reason it gave, and one closing line
# "N passed, N failed, N skipped".
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
  # 3 at once on 2 cores: most integration tests wait on servers, mounts and
  # epochs rather than compute (the default suite: 3m28s with 3, 4m20s with 2)
  meson test -C "$dir" --print-errorlogs --num-processes 3 "$@" || rc=$?
  # Check's own summary lines ("100%: Checks: 12, Failures: 0, Errors: 0").
  grep -h -E '^[0-9]+%: Checks: ' "$dir/meson-logs/testlog"*.txt 2>/dev/null | sed "s|^|$dir: |" || true
  local counts
  counts=$(/usr/bin/python3 - "$dir/meson-logs" <<'PY'
import json, glob, os, sys
p = f = s = 0
logs = sorted(glob.glob(os.path.join(sys.argv[1], 'testlog*.json')), key=os.path.getmtime)
for line in open(logs[-1]) if logs else []:
    t = json.loads(line)
    r = t.get('result')
    if r in ('OK', 'EXPECTEDFAIL'): p += 1
    elif r == 'SKIP':
        s += 1
        # every skip with its reason: the line where the test says why
        out = [l.strip() for l in ((t.get('stdout') or '') + '\n' +
               (t.get('stderr') or '')).splitlines() if l.strip()]
        why = [l for l in out if 'skip' in l.lower()] or out or ['(the test printed no reason)']
        print('skipped: %s: %s' % (t.get('name'), why[-1][:200]), file=sys.stderr)
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
# (many files per clang-format process; it names each file that differs)
unformatted=$( (git ls-files -z '*.c' '*.h' 2>/dev/null |
  xargs -0 -n 60 -P 2 clang-format --dry-run --Werror 2>&1 || true) |
  { grep 'clang-format-violations' || true; } | cut -d: -f1 | sort -u)
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
run_suite build-asan --setup=asan --no-suite not-asan || status=1

# libFuzzer targets (clang only): each runs 2 s on its committed seeds plus
# its corpus in build-fuzz (tests/*/meson.build, suite 'fuzz'); only the
# targets and what they link are built.  A crash is one failed test.
if command -v clang >/dev/null 2>&1; then
  CC=clang configure build-fuzz -Dfuzz=true -Db_lundef=false
  fuzz_tests=$(meson introspect --tests build-fuzz | /usr/bin/python3 -c '
import json, sys
for t in json.load(sys.stdin):
    if any(s.split(":")[-1] == "fuzz" for s in t["suite"]):
        print(t["name"], t["cmd"][0], *[a for a in t["cmd"][1:] if not a.startswith("-max_total_time=")])
')
  if [ -n "$fuzz_tests" ]; then
    meson compile -C build-fuzz $(echo "$fuzz_tests" | awk '{print $2}' | sed "s|^$PWD/build-fuzz/||")
    while read -r name exe args; do
      # shellcheck disable=SC2086
      if "$exe" -max_total_time=2 $args >"build-fuzz/$name.log" 2>&1; then
        echo "fuzz: $name: $(grep -o 'stat::number_of_executed_units: [0-9]*' "build-fuzz/$name.log" | awk '{print $2}') executions in 2 s, no crash"
        passed=$((passed + 1))
      else
        echo "fuzz: $name: FAILED (build-fuzz/$name.log; the input is build-fuzz/.../$name-crash-*)"
        tail -20 "build-fuzz/$name.log"
        failed=$((failed + 1))
        status=1
      fi
    done <<<"$fuzz_tests"
  fi
else
  echo "fuzz: clang is not installed: the libFuzzer targets were not run"
fi

echo "$passed passed, $failed failed, $skipped skipped"
exit $status
