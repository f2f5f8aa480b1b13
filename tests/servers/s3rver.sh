#!/bin/bash
# s3rver.sh - a throwaway S3-compatible server (s3rver from npm, version
# pinned in tests/package.json + package-lock.json) for integration tests,
# behind sigv4_proxy.py, which checks every request's SigV4 signature with
# botocore (s3rver itself does not: see sigv4_proxy.py).
#
#   s3rver.sh start BUCKET STATE   starts s3rver with its filesystem backend in
#                                  STATE/data on an ephemeral 127.0.0.1 port,
#                                  creates BUCKET, starts the proxy in front of
#                                  it; prints the proxy's endpoint URL
#                                  (http://127.0.0.1:PORT) last.  s3rver's own
#                                  URL is in STATE/s3rver_url.
#   s3rver.sh stop STATE           stops both; prints the proxy's counts
#                                  ("sigv4-proxy: {verified, refused, ...}").
#
# Credentials the proxy accepts: $SIGV4_PROXY_ACCOUNTS (AK:SECRET[:TOKEN] ...),
# by default AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER.
# S3_PROXY=0 starts s3rver alone (no signature is checked then) and prints
# its URL.  Upload objects with tests/servers/s3put.py.  Exits 1 with one
# line on stderr when node, the npm package or python3-botocore is missing:
# scripts/deps.sh installs them, so a test that needs them fails.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

# missing WHAT FIX: a program the tests need is absent; one line, exit 1.
missing() {
  echo "$1: $2" >&2
  exit 1
}

start() {
  local bucket=$1 state=$2
  command -v node >/dev/null || missing "node is not installed" "run scripts/deps.sh (apt-get install nodejs npm)"
  [ -d "$here/../node_modules/s3rver" ] || missing "s3rver is not installed in tests/node_modules" "run scripts/deps.sh (npm ci in tests/)"
  mkdir -p "$state/data"
  state=$(cd "$state" && pwd)
  # s3rver makes continuation tokens with DES, which OpenSSL 3 keeps in its
  # legacy provider: without it every truncated listing answers 500.
  node --openssl-legacy-provider "$here/s3rver.js" "$state/data" "$bucket" > "$state/s3rver_url" 2> "$state/err" &
  echo $! > "$state/pid"
  local url=""
  for _ in $(seq 1 200); do
    if [ -s "$state/s3rver_url" ]; then
      url=$(tail -1 "$state/s3rver_url")
      break
    fi
    kill -0 "$(cat "$state/pid")" 2>/dev/null || { cat "$state/err" >&2; exit 1; }
    sleep 0.1
  done
  if [ -z "$url" ]; then
    echo "s3rver did not start within 20 s" >&2
    cat "$state/err" >&2
    kill "$(cat "$state/pid")" 2>/dev/null || true
    exit 1
  fi
  if [ "${S3_PROXY:-1}" = 0 ]; then
    echo "$url"
    return 0
  fi
  /usr/bin/python3 "$here/sigv4_proxy.py" "$url" "$state" > "$state/url" 2> "$state/proxy.err" &
  echo $! > "$state/proxy.pid"
  for _ in $(seq 1 100); do
    if [ -s "$state/url" ]; then
      tail -1 "$state/url"
      return 0
    fi
    if ! kill -0 "$(cat "$state/proxy.pid")" 2>/dev/null; then
      local rc=0
      wait "$(cat "$state/proxy.pid")" || rc=$?
      kill "$(cat "$state/pid")" 2>/dev/null || true
      # the proxy's one line (python3-botocore missing) or its traceback
      cat "$state/proxy.err" >&2
      exit 1
    fi
    sleep 0.1
  done
  echo "sigv4_proxy.py did not start within 10 s" >&2
  cat "$state/proxy.err" >&2
  kill "$(cat "$state/proxy.pid")" "$(cat "$state/pid")" 2>/dev/null || true
  exit 1
}

# Whether pid runs: a zombie has exited (our servers are orphans once this
# script is gone, and whoever reaps orphans may take seconds to do it).
running() {
  local st
  st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [ -n "$st" ] && [ "$st" != Z ]
}

stop_pid() {
  local pidfile=$1 pid
  [ -s "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 100); do
    running "$pid" || return 0
    sleep 0.05
  done
  kill -KILL "$pid" 2>/dev/null || true
}

stop() {
  local state=$1
  # what the proxy checked, for the test's log
  if [ -s "$state/url" ] && [ -s "$state/proxy.pid" ] && kill -0 "$(cat "$state/proxy.pid")" 2>/dev/null; then
    /usr/bin/python3 -c 'import sys, urllib.request; print("sigv4-proxy: " + urllib.request.urlopen(sys.argv[1] + "/__sigv4_proxy/stats", timeout=5).read().decode())' "$(tail -1 "$state/url")" || true
  fi
  stop_pid "$state/proxy.pid"
  stop_pid "$state/pid"
}

case "${1:-}" in
  start) [ $# -eq 3 ] || { echo "usage: $0 start BUCKET STATE" >&2; exit 2; }; start "$2" "$3" ;;
  stop) [ $# -eq 2 ] || { echo "usage: $0 stop STATE" >&2; exit 2; }; stop "$2" ;;
  *) echo "usage: $0 start BUCKET STATE | stop STATE" >&2; exit 2 ;;
esac
