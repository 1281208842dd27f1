#!/usr/bin/env bash
# Codec benchmark: vigil's gossip::wire against Go memberlist 0.2.2, in one run on one machine.
# Prints a Markdown table of ns per message (encode and decode) and Go/vigil ratios.
# Usage: bench/codec.sh [seconds-per-case]   (default 0.5)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-0.5}
go_bin=$(bash conformance/build.sh conformance | tail -n 1)/vigil-conformance
cargo build -q --release -p vigil-gossip --example codec_bench
rust_out=$(target/release/examples/codec_bench "$secs")
go_out=$("$go_bin" bench -benchtime "${secs}s")
python3 - "$rust_out" "$go_out" <<'PY'
import json, sys
rust = {r["case"]: r for r in map(json.loads, sys.argv[1].splitlines())}
go = {r["case"]: r for r in map(json.loads, sys.argv[2].splitlines())}
print("| case | vigil encode ns | Go encode ns | Go/vigil | vigil decode ns | Go decode ns | Go/vigil |")
print("|---|---:|---:|---:|---:|---:|---:|")
for case in rust:
    r, g = rust[case], go.get(case)
    if g is None:
        continue
    print(f"| {case} | {r['encode_ns']:.0f} | {g['encode_ns']:.0f} | {g['encode_ns']/r['encode_ns']:.1f}x "
          f"| {r['decode_ns']:.0f} | {g['decode_ns']:.0f} | {g['decode_ns']/r['decode_ns']:.1f}x |")
PY
