#!/bin/bash
# nginx.sh - a throwaway nginx (Debian nginx-light) serving a directory on
# 127.0.0.1 with a JSON autoindex, for integration tests and benchmarks.
#
#   nginx.sh start ROOT STATE   starts nginx on an ephemeral 127.0.0.1 port;
#                               prints its URL (http://127.0.0.1:PORT/) last.
#                               STATE (created) holds the config, pid, logs.
#   nginx.sh stop STATE         stops it (QUIT, then KILL after 10 s).
#
# NGINX_ACCESS_LOG=1 writes STATE/access.log: "STATUS BODY_BYTES BYTES_SENT REQUEST MSEC"
# per request, MSEC the wall-clock time (s.ms) it ended (bench/sampling.py
# counts bytes downloaded, and when, from it).
# Exits 1 with one line on stderr when nginx is not installed ($NGINX, by
# default /usr/sbin/nginx): scripts/deps.sh installs it, so a test that
# needs it fails rather than skips.  Ranges, keepalive and sendfile are
# nginx defaults; `autoindex_format json` is what rollcache's http:// lister
# reads.
set -euo pipefail

NGINX=${NGINX:-/usr/sbin/nginx}

# missing WHAT FIX: a program the tests need is absent; one line, exit 1.
missing() {
  echo "$1: $2" >&2
  exit 1
}

free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

start() {
  local root=$1 state=$2
  [ -x "$NGINX" ] || missing "nginx ($NGINX) is not installed" "run scripts/deps.sh (apt-get install nginx-light)"
  root=$(cd "$root" && pwd)
  mkdir -p "$state"
  state=$(cd "$state" && pwd)
  local user_line="" access_line="access_log off;"
  # NGINX_ACCESS_LOG=1: one line per request with the bytes sent (benchmarks)
  [ "${NGINX_ACCESS_LOG:-0}" = 1 ] && access_line="access_log $state/access.log rc_bytes;"
  [ "$(id -u)" -eq 0 ] && user_line="user root;"
  for attempt in 1 2 3 4 5; do
    local port
    port=$(free_port)
    cat > "$state/nginx.conf" <<CONF
$user_line
daemon on;
worker_processes 2;
pid $state/nginx.pid;
error_log $state/error.log warn;
events { worker_connections 256; }
http {
  log_format rc_bytes '\$status \$body_bytes_sent \$bytes_sent \$request \$msec';
  $access_line
  client_body_temp_path $state/body;
  proxy_temp_path $state/proxy;
  fastcgi_temp_path $state/fastcgi;
  uwsgi_temp_path $state/uwsgi;
  scgi_temp_path $state/scgi;
  sendfile on;
  keepalive_requests 100000;
  default_type application/octet-stream;
  server {
    listen 127.0.0.1:$port;
    root $root;
    location / { autoindex on; autoindex_format json; }
  }
}
CONF
    if "$NGINX" -p "$state" -e "$state/error.log" -c "$state/nginx.conf" 2>"$state/start.err"; then
      for _ in $(seq 1 50); do
        [ -s "$state/nginx.pid" ] && break
        sleep 0.1
      done
      echo "$port" > "$state/port"
      echo "http://127.0.0.1:$port/"
      return 0
    fi
    grep -q "Address already in use" "$state/start.err" || { cat "$state/start.err" >&2; exit 1; }
  done
  echo "nginx: no free port after 5 attempts" >&2
  exit 1
}

stop() {
  local state=$1
  [ -s "$state/nginx.pid" ] || return 0
  local pid
  pid=$(cat "$state/nginx.pid")
  kill -QUIT "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
}

case "${1:-}" in
  start) [ $# -eq 3 ] || { echo "usage: $0 start ROOT STATE" >&2; exit 2; }; start "$2" "$3" ;;
  stop) [ $# -eq 2 ] || { echo "usage: $0 stop STATE" >&2; exit 2; }; stop "$2" ;;
  *) echo "usage: $0 start ROOT STATE | stop STATE" >&2; exit 2 ;;
esac
