#!/usr/bin/env bash
# The failover benchmark: vigil standalone against keepalived and Go memberlist, in one lab of
# five hosts and a client in network namespaces (as root). See bench/failover/README.md.
#
# Usage: sudo bash bench/failover/run.sh
#   TRIALS=20          trials per scenario (TRIALS=3 for a quick check)
#   SLOW_TRIALS=N      trials for the slow rows (keepalived 1 s, vigil lan); default TRIALS
#   SYSTEMS=a,b,..     vigil-fast,keepalived-1,keepalived-0.1,memberlist,vigil-lan (default all)
#   SCENARIOS=a,b,..   link,stop,kill,term (default all)
#   RESULTS=file.json  also write the rows there
#   CARGO_TARGET_DIR   where vigil is built (default: target/ of this checkout)
#
# Everything it starts is killed by PID and its namespaces (prefix vgfb<pid>) are deleted on
# exit, Ctrl-C included; addresses are 198.18.8.0/24 inside those namespaces only.
set -euo pipefail
cd "$(dirname "$0")/../.."

if [ "$(id -u)" -ne 0 ]; then
  echo "bench/failover: run as root (it creates network namespaces)" >&2
  exit 1
fi
for tool in ip python3 go; do
  command -v "$tool" >/dev/null || bash scripts/install-deps.sh
done
command -v keepalived >/dev/null || apt-get install -y -q keepalived >/dev/null
# Debian's package may have started its own service in the root namespace; it is not ours and
# it touches no lab namespace, so it is left alone.

target=${CARGO_TARGET_DIR:-$PWD/target}
echo "== building vigil (release) into $target" >&2
CARGO_TARGET_DIR=$target cargo build -q --release -p vigil -p vigil-l2-net
gopeer_dir=$(dirname "$(bash conformance/build.sh | tail -1)")

echo "== commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- crates || echo ' (crates/ has local changes)'), $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), load $(cut -d' ' -f1-3 /proc/loadavg), keepalived $(keepalived --version 2>&1 | head -1 | cut -d' ' -f2)" >&2
export PYTHONDONTWRITEBYTECODE=1
exec python3 bench/failover/failover.py "$target/release" "$gopeer_dir/vigil-gopeer"
