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
bash conformance/build.sh conformance >/dev/null
gopeer="$(pwd)/conformance/.build/bin/vigil-gopeer"
# The agent is `vigil-agent` (the same code as `vigil agent`, linking only the agent), built
# as it would ship as a small daemon: release with opt-level "s", fat LTO and one codegen unit
# (its resident size is mostly mapped code, so code size is memory).
#   VIGIL_BENCH_BIN=vigil         run `vigil agent` from the full multi-command binary instead
#   VIGIL_BENCH_PLAIN_RELEASE=1   use the workspace's plain release profile
bin_name="vigil-agent"
[ "${VIGIL_BENCH_BIN:-}" = vigil ] && bin_name="vigil"
target="${CARGO_TARGET_DIR:-$(pwd)/target}/bench-gossip"
if [ "${VIGIL_BENCH_PLAIN_RELEASE:-0}" = 1 ]; then
    build="$bin_name, release"
    CARGO_TARGET_DIR="$target/plain" cargo build -q --release -p vigil --bin "$bin_name"
    vigil="$target/plain/release/$bin_name"
else
    build="$bin_name, release with opt-level s, fat LTO, 1 codegen unit"
    CARGO_PROFILE_RELEASE_OPT_LEVEL=s CARGO_PROFILE_RELEASE_LTO=fat CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1 \
        CARGO_TARGET_DIR="$target/small" cargo build -q --release -p vigil --bin "$bin_name"
    vigil="$target/small/release/$bin_name"
fi
echo "vigil build: $build"
exec python3 bench/gossip/bench.py "$vigil" "$gopeer" "$nodes" "$window"
