#!/usr/bin/env bash
# Builds the three Lambda bootstraps with cargo-lambda (from PyPI, into the project's
# .venv; it brings zig, which links against Lambda's glibc) and prints each one's size.
#   ARCH=x86_64 (default, as the template: the one the tests build and run) | arm64
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(scripts/infra-tools.sh)
export PATH="$bin:$PATH"
arch=${ARCH:-x86_64}
case "$arch" in
  arm64) arch_flag=(--arm64); triple=aarch64-unknown-linux-gnu ;;
  x86_64) arch_flag=(--x86-64); triple=x86_64-unknown-linux-gnu ;;
  *) echo "lambda-build: ARCH must be arm64 or x86_64, got '$arch'" >&2; exit 2 ;;
esac
if ! rustup target list --installed 2>/dev/null | grep -qx "$triple"; then
  echo "lambda-build: the $triple standard library is not installed: rustup target add $triple (or ARCH=x86_64)" >&2; exit 1
fi
cargo lambda build --release --locked "${arch_flag[@]}" --output-format zip -p lawsync-search -p lawsync-detail -p lawsync-drainer
for f in search detail drainer; do
  z=target/lambda/$f/bootstrap.zip
  printf '%-8s %s bytes zipped (%s)\n' "$f" "$(stat -c %s "$z")" "$(du -h "$z" | cut -f1)"
done
