#!/usr/bin/env bash
# Partition and heal schedules: vigil standalone (profile fast, six VIPs) on five hosts in
# network namespaces, cut and healed at random and by pulling an owner's link, without and with
# the majority guard, while a client asks ARP for every VIP every 5 ms (as root). Counts the
# MACs answering each question. See README.md.
#
# Usage: sudo bash bench/partition/run.sh
#   SCHEDULES=100      random partition-and-heal schedules per guard setting
#   CUT=20             trials of one VIP owner's link cut for 2 s, per guard setting
#   SEED=N             the schedules' seed (default: the time; printed either way)
#   GUARD=off,on       without and/or with election.expected_members: 5
#   POST_MS=4000       how long the client keeps asking after each heal
#   RESULTS=file.json  also write every schedule's figures there
#   CARGO_TARGET_DIR   where vigil is built (default: target/ of this checkout)
#
# Everything it starts is killed by PID and its namespaces (prefix vgpt<pid>) are deleted on
# exit, Ctrl-C included; addresses are 198.18.8.0/24 inside those namespaces only (the
# watches' ARP sender addresses, 198.18.9.1 onwards, exist only in the questions).
set -euo pipefail
cd "$(dirname "$0")/../.."

source bench/prepare.sh
bench_prepare partition "it creates network namespaces" ip python3 nft
bench_describe
export PYTHONDONTWRITEBYTECODE=1
exec python3 bench/partition/partition.py "$target/release"
