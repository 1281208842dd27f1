#!/usr/bin/env bash
# Gossip nodes benchmark: N `vigil agent` processes and, in the same run, N Go memberlist 0.2.2
# nodes (conformance/cmd/vigil-gopeer), both with Go's LAN defaults, in a network namespace of
# their own. Prints a Markdown table: time to converge, idle CPU% and RSS per node, bytes and
# packets per second per node, and vigil/Go ratios.
#
# Usage (as root): bash bench/gossip/run.sh [nodes] [idle-window-seconds]   (default 100 30)
set -euo pipefail
cd "$(dirname "$0")/../.."
nodes=${1:-100}
window=${2:-30}
[ "$(id -u)" = 0 ] || { echo "bench/gossip/run.sh: needs root (network namespace, nftables)" >&2; exit 1; }
command -v nft >/dev/null || { echo "bench/gossip/run.sh: needs nft (apt-get install nftables)" >&2; exit 1; }
bash conformance/build.sh >/dev/null
gopeer="$(pwd)/conformance/.build/bin/vigil-gopeer"
target="${CARGO_TARGET_DIR:-$(pwd)/target}"
cargo build -q --release -p vigil
exec python3 bench/gossip/bench.py "$target/release/vigil" "$gopeer" "$nodes" "$window"
