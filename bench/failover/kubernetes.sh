#!/usr/bin/env bash
# Issue 13's failover figures: vigil standalone and `vigil speaker` in Kubernetes mode (a real
# kube-apiserver from vigil-testenv, MetalLB's CRDs and speaker RBAC), one after the other in
# one run on the same lab: three hosts and a client in network namespaces, the same node names,
# VIPs (198.18.0.200 and 2001:db8::200), gossip profile (fast) and key length. For each mode it
# fails the owner RUNS times by host loss (its link down), SIGKILL and SIGTERM, and prints the
# outage the client saw (ARP and NDP every 5 ms) per trial, then one table with p50 / max.
# It is crates/vigil/tests/k8s_failover.rs's #[ignore]d test figures_standalone_beside_kubernetes;
# it asserts only who answers.
#
# Usage: sudo RUNS=10 bash bench/failover/kubernetes.sh      (RUNS defaults to 10)
#
# Everything runs in namespaces with the prefix vkf-fig-<pid>, removed on exit, like the tests'.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "$(id -u)" -ne 0 ]; then
  echo "bench/failover/kubernetes.sh: run as root (it creates network namespaces)" >&2
  exit 1
fi
bin=$(bash conformance/build.sh testenv metallb | tail -1)
export VIGIL_GO_BIN_DIR=${VIGIL_GO_BIN_DIR:-$bin}
export VIGIL_REQUIRE_GO=1 VIGIL_REQUIRE_ROOT=1 VIGIL_FIGURE_RUNS=${RUNS:-10}
echo "== commit $(git rev-parse --short HEAD), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $VIGIL_FIGURE_RUNS runs per scenario" >&2
cargo test -q -p vigil --test k8s_failover -- --ignored --nocapture \
  figures_standalone_beside_kubernetes 2>&1 | grep -E '^(\||figures_standalone_beside_kubernetes:|test result)'
