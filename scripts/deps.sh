#!/usr/bin/env bash
# Installs every Debian package the build and the tests need, and the npm
# packages of tests/ from their lock file.  Idempotent: when everything is
# present it only checks, and touches no network.
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(
  # build
  gcc meson ninja-build pkg-config
  zlib1g-dev libsqlite3-dev libinih-dev libfuse3-dev libcurl4-openssl-dev libexpat1-dev libssl-dev
  libjansson-dev   # JSON: nginx listings, the CLI reading a mount's stats
  libsystemd-dev   # sd_notify(READY=1) when the mount is up
  # tests and tools
  check fuse3 sqlite3 valgrind clang libclang-rt-14-dev clang-format
  nginx-light
  python3 python3-numpy python3-protobuf protobuf-compiler
  python3-torch   # DLPack consumer tests and the PyTorch DataLoader peer (bench/)
  python3-venv python3-setuptools python3-wheel   # pip install ./python into a venv (tests/python)
  python3-prometheus-client   # parses the metrics endpoint (tests/daemon)
  awscli          # resolves the same ~/.aws files as rollcache (tests/sampler)
  python3-botocore   # tests/servers/sigv4_proxy.py checks every S3 test request's SigV4
  librsvg2-bin    # rsvg-convert renders report's SVG (tests/cli)
  man-db          # man -l of the generated rollcache(1) (tests/docs)
  systemd         # systemd-analyze verify of docs/rollcache@.service (tests/docs)
  rclone s3fs     # peers of bench/peers.py only (rclone mount, s3fs), not the build or tests
)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
# Node.js and npm (for s3rver): any installation will do; Debian's when none.
if ! command -v npm >/dev/null 2>&1; then
  missing+=(nodejs npm)
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# npm packages for the integration tests (s3rver), pinned by package-lock.json.
if [ -f tests/package-lock.json ]; then
  if [ ! -d tests/node_modules ] || [ tests/package-lock.json -nt tests/node_modules ]; then
    echo "deps: npm ci in tests/"
    (cd tests && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
    touch tests/node_modules
  fi
fi
