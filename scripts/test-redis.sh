#!/usr/bin/env bash
# Starts (up) or stops (down) the Redis servers the tests use, on ports of their own:
# one standalone server, a 3-node Redis Cluster (the mode of ElastiCache Serverless), and
# a secure cluster as ElastiCache Serverless presents itself: TLS only (certificates made
# here by a CA of the run's own, naming 127.0.0.1 alone), an ACL user with a password
# (the default user off), three primaries each with a replica.
# State lives in .run/redis; `up` prints the environment the tests read. No server keeps
# anything on disk (no snapshots, no append-only file, replicas load a full sync from the
# socket), `up` clears each server's folder before starting it, and an `up` that fails
# stops the servers it started, so any earlier run, failed or not, leaves nothing behind
# that a later `up` could trip on.
#   LAWSYNC_TEST_REDIS_PORT    standalone port (default 6391)
#   LAWSYNC_TEST_CLUSTER_PORT  first cluster port (default 7391; uses three)
#   LAWSYNC_TEST_SECURE_PORT   first secure cluster port (default 7394; uses six)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=.run/redis
standalone=${LAWSYNC_TEST_REDIS_PORT:-6391}
first=${LAWSYNC_TEST_CLUSTER_PORT:-7391}
cluster_ports=("$first" "$((first + 1))" "$((first + 2))")
secure_first=${LAWSYNC_TEST_SECURE_PORT:-7394}
secure_ports=()
for i in 0 1 2 3 4 5; do secure_ports+=("$((secure_first + i))"); done
tls=$dir/tls
secure_user=lawsync

# Nothing on disk: no snapshot points, no append-only file, and a replica loads its
# primary's full sync from the socket (swapdb) instead of writing it to dump.rdb first.
no_disk=(--save "" --appendonly no --repl-diskless-load swapdb)
# Ports this `up` started, stopped again if it fails.
started=()

# A server's folder, emptied: a nodes.conf or dump.rdb left by an earlier run would make a
# cluster node refuse to join ("Node ... is not empty").
fresh_dir() { # port
  rm -rf "${dir:?}/$1"; mkdir -p "$dir/$1"; started+=("$1")
}

need() { command -v "$1" >/dev/null || { echo "test-redis: $1 not found; install redis-server and redis-tools (apt-get install redis-server redis-tools)" >&2; exit 1; }; }

start() { # port, extra args...
  local port=$1; shift
  if redis-cli -p "$port" ping >/dev/null 2>&1; then
    echo "test-redis: port $port is taken by another server; set LAWSYNC_TEST_REDIS_PORT / LAWSYNC_TEST_CLUSTER_PORT" >&2
    exit 1
  fi
  fresh_dir "$port"
  redis-server --port "$port" --bind 127.0.0.1 --daemonize yes "${no_disk[@]}" \
    --dir "$PWD/$dir/$port" --logfile "$PWD/$dir/$port/redis.log" --pidfile "$PWD/$dir/$port/redis.pid" "$@"
  for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "test-redis: redis on port $port did not start; see $dir/$port/redis.log" >&2; exit 1
}

# redis-cli on a secure node, as its ACL user.
secure_cli() { # port, args...
  local port=$1; shift
  REDISCLI_AUTH="$(cat "$tls/password")" redis-cli -p "$port" --tls --cacert "$tls/ca.pem" --user "$secure_user" "$@"
}

# A CA of this run's own and a server certificate it signed for 127.0.0.1 (IP only, so a
# client that connects by the name "localhost" meets a certificate not valid for it).
make_certs() {
  rm -rf "$tls"; mkdir -p "$tls"
  local ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
  openssl req -x509 "${ec[@]}" -keyout "$tls/ca.key" -out "$tls/ca.pem" -days 7 \
    -subj "/CN=lawsync test CA" >/dev/null 2>&1
  openssl req -new "${ec[@]}" -keyout "$tls/server.key" -out "$tls/server.csr" \
    -subj "/CN=lawsync test Redis" >/dev/null 2>&1
  printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\n' >"$tls/ext"
  openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" -CAcreateserial \
    -out "$tls/server.pem" -days 7 -extfile "$tls/ext" >/dev/null 2>&1
  openssl rand -hex 24 >"$tls/password"
  chmod 600 "$tls"/*.key "$tls/password"
}

start_secure() { # port
  local port=$1 pw; pw=$(cat "$tls/password")
  if redis-cli -p "$port" ping >/dev/null 2>&1 || secure_cli "$port" ping >/dev/null 2>&1; then
    echo "test-redis: port $port is taken by another server; set LAWSYNC_TEST_SECURE_PORT" >&2
    exit 1
  fi
  fresh_dir "$port"
  redis-server --port 0 --tls-port "$port" --bind 127.0.0.1 --daemonize yes "${no_disk[@]}" \
    --dir "$PWD/$dir/$port" --logfile "$PWD/$dir/$port/redis.log" --pidfile "$PWD/$dir/$port/redis.pid" \
    --tls-cert-file "$PWD/$tls/server.pem" --tls-key-file "$PWD/$tls/server.key" \
    --tls-ca-cert-file "$PWD/$tls/ca.pem" --tls-auth-clients no --tls-cluster yes --tls-replication yes \
    --cluster-enabled yes --cluster-config-file "$PWD/$dir/$port/nodes.conf" --cluster-node-timeout 2000 \
    --user default off --user "$secure_user" on ">$pw" '~*' '&*' '+@all' \
    --masteruser "$secure_user" --masterauth "$pw"
  for _ in $(seq 50); do secure_cli "$port" ping >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "test-redis: secure redis on port $port did not start; see $dir/$port/redis.log" >&2; exit 1
}

cluster_ok() { # cli function, ports...
  local cli=$1; shift
  for _ in $(seq 150); do
    local ok=1
    for p in "$@"; do $cli "$p" cluster info 2>/dev/null | grep -q cluster_state:ok || ok=0; done
    [ $ok = 1 ] && return 0; sleep 0.1
  done
  return 1
}

plain_cli() { local port=$1; shift; redis-cli -p "$port" "$@"; }

# Whether the server answering on a port is the one this script started there: its
# process id is the one in the port's pid file (a server of someone else's is left alone).
ours() { # cli function, port
  local pidfile=$dir/$2/redis.pid running
  [ -f "$pidfile" ] || return 1
  running=$($1 "$2" info server 2>/dev/null | sed -n 's/^process_id:\([0-9]*\).*/\1/p')
  [ -n "$running" ] && [ "$running" = "$(cat "$pidfile")" ]
}

stop_ours() { # servers this script started earlier
  for p in "$standalone" "${cluster_ports[@]}"; do
    if ours plain_cli "$p"; then
      redis-cli -p "$p" shutdown nosave >/dev/null 2>&1 || true
      for _ in $(seq 50); do redis-cli -p "$p" ping >/dev/null 2>&1 || break; sleep 0.1; done
    fi
  done
  [ -f "$tls/password" ] || return 0
  for p in "${secure_ports[@]}"; do
    if ours secure_cli "$p"; then
      secure_cli "$p" shutdown nosave >/dev/null 2>&1 || true
      for _ in $(seq 50); do secure_cli "$p" ping >/dev/null 2>&1 || break; sleep 0.1; done
    fi
  done
}

# After a failed `up`: the servers it started, by their pid files (never a server of
# someone else's on one of our ports).
stop_started() {
  local pids=() pid
  for p in "${started[@]}"; do
    pid=$(cat "$dir/$p/redis.pid" 2>/dev/null) && kill "$pid" 2>/dev/null && pids+=("$pid")
  done
  for pid in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  done
  echo "test-redis: up failed; stopped the ${#pids[@]} server(s) it had started" >&2
}

case "${1:-}" in
  up)
    need redis-server; need redis-cli; need openssl
    stop_ours
    trap 'status=$?; [ $status = 0 ] || stop_started; exit $status' EXIT
    start "$standalone"
    for p in "${cluster_ports[@]}"; do
      start "$p" --cluster-enabled yes --cluster-config-file "$PWD/$dir/$p/nodes.conf" --cluster-node-timeout 2000
    done
    redis-cli --cluster create $(printf '127.0.0.1:%s ' "${cluster_ports[@]}") --cluster-replicas 0 --cluster-yes >"$dir/cluster-create.log" 2>&1 \
      || { cat "$dir/cluster-create.log" >&2; exit 1; }
    cluster_ok plain_cli "${cluster_ports[@]}" || { echo "test-redis: cluster did not reach cluster_state:ok" >&2; exit 1; }
    make_certs
    for p in "${secure_ports[@]}"; do start_secure "$p"; done
    REDISCLI_AUTH="$(cat "$tls/password")" redis-cli --tls --cacert "$tls/ca.pem" --user "$secure_user" \
      --cluster create $(printf '127.0.0.1:%s ' "${secure_ports[@]}") --cluster-replicas 1 --cluster-yes \
      >"$dir/secure-create.log" 2>&1 || { cat "$dir/secure-create.log" >&2; exit 1; }
    cluster_ok secure_cli "${secure_ports[@]}" || { echo "test-redis: secure cluster did not reach cluster_state:ok" >&2; exit 1; }
    for _ in $(seq 150); do # every replica in sync with its primary
      synced=0
      for p in "${secure_ports[@]}"; do secure_cli "$p" info replication | grep -q master_link_status:up && synced=$((synced + 1)); done
      [ $synced = 3 ] && break; sleep 0.1
    done
    [ $synced = 3 ] || { echo "test-redis: secure cluster replicas did not sync ($synced of 3)" >&2; exit 1; }
    {
      echo "LAWSYNC_TEST_REDIS_URL=redis://127.0.0.1:$standalone"
      echo "LAWSYNC_TEST_CLUSTER_URL=redis://127.0.0.1:$first"
      echo "LAWSYNC_TEST_SECURE_URL=rediss://127.0.0.1:$secure_first"
      echo "LAWSYNC_TEST_SECURE_PORTS=$(IFS=,; echo "${secure_ports[*]}")"
      echo "LAWSYNC_TEST_SECURE_CA=$PWD/$tls/ca.pem"
      echo "LAWSYNC_TEST_SECURE_USER=$secure_user"
      echo "LAWSYNC_TEST_SECURE_PASSWORD=$(cat "$tls/password")"
    } >"$dir/env"
    cat "$dir/env"
    ;;
  down) stop_ours ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
