#!/usr/bin/env bash
# make demo: the whole package on this machine, against a law.go.kr look-alike that
# enforces the rate rule itself. Installs what is missing, starts Redis and moto on ports
# of their own, builds, runs tests/src/bin/demo.rs, and stops everything it started,
# whatever happens. Rerunnable.
#   GATE=shared (default) | per-instance   per-instance turns the shared gate off, for contrast
#   LAWSYNC_DEMO_REDIS_PORT (6393), LAWSYNC_DEMO_MOTO_PORT (5393), DEMO_ARGS (extra flags)
#   DEMO_PROFILE=dev (default) | release   the build the processes run (make soak-rule: release)
set -euo pipefail
cd "$(dirname "$0")/.."
gate=${GATE:-shared}
case "$gate" in shared|per-instance) ;; *) echo "demo: GATE must be shared or per-instance, got '$gate'" >&2; exit 2 ;; esac
redis_port=${LAWSYNC_DEMO_REDIS_PORT:-6393}
moto_port=${LAWSYNC_DEMO_MOTO_PORT:-5393}
state=.run/demo-servers
# The demo's AWS calls are all an operator's (key "demo"): plain moto, no IAM gate.
export LAWSYNC_TEST_MOTO_PORT=$moto_port LAWSYNC_TEST_MOTO_DIR=$state/moto LAWSYNC_TEST_MOTO_IAM=0

scripts/install-deps.sh
command -v cargo >/dev/null || { echo "demo: cargo not found; install Rust from https://rustup.rs" >&2; exit 1; }

stop() {
  if [ -f "$state/redis.pid" ]; then
    redis-cli -p "$redis_port" shutdown nosave >/dev/null 2>&1 || kill "$(cat "$state/redis.pid")" 2>/dev/null || true
    rm -f "$state/redis.pid"
  fi
  scripts/test-moto.sh down >/dev/null 2>&1 || true
}
trap stop EXIT
trap 'exit 130' INT TERM
stop

profile=${DEMO_PROFILE:-dev}
case "$profile" in dev) out=target/debug; flags=() ;; release) out=target/release; flags=(--release) ;;
  *) echo "demo: DEMO_PROFILE must be dev or release, got '$profile'" >&2; exit 2 ;; esac
echo "demo: building (the first build takes a few minutes)" >&2
cargo build --locked -q "${flags[@]}" -p lawsync --bin lawsync -p lawsync-tests --bin law-lookalike --bin demo

if redis-cli -p "$redis_port" ping >/dev/null 2>&1; then
  echo "demo: port $redis_port is taken by another server; set LAWSYNC_DEMO_REDIS_PORT" >&2; exit 1
fi
mkdir -p "$state"
redis-server --port "$redis_port" --bind 127.0.0.1 --daemonize yes --save "" --appendonly no \
  --dir "$PWD/$state" --logfile "$PWD/$state/redis.log" --pidfile "$PWD/$state/redis.pid" >/dev/null
for _ in $(seq 50); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.1; done
scripts/test-moto.sh up >/dev/null

# shellcheck disable=SC2086 # DEMO_ARGS is a list of flags
"$out/demo" --gate "$gate" --redis-url "redis://127.0.0.1:$redis_port" \
  --moto-url "http://127.0.0.1:$moto_port" --out .run/demo ${DEMO_ARGS:-}
