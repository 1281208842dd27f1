#!/usr/bin/env bash
# vigil against real MetalLB v0.16.2 in Kubernetes mode, on one lab and one real kube-apiserver
# (vigil-testenv), one system after the other in one run. See bench/kubernetes/README.md.
#
# Usage: sudo bash bench/kubernetes/run.sh [vigil-bench-k8s flags]
#   (no flags)                  everything: 20 trials per scenario, scale 1,000 and 5,000
#   --trials 3 --scale 0        a quick check (no scale runs)
#   --results k8s.json          also write every sample there
#   --help                      every flag
#   CARGO_TARGET_DIR            where vigil and the bench are built (default: target/)
#   VIGIL_GO_BIN_DIR            vigil-testenv and MetalLB (default: conformance/build.sh builds them)
#
# Everything it starts is stopped by PID; on Ctrl-C this script kills what still runs in the
# bench's namespaces (prefix vbk8s-<pid>) by PID and deletes them. Addresses: 198.18.0.0/16
# inside those namespaces only.
set -euo pipefail
cd "$(dirname "$0")/../.."

if [ "$(id -u)" -ne 0 ]; then
  echo "bench/kubernetes: run as root (it creates network namespaces)" >&2
  exit 1
fi
go_bin=${VIGIL_GO_BIN_DIR:-}
if [ -z "$go_bin" ]; then
  go_bin=$(bash conformance/build.sh testenv metallb | tail -1)
fi
target=${CARGO_TARGET_DIR:-$PWD/target}
echo "== building vigil and vigil-bench-k8s (release) into $target" >&2
CARGO_TARGET_DIR=$target cargo build -q --release -p vigil -p vigil-bench-k8s
echo "== commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%FT%TZ)" >&2

VIGIL_GO_BIN_DIR=$go_bin VIGIL_REQUIRE_GO=1 VIGIL_REQUIRE_ROOT=1 \
  "$target/release/vigil-bench-k8s" --vigil "$target/release/vigil" "$@" &
bench=$!

cleanup() {
  kill -KILL "$bench" 2>/dev/null || true
  local ns p
  for ns in $(ip netns list | awk '{print $1}' | grep "^vbk8s-$bench-" || true); do
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
  done
  for ns in $(ip netns list | awk '{print $1}' | grep "^vbk8s-$bench-" | sort -r || true); do
    ip netns del "$ns" 2>/dev/null || true
  done
}
trap 'cleanup; exit 130' INT TERM
wait "$bench"
