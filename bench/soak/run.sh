#!/usr/bin/env bash
# The soak: vigil standalone (profile fast) and keepalived (advert 0.1 s) side by side on five
# hosts with 5% random packet loss on every host and one CPU-starved host, for DURATION seconds
# (default 600), as root. Counts false failovers and gossip false positives. See README.md.
#
# Usage: sudo bash bench/soak/run.sh
#   DURATION=600       seconds of watching (DURATION=60 for a quick check)
#   LOSS_PERCENT=5     random drop in and out on every host (nftables numgen)
#   QUOTA_US=10000     CPU quota of the starved host's daemons per 100 ms period
#   RESULTS=file.json  also write the report there
#   CARGO_TARGET_DIR   where vigil is built (default: target/ of this checkout)
#
# Everything it starts is killed by PID, its namespaces (prefix vgsk<pid>) deleted and its
# cgroup removed on exit, Ctrl-C included; addresses are 198.18.8.0/24 in those namespaces.
set -euo pipefail
cd "$(dirname "$0")/../.."

if [ "$(id -u)" -ne 0 ]; then
  echo "bench/soak: run as root (it creates network namespaces and a cgroup)" >&2
  exit 1
fi
for tool in ip python3 nft; do
  command -v "$tool" >/dev/null || bash scripts/install-deps.sh
done
command -v keepalived >/dev/null || apt-get install -y -q keepalived >/dev/null

target=${CARGO_TARGET_DIR:-$PWD/target}
echo "== building vigil (release) into $target" >&2
CARGO_TARGET_DIR=$target cargo build -q --release -p vigil -p vigil-l2-net
echo "== commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- crates || echo ' (crates/ has local changes)'), $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), load $(cut -d' ' -f1-3 /proc/loadavg), keepalived $(keepalived --version 2>&1 | head -1 | cut -d' ' -f2)" >&2
export PYTHONDONTWRITEBYTECODE=1
exec python3 bench/soak/soak.py "$target/release"
