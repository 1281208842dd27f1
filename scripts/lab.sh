#!/usr/bin/env bash
# vigil's main-job command: a failover lab in network namespaces (as root), on a fresh Debian
# machine with Rust (rustup). Installs the Debian packages it needs (scripts/install-deps.sh),
# builds vigil (release) and runs `vigil lab` with the options given here: N hosts running
# `vigil standalone` and a client on a bridge of their own (198.18.0.0/24, 2001:db8::/64); the
# VIP's owner fails and the client reports how long the VIP went unanswered. Everything is torn
# down at the end, Ctrl-C included.
#
# With --kubernetes it first builds vigil-testenv (a real kube-apiserver + etcd, from Go modules:
# `conformance/build.sh testenv`, Go >= 1.26; the first build takes 10-15 minutes, later ones
# are skipped when nothing changed) and runs the lab in Kubernetes mode: `vigil controller`
# allocates the IP, `vigil speaker` runs on every host.
#
# Usage: bash scripts/lab.sh [vigil lab options]      e.g. --scenario crash --nodes 5
#        bash scripts/lab.sh --kubernetes [options]   e.g. --kubernetes --scenario api-down
#        bash scripts/lab.sh --help                   every option
set -euo pipefail
cd "$(dirname "$0")/.."

help=0
kubernetes=0
for a in "$@"; do
  [ "$a" = --help ] || [ "$a" = -h ] && help=1
  [ "$a" = --kubernetes ] && kubernetes=1
done
if [ "$(id -u)" -ne 0 ] && [ $help = 0 ]; then
  echo "lab: run as root (vigil lab creates network namespaces)" >&2
  exit 1
fi
[ $help = 1 ] || bash scripts/install-deps.sh
command -v cargo >/dev/null || { echo "lab: cargo not found: install Rust with rustup first" >&2; exit 1; }
if [ $kubernetes = 1 ] && [ $help = 0 ]; then
  echo "== building vigil-testenv (kube-apiserver + etcd; skipped when up to date)" >&2
  bindir="$(bash conformance/build.sh testenv | tail -n 1)" || {
    echo "lab: could not build vigil-testenv: it needs Go >= 1.26 (https://go.dev/dl/, or set" >&2
    echo "     VIGIL_GO=/path/to/go) and the Go module proxy; see conformance/README.md" >&2
    exit 1
  }
  export VIGIL_GO_BIN_DIR="$bindir"
fi
echo "== building vigil (release)" >&2
cargo build -q --release -p vigil
exec "${CARGO_TARGET_DIR:-target}/release/vigil" lab "$@"
