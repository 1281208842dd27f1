#!/usr/bin/env bash
# L2 announcer benchmark: ARP request-to-reply latency (p50, p99) and the highest request rate
# answered with no drops, over a veth pair between two network namespaces.
#
#   sudo bash bench/l2/run.sh [samples] [rates]
#
# Builds the release binaries, puts the announcer (vigil-l2-announce, owning 198.18.0.100) in
# one namespace and the load generator (vigil-l2-client bench) in the other, prints a table and
# removes everything it made, also on failure. Every loop is bounded: `samples` closed-loop
# requests (default 2000, each waiting at most 100 ms) and one 1-second window per rate.
set -euo pipefail
cd "$(dirname "$0")/../.."
SAMPLES="${1:-2000}"
RATES="${2:-1000,2000,5000,10000,20000,50000,70000,100000,150000,200000}"
TARGET_DIR="${CARGO_TARGET_DIR:-target}"

cargo build --release --quiet -p vigil-netlab --bins
BIN="$TARGET_DIR/release"

P="vgl2bench-$$"
A="$P-a" C="$P-c"
STATS="/tmp/$P.stats"
ANNOUNCER_PID=""
cleanup() {
    if [ -n "$ANNOUNCER_PID" ]; then kill "$ANNOUNCER_PID" 2>/dev/null || true; wait "$ANNOUNCER_PID" 2>/dev/null || true; fi
    ip netns del "$A" 2>/dev/null || true
    ip netns del "$C" 2>/dev/null || true
    rm -f "$STATS" "$STATS.tmp"
}
trap cleanup EXIT

ip netns add "$A"
ip netns add "$C"
ip link add eth0 netns "$A" type veth peer name eth0 netns "$C"
ip -n "$A" link set eth0 up
ip -n "$C" link set eth0 up
ip -n "$C" addr add 198.18.0.1/24 dev eth0

ip netns exec "$A" "$BIN/vigil-l2-announce" --vip 198.18.0.100 --iface eth0 \
    --stats-file "$STATS" </dev/null >/dev/null &
ANNOUNCER_PID=$!
for _ in $(seq 100); do
    grep -q '^interfaces=eth0$' "$STATS" 2>/dev/null && break
    sleep 0.1
done
grep -q '^interfaces=eth0$' "$STATS" || { echo "announcer did not start" >&2; exit 1; }

OUT=$(ip netns exec "$C" "$BIN/vigil-l2-client" bench --iface eth0 --src-ip 198.18.0.1 \
    --target 198.18.0.100 --samples "$SAMPLES" --rates "$RATES" --window-ms 1000)
echo "$OUT" >&2

field() { echo "$OUT" | grep "^$1 " | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1; }
echo
echo "kernel $(uname -r), $(nproc) cores, $(date -u +%Y-%m-%d)"
echo
echo "| measure | value |"
echo "|---|---|"
echo "| ARP request-to-reply latency p50 | $(field latency p50_us) µs |"
echo "| ARP request-to-reply latency p99 | $(field latency p99_us) µs |"
echo "| latency samples (lost) | $(field latency samples) ($(field latency lost)) |"
echo "$OUT" | grep '^rate ' | while read -r line; do
    rate=$(echo "$line" | tr ' ' '\n' | sed -n 's/^target_pps=//p')
    answered=$(echo "$line" | tr ' ' '\n' | sed -n 's/^answered=//p')
    sent=$(echo "$line" | tr ' ' '\n' | sed -n 's/^sent=//p')
    echo "| $rate req/s for 1 s | $answered of $sent answered |"
done
echo "| highest rate with no drops | $(echo "$OUT" | sed -n 's/^max_no_drop_pps=//p') req/s |"
