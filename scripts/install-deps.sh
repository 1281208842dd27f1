#!/usr/bin/env bash
# Installs what vigil's demo and tests need on a fresh Debian machine (as root): Go and Debian's
# hashicorp/memberlist 0.2.2 (the interop peer), iproute2 and nftables (network-namespace labs),
# tcpdump and python3 (captures and report formatting). Idempotent and quick when all is there.
set -euo pipefail
want=(golang-go golang-github-hashicorp-memberlist-dev iproute2 procps nftables tcpdump python3)
missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing Debian packages: ${missing[*]} (run as root, or install them)" >&2
    exit 1
  fi
  echo "installing: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
command -v cargo >/dev/null || { echo "cargo not found: install Rust with rustup first" >&2; exit 1; }
