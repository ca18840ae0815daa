#!/usr/bin/env bash
# Installs what the tests need and a fresh Debian machine with Rust lacks: redis-server,
# redis-cli, openssl (the secure test cluster's certificates), and python3 with venv (for moto). Does nothing when they are present; needs root (or sudo) otherwise.
set -euo pipefail
missing=()
command -v redis-server >/dev/null || missing+=(redis-server)
command -v redis-cli >/dev/null || missing+=(redis-tools)
command -v openssl >/dev/null || missing+=(openssl)
command -v python3 >/dev/null || missing+=(python3)
# moto's venv needs ensurepip, which Debian ships separately.
python3 -c 'import ensurepip' 2>/dev/null || missing+=(python3-venv)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ]; then sudo=""; elif command -v sudo >/dev/null; then sudo=sudo; else
  echo "install-deps: missing ${missing[*]}; run as root: apt-get install -y ${missing[*]}" >&2; exit 1
fi
echo "install-deps: installing ${missing[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
