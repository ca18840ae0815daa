#!/usr/bin/env bash
# Starts (up) or stops (down) a moto server, the local stand-in for SQS, S3 and Secrets
# Manager, on a port of its own. moto lives in the project's venv (.venv), installed from
# PyPI on first use. `up` prints the environment the tests read.
#   LAWSYNC_TEST_MOTO_PORT  port (default 5391)
#   LAWSYNC_TEST_MOTO_DIR   state folder (default .run/moto)
set -euo pipefail
cd "$(dirname "$0")/.."
port=${LAWSYNC_TEST_MOTO_PORT:-5391}
dir=${LAWSYNC_TEST_MOTO_DIR:-.run/moto}
venv=.venv
# Pinned: the version checked against this project's tests.
moto_version=5.2.5

ensure_venv() {
  if [ ! -x "$venv/bin/moto_server" ]; then
    echo "test-moto: installing moto[server]==$moto_version into $venv" >&2
    python3 -m venv "$venv" 2>/dev/null || {
      echo "test-moto: python3 -m venv failed; install python3-venv (apt-get install -y python3-venv)" >&2; exit 1; }
    "$venv/bin/pip" install -q --disable-pip-version-check "moto[server]==$moto_version" >&2
  fi
}

stop_ours() {
  if [ -f "$dir/pid" ]; then
    kill "$(cat "$dir/pid")" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$(cat "$dir/pid")" 2>/dev/null || break; sleep 0.1; done
    rm -f "$dir/pid"
  fi
}

case "${1:-}" in
  up)
    ensure_venv
    stop_ours
    if (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null; then
      echo "test-moto: port $port is taken by another server; set LAWSYNC_TEST_MOTO_PORT" >&2; exit 1
    fi
    mkdir -p "$dir"
    nohup "$venv/bin/moto_server" -H 127.0.0.1 -p "$port" >"$dir/moto.log" 2>&1 &
    echo $! >"$dir/pid"
    for _ in $(seq 100); do
      if (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null; then
        echo "LAWSYNC_TEST_MOTO_URL=http://127.0.0.1:$port" >"$dir/env"
        cat "$dir/env"
        exit 0
      fi
      sleep 0.1
    done
    echo "test-moto: moto did not start; see $dir/moto.log" >&2; exit 1
    ;;
  down) stop_ours ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
