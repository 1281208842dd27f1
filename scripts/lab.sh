#!/usr/bin/env bash
# vigil's main-job command: a failover lab in network namespaces (as root), on a fresh Debian
# machine with Rust (rustup). Installs the Debian packages it needs (scripts/install-deps.sh),
# builds vigil (release) and runs `vigil lab` with the options given here: N hosts running
# `vigil standalone` and a client on a bridge of their own (198.18.0.0/24, 2001:db8::/64); the
# VIP's owner fails and the client reports how long the VIP went unanswered. Everything is torn
# down at the end, Ctrl-C included.
#
# Usage: bash scripts/lab.sh [vigil lab options]      e.g. --scenario crash --nodes 5
#        bash scripts/lab.sh --help                   every option
set -euo pipefail
cd "$(dirname "$0")/.."

help=0
for a in "$@"; do [ "$a" = --help ] || [ "$a" = -h ] && help=1; done
if [ "$(id -u)" -ne 0 ] && [ $help = 0 ]; then
  echo "lab: run as root (vigil lab creates network namespaces)" >&2
  exit 1
fi
[ $help = 1 ] || bash scripts/install-deps.sh
command -v cargo >/dev/null || { echo "lab: cargo not found: install Rust with rustup first" >&2; exit 1; }
echo "== building vigil (release)" >&2
cargo build -q --release -p vigil
exec "${CARGO_TARGET_DIR:-target}/release/vigil" lab "$@"
