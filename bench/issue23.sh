#!/usr/bin/env bash
# Issue 23's measurements in one run, on one set of binaries, one after the other (never two
# labs at once: every figure here is a latency):
#   1. standalone host loss (link) and freeze (SIGSTOP of the host), vigil fast, with the TCP
#      client                                                        bench/failover, TRIALS_FAST
#   2. keepalived at its fastest advert interval (0.01 s), the same scenarios and SIGKILL/SIGTERM
#   3. Kubernetes mode beside standalone on a real API server, 5 hosts, link and freeze
#                                        crates/vigil/tests/k8s_failover.rs figures, TRIALS_FAST
#   4. the 10-minute soak at quotas of 10 ms and 2 ms per 100 ms, vigil beside keepalived 0.01
#   5. 100 random partition/heal schedules and 20 cut owners, guard off and on
#   6. speaker SIGKILL and SIGTERM (standalone, then Kubernetes), TRIALS_SIGNAL
# Results (JSON and the text each step printed) go to $OUT (default bench-issue23-<time>).
#
# Usage: sudo bash bench/issue23.sh          (about two hours on 2 cores)
#        sudo TRIALS_FAST=5 TRIALS_SIGNAL=3 SOAK=30 SCHEDULES=3 CUT=1 bash bench/issue23.sh
#        STEPS=1,3 limits the run to some steps.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  echo "bench/issue23.sh: run as root (network namespaces, cgroups)" >&2
  exit 1
fi
command -v keepalived >/dev/null || apt-get install -y -q keepalived >/dev/null
TRIALS_FAST=${TRIALS_FAST:-100}
TRIALS_SIGNAL=${TRIALS_SIGNAL:-50}
SOAK=${SOAK:-600}
STEPS=${STEPS:-1,2,3,4,5,6}
OUT=${OUT:-bench-issue23-$(date -u +%Y%m%dT%H%M)}
mkdir -p "$OUT"
target=${CARGO_TARGET_DIR:-target}/release
bin=$(bash conformance/build.sh testenv metallb | tail -1)
cargo build -q --release -p vigil --bin vigil -p vigil-netlab --bin vigil-l2-client
cargo test -q --release -p vigil --test k8s_failover --no-run 2>/dev/null
export VIGIL_GO_BIN_DIR=${VIGIL_GO_BIN_DIR:-$bin} VIGIL_REQUIRE_GO=1 VIGIL_REQUIRE_ROOT=1

step() { [[ ",$STEPS," == *",$1,"* ]]; }
say() { echo "== $(date -u +%H:%M:%S) $*, load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/run.log" >&2; }
k8s_figures() {
  VIGIL_FIGURE_NODES=5 VIGIL_FIGURE_FAULTS=$1 VIGIL_FIGURE_RUNS=$2 \
    cargo test -q --release -p vigil --test k8s_failover -- --ignored --nocapture \
    figures_standalone_beside_kubernetes
}
say "commit $(git rev-parse --short HEAD), $(nproc) CPUs"
if step 1; then
  say "1. standalone link and freeze, $TRIALS_FAST trials, TCP client"
  SYSTEMS=vigil-fast SCENARIOS=link,stop TRIALS=$TRIALS_FAST TCP=1 RESULTS="$OUT/failover.json" \
    python3 bench/failover/failover.py "$target" - >"$OUT/failover.txt" 2>&1
fi
if step 2; then
  say "2. keepalived 0.01 s: link and freeze $TRIALS_FAST trials, SIGKILL and SIGTERM $TRIALS_SIGNAL"
  SYSTEMS=keepalived-0.01 SCENARIOS=link,stop TRIALS=$TRIALS_FAST RESULTS="$OUT/keepalived.json" \
    python3 bench/failover/failover.py "$target" - >"$OUT/keepalived.txt" 2>&1
  SYSTEMS=keepalived-0.01 SCENARIOS=kill,term TRIALS=$TRIALS_SIGNAL \
    RESULTS="$OUT/keepalived-signals.json" \
    python3 bench/failover/failover.py "$target" - >"$OUT/keepalived-signals.txt" 2>&1
fi
if step 3; then
  say "3. Kubernetes beside standalone, 5 hosts, link and freeze, $TRIALS_FAST trials"
  k8s_figures link,freeze "$TRIALS_FAST" >"$OUT/kubernetes.txt" 2>&1
fi
if step 4; then
  for quota in 10000 2000; do
    say "4. soak ${SOAK} s, quota ${quota} us per 100 ms, keepalived 0.01 s"
    DURATION=$SOAK QUOTA_US=$quota KA_ADVERT=0.01 RESULTS="$OUT/soak-$quota.json" \
      python3 bench/soak/soak.py "$target" >"$OUT/soak-$quota.txt" 2>&1
  done
fi
if step 5; then
  say "5. partition: ${SCHEDULES:-100} schedules, ${CUT:-20} cut owners, guard off and on"
  SEED=${SEED:-2323} SCHEDULES=${SCHEDULES:-100} CUT=${CUT:-20} RESULTS="$OUT/partition.json" \
    python3 bench/partition/partition.py "$target" >"$OUT/partition.txt" 2>&1
fi
if step 6; then
  say "6. SIGKILL and SIGTERM, $TRIALS_SIGNAL trials, standalone lab then Kubernetes"
  SYSTEMS=vigil-fast SCENARIOS=kill,term TRIALS=$TRIALS_SIGNAL TCP=1 \
    RESULTS="$OUT/failover-signals.json" \
    python3 bench/failover/failover.py "$target" - >"$OUT/failover-signals.txt" 2>&1
  k8s_figures kill,term "$TRIALS_SIGNAL" >"$OUT/kubernetes-signals.txt" 2>&1
fi
say "done: $OUT"
