#!/usr/bin/env bash
# The soak: vigil standalone (profile fast) and keepalived (advert KA_ADVERT) side by side on five
# hosts with 5% random packet loss on every host and one CPU-starved host, for DURATION seconds
# (default 600), as root. Counts false failovers and gossip false positives. See README.md.
#
# Usage: sudo bash bench/soak/run.sh
#   DURATION=600       seconds of watching (DURATION=60 for a quick check)
#   LOSS_PERCENT=5     random drop in and out on every host (nftables numgen)
#   QUOTA_US=10000     CPU quota of the starved host's daemons per 100 ms period
#   KA_ADVERT=0.1      keepalived's advert_int in seconds (VRRPv3; 0.01 is the shortest it takes)
#   RESULTS=file.json  also write the report there
#   CARGO_TARGET_DIR   where vigil is built (default: target/ of this checkout)
#
# Everything it starts is killed by PID, its namespaces (prefix vgsk<pid>) deleted and its
# cgroup removed on exit, Ctrl-C included; addresses are 198.18.8.0/24 in those namespaces.
set -euo pipefail
cd "$(dirname "$0")/../.."

source bench/prepare.sh
bench_prepare soak "it creates network namespaces and a cgroup" ip python3 nft
bench_describe
export PYTHONDONTWRITEBYTECODE=1
exec python3 bench/soak/soak.py "$target/release"
