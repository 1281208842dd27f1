#!/usr/bin/env bash
# Wire-level demo: a Go memberlist node and vigil understand each other's packets.
#
# 1. Go memberlist 0.2.2 (Debian's) sealed a compound of ten alive messages: compressed, with a
#    CRC, encrypted with AES-128-GCM. vigil opens it.
# 2. vigil seals an alive message with a key and a cluster label; Go opens it and prints what it
#    understood.
# (The main demo, a failover lab in network namespaces, is scripts/demo.sh.)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
go_bin=$(bash conformance/build.sh conformance | tail -n 1)/vigil-conformance
cargo build -q -p vigil-gossip --example wire_dump
dump=target/debug/examples/wire_dump

name=packet/compress-crc-encrypt-v1-compound-alive-10
read -r key packet < <(python3 -c '
import json, sys
for v in json.load(open("tests/vectors/memberlist/vectors.json"))["vectors"]:
    if v["name"] == sys.argv[1]:
        print(v["keys"][0], v["hex"])' "$name")
echo "== 1. Go -> vigil: ${name} ($(( ${#packet} / 2 )) bytes, key ${key})"
"$dump" open "$packet" "$key"

key2=$(python3 -c 'import os; print(os.urandom(32).hex())')
sealed=$("$dump" seal-alive vigil-demo 198.18.0.7 7946 "$key2" demo-cluster)
echo
echo "== 2. vigil -> Go: an alive from vigil-demo, AES-256-GCM, label demo-cluster ($(( ${#sealed} / 2 )) bytes)"
printf '{"name":"demo","kind":"packet","hex":"%s","keys":["%s"],"label":"demo-cluster"}\n' "$sealed" "$key2" \
  | "$go_bin" decode | python3 -c 'import json,sys; print(json.dumps(json.loads(sys.stdin.read()), indent=2))'
