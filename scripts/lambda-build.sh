#!/usr/bin/env bash
# Builds the three Lambda bootstraps with cargo-lambda (from PyPI, into the project's
# .venv; it brings zig, which links against Lambda's glibc) and prints each one's size.
#   ARCH=arm64 (default x86_64)   builds for Graviton
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv
cargo_lambda_version=1.9.2
if [ ! -x "$venv/bin/cargo-lambda" ]; then
  [ -x "$venv/bin/pip" ] || python3 -m venv "$venv"
  echo "lambda-build: installing cargo-lambda==$cargo_lambda_version into $venv" >&2
  "$venv/bin/pip" install -q --disable-pip-version-check "cargo-lambda==$cargo_lambda_version" >&2
fi
export PATH="$PWD/$venv/bin:$PATH"
arch_flag=()
[ "${ARCH:-x86_64}" = arm64 ] && arch_flag=(--arm64)
cargo lambda build --release "${arch_flag[@]}" -p lawsync-search -p lawsync-detail -p lawsync-drainer
for f in search detail drainer; do
  b=target/lambda/$f/bootstrap
  printf '%-8s %s bytes (%s)\n' "$f" "$(stat -c %s "$b")" "$(du -h "$b" | cut -f1)"
done
