#!/usr/bin/env bash
# Installs the deployment tools, pinned, from PyPI into the project's .venv (beside moto),
# so nothing global is needed: aws-sam-cli, cfn-lint (1.53.0 is the last that expands SAM
# transforms; later ones pass SAM errors silently) and cargo-lambda (which brings zig).
# Prints the venv's bin folder.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv
pins=("aws-sam-cli==1.170.0" "cfn-lint==1.53.0" "cargo-lambda==1.9.2")
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv" 2>/dev/null || {
    echo "infra-tools: python3 -m venv failed; install python3-venv (apt-get install -y python3-venv)" >&2; exit 1; }
fi
missing=()
for p in "${pins[@]}"; do
  # Read pip's whole answer first: grep -q closing the pipe early would fail it under pipefail.
  have=$("$venv/bin/pip" show "${p%%==*}" 2>/dev/null | sed -n 's/^Version: //p' || true)
  [ "$have" = "${p##*==}" ] || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "infra-tools: installing ${missing[*]} into $venv" >&2
  "$venv/bin/pip" install -q --disable-pip-version-check "${missing[@]}" >&2
fi
echo "$PWD/$venv/bin"
