#!/usr/bin/env bash
# Starts (up) or stops (down) a moto server, the local stand-in for SQS, S3 and Secrets
# Manager, on a port of its own, behind the template's IAM (infra/iam/gate.py): a call
# signed with a function's key (SearchFunction, DetailFunction, DrainerFunction) is
# refused unless that function's role in infra/template.yaml allows it, as AWS would, and
# every call is logged to iam-calls.jsonl for `python -m iam.report` (the end of make
# test). moto, cfn-lint and SAM's transform live in the project's venv (.venv), installed
# from PyPI on first use. `up` prints the environment the tests read.
#   LAWSYNC_TEST_MOTO_PORT  port (default 5391)
#   LAWSYNC_TEST_MOTO_DIR   state folder (default .run/moto)
#   LAWSYNC_TEST_MOTO_IAM   0: plain moto, no IAM (the demo, whose calls are all an
#                           operator's); default 1
set -euo pipefail
cd "$(dirname "$0")/.."
port=${LAWSYNC_TEST_MOTO_PORT:-5391}
dir=${LAWSYNC_TEST_MOTO_DIR:-.run/moto}
venv=.venv
iam=${LAWSYNC_TEST_MOTO_IAM:-1}
# Pinned: the versions checked against this project's tests. cfn-lint reads the template
# and aws-sam-translator is SAM's transform, at the versions aws-sam-cli 1.170.0 pins
# (scripts/infra-tools.sh), so the roles rendered here are the ones `sam deploy` makes.
moto_version=5.2.5
iam_pins=("cfn-lint==1.53.0" "aws-sam-translator==1.115.0")

ensure_venv() {
  local want=("moto[server]==$moto_version") missing=()
  [ "$iam" = 0 ] || want+=("${iam_pins[@]}")
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv" 2>/dev/null || {
    echo "test-moto: python3 -m venv failed; install python3-venv (apt-get install -y python3-venv)" >&2; exit 1; }
  for p in "${want[@]}"; do
    local name=${p%%==*}; name=${name%%[*}
    have=$("$venv/bin/pip" show "$name" 2>/dev/null | sed -n 's/^Version: //p' || true)
    [ "$have" = "${p##*==}" ] || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "test-moto: installing ${missing[*]} into $venv" >&2
    "$venv/bin/pip" install -q --disable-pip-version-check "${missing[@]}" >&2
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
    calls="$(cd "$dir" && pwd)/iam-calls.jsonl"
    if [ "$iam" = 0 ]; then
      nohup "$venv/bin/moto_server" -H 127.0.0.1 -p "$port" >"$dir/moto.log" 2>&1 &
    else
      (cd infra && exec nohup "../$venv/bin/python" -m iam.gate --host 127.0.0.1 --port "$port" \
        --template template.yaml --log "$calls") >"$dir/moto.log" 2>&1 &
    fi
    echo $! >"$dir/pid"
    for _ in $(seq 200); do
      if (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null; then
        {
          echo "LAWSYNC_TEST_MOTO_URL=http://127.0.0.1:$port"
          [ "$iam" = 0 ] || echo "LAWSYNC_TEST_IAM_LOG=$calls"
        } >"$dir/env"
        cat "$dir/env"
        exit 0
      fi
      kill -0 "$(cat "$dir/pid")" 2>/dev/null || break
      sleep 0.1
    done
    echo "test-moto: moto did not start; see $dir/moto.log:" >&2; tail -5 "$dir/moto.log" >&2; exit 1
    ;;
  down) stop_ours ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
