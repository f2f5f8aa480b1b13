#!/bin/bash
# s3rver.sh - a throwaway S3-compatible server (s3rver from npm, version
# pinned in tests/package.json + package-lock.json) for integration tests.
#
#   s3rver.sh start BUCKET STATE   starts s3rver with its filesystem backend in
#                                  STATE/data on an ephemeral 127.0.0.1 port,
#                                  creates BUCKET; prints the endpoint URL
#                                  (http://127.0.0.1:PORT) last.
#   s3rver.sh stop STATE           stops it.
#
# Credentials s3rver accepts: AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER.
# Upload objects with tests/servers/s3put.py.  Exit 77 when node or the npm
# package is missing (run scripts/deps.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

start() {
  local bucket=$1 state=$2
  command -v node >/dev/null || { echo "node is not installed (apt-get install nodejs)"; exit 77; }
  [ -d "$here/../node_modules/s3rver" ] || { echo "s3rver is not installed: run scripts/deps.sh (npm ci in tests/)"; exit 77; }
  mkdir -p "$state/data"
  state=$(cd "$state" && pwd)
  # s3rver makes continuation tokens with DES, which OpenSSL 3 keeps in its
  # legacy provider: without it every truncated listing answers 500.
  node --openssl-legacy-provider "$here/s3rver.js" "$state/data" "$bucket" > "$state/url" 2> "$state/err" &
  echo $! > "$state/pid"
  for _ in $(seq 1 200); do
    if [ -s "$state/url" ]; then
      tail -1 "$state/url"
      return 0
    fi
    kill -0 "$(cat "$state/pid")" 2>/dev/null || { cat "$state/err" >&2; exit 1; }
    sleep 0.1
  done
  echo "s3rver did not start within 20 s" >&2
  cat "$state/err" >&2
  kill "$(cat "$state/pid")" 2>/dev/null || true
  exit 1
}

stop() {
  local state=$1 pid
  [ -s "$state/pid" ] || return 0
  pid=$(cat "$state/pid")
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
}

case "${1:-}" in
  start) [ $# -eq 3 ] || { echo "usage: $0 start BUCKET STATE" >&2; exit 2; }; start "$2" "$3" ;;
  stop) [ $# -eq 2 ] || { echo "usage: $0 stop STATE" >&2; exit 2; }; stop "$2" ;;
  *) echo "usage: $0 start BUCKET STATE | stop STATE" >&2; exit 2 ;;
esac
