#!/usr/bin/env bash
# Starts (up) or stops (down) the Redis servers the tests use, on ports of their own:
# one standalone server and a 3-node Redis Cluster (the mode of ElastiCache Serverless).
# State lives in .run/redis; `up` prints the environment the tests read.
#   LAWSYNC_TEST_REDIS_PORT    standalone port (default 6391)
#   LAWSYNC_TEST_CLUSTER_PORT  first cluster port (default 7391; uses three)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=.run/redis
standalone=${LAWSYNC_TEST_REDIS_PORT:-6391}
first=${LAWSYNC_TEST_CLUSTER_PORT:-7391}
cluster_ports=("$first" "$((first + 1))" "$((first + 2))")

need() { command -v "$1" >/dev/null || { echo "test-redis: $1 not found; install redis-server and redis-tools (apt-get install redis-server redis-tools)" >&2; exit 1; }; }

start() { # port, extra args...
  local port=$1; shift
  if redis-cli -p "$port" ping >/dev/null 2>&1; then
    echo "test-redis: port $port is taken by another server; set LAWSYNC_TEST_REDIS_PORT / LAWSYNC_TEST_CLUSTER_PORT" >&2
    exit 1
  fi
  mkdir -p "$dir/$port"
  redis-server --port "$port" --bind 127.0.0.1 --daemonize yes --save "" --appendonly no \
    --dir "$PWD/$dir/$port" --logfile "$PWD/$dir/$port/redis.log" --pidfile "$PWD/$dir/$port/redis.pid" "$@"
  for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "test-redis: redis on port $port did not start; see $dir/$port/redis.log" >&2; exit 1
}

stop_ours() { # servers this script started earlier (their folder exists)
  for p in "$standalone" "${cluster_ports[@]}"; do
    if [ -d "$dir/$p" ] && redis-cli -p "$p" ping >/dev/null 2>&1; then
      redis-cli -p "$p" shutdown nosave >/dev/null 2>&1 || true
      for _ in $(seq 50); do redis-cli -p "$p" ping >/dev/null 2>&1 || break; sleep 0.1; done
    fi
  done
}

case "${1:-}" in
  up)
    need redis-server; need redis-cli
    stop_ours
    start "$standalone"
    for p in "${cluster_ports[@]}"; do
      rm -f "$dir/$p/nodes.conf"
      start "$p" --cluster-enabled yes --cluster-config-file "$PWD/$dir/$p/nodes.conf" --cluster-node-timeout 2000
    done
    redis-cli --cluster create $(printf '127.0.0.1:%s ' "${cluster_ports[@]}") --cluster-replicas 0 --cluster-yes >"$dir/cluster-create.log" 2>&1 \
      || { cat "$dir/cluster-create.log" >&2; exit 1; }
    for _ in $(seq 100); do
      ok=1
      for p in "${cluster_ports[@]}"; do redis-cli -p "$p" cluster info | grep -q cluster_state:ok || ok=0; done
      [ $ok = 1 ] && break; sleep 0.1
    done
    [ $ok = 1 ] || { echo "test-redis: cluster did not reach cluster_state:ok" >&2; exit 1; }
    {
      echo "LAWSYNC_TEST_REDIS_URL=redis://127.0.0.1:$standalone"
      echo "LAWSYNC_TEST_CLUSTER_URL=redis://127.0.0.1:$first"
    } >"$dir/env"
    cat "$dir/env"
    ;;
  down) stop_ours ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
