#!/usr/bin/env bash
# The failover benchmark: vigil standalone against keepalived and Go memberlist, in one lab of
# five hosts and a client in network namespaces (as root). See bench/failover/README.md.
#
# Usage: sudo bash bench/failover/run.sh
#   TRIALS=20          trials per scenario (TRIALS=3 for a quick check)
#   SLOW_TRIALS=N      trials for the slow rows (keepalived 1 s, vigil lan); default TRIALS
#   SYSTEMS=a,b,..     vigil-fast,keepalived-1,keepalived-0.1,keepalived-0.01,memberlist,vigil-lan
#                      (default all)
#   SCENARIOS=a,b,..   link,stop,kill,term (default all)
#   RESULTS=file.json  also write the rows there
#   CARGO_TARGET_DIR   where vigil is built (default: target/ of this checkout)
#
# Everything it starts is killed by PID and its namespaces (prefix vgfb<pid>) are deleted on
# exit, Ctrl-C included; addresses are 198.18.8.0/24 inside those namespaces only.
set -euo pipefail
cd "$(dirname "$0")/../.."

source bench/prepare.sh
bench_prepare failover "it creates network namespaces" ip python3 go
gopeer_dir=$(bash conformance/build.sh conformance | tail -1)

bench_describe
export PYTHONDONTWRITEBYTECODE=1
exec python3 bench/failover/failover.py "$target/release" "$gopeer_dir/vigil-gopeer"
