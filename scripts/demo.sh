#!/usr/bin/env bash
# vigil's demo: a three-host failover lab in network namespaces (as root).
#
# Builds vigil, makes three hosts and a client on a bridge that lives in a namespace of its own
# (198.18.0.0/24, nothing outside the lab is touched), starts `vigil standalone` on each host
# with encrypted gossip, shows the cluster and which host owns the VIP 198.18.0.100, then kills
# the owner's speaker with SIGKILL and measures, from the client, how long the VIP went
# unanswered before another host's MAC answered ARP. Everything is torn down on exit, Ctrl-C
# included. This becomes `vigil lab` later.
#
# Usage: bash scripts/demo.sh            (VIGIL_DEMO_PROFILE=lan to see Go's default timing)
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
  echo "demo: run as root (it creates network namespaces)" >&2
  exit 1
fi
bash scripts/install-deps.sh
command -v ip >/dev/null || { echo "demo: iproute2's ip is missing" >&2; exit 1; }

echo "== building vigil (release)"
cargo build -q --release -p vigil -p vigil-l2-net
bin=$PWD/target/release
profile=${VIGIL_DEMO_PROFILE:-fast}
vip=198.18.0.100
tag="vgdemo$$"
work=$(mktemp -d)
pids=()

cleanup() {
  set +e
  exec 2>/dev/null # no "Killed" notices from the shell
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null; done
  for ns in "$tag-br" "$tag-c" "$tag-h1" "$tag-h2" "$tag-h3"; do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

in_ns() { local ns=$1; shift; ip netns exec "$ns" "$@"; }

echo "== lab: bridge namespace, client 198.18.0.2, hosts 198.18.0.11-13"
ip netns add "$tag-br"
ip -n "$tag-br" link add br0 type bridge
ip -n "$tag-br" link set br0 up
plug() { # namespace, port name, address
  ip netns add "$1"
  ip -n "$1" link set lo up
  ip link add eth0 netns "$1" type veth peer name "$2" netns "$tag-br"
  ip -n "$tag-br" link set "$2" master br0 up
  ip -n "$1" addr add "$3" dev eth0
  ip -n "$1" link set eth0 up
}
plug "$tag-c" pc 198.18.0.2/24
for i in 1 2 3; do plug "$tag-h$i" "p$i" "198.18.0.1$i/24"; done

"$bin/vigil" keygen --out "$work/keyring.json" >/dev/null
declare -A mac_of
for i in 1 2 3; do
  mac_of[$(ip -n "$tag-h$i" -o link show eth0 | grep -o 'link/ether [0-9a-f:]*' | cut -d' ' -f2)]="host-$i"
  cat > "$work/host-$i.yaml" <<YAML
node:
  name: host-$i
gossip:
  bind: 198.18.0.1$i:7946
  seeds: [198.18.0.11, 198.18.0.12, 198.18.0.13]
  profile: $profile
  keyring_file: $work/keyring.json
interfaces:
  include: [eth0]
http:
  listen: 127.0.0.1:7472
services:
  - name: web
    vips: [$vip]
YAML
  # `ip netns exec` becomes vigil itself, so $! is the speaker's PID.
  ip netns exec "$tag-h$i" "$bin/vigil" standalone --config "$work/host-$i.yaml" 2>"$work/host-$i.log" &
  pids+=($!)
done

arp_owner() { # prints the MAC that answers ARP for the VIP, or nothing
  in_ns "$tag-c" "$bin/vigil-l2-client" arp --iface eth0 --src-ip 198.18.0.2 --target "$vip" \
    --count 1 --wait-ms "${1:-40}" 2>/dev/null | grep -o 'mac=[0-9a-f:]*' | head -1 | cut -d= -f2 || true
}

status_owner() { # the owner host $1 reports for the VIP, when it sees all three hosts alive
  local out
  out=$(in_ns "$tag-h$1" "$bin/vigil" status 2>/dev/null) || return 0
  [ "$(grep -c ' alive ' <<<"$out")" = 3 ] || return 0
  awk -v vip="$vip" '$1 == vip { print $3 }' <<<"$out"
}

echo "== waiting until every host sees the others and agrees on the owner (at most 30 s)"
owner="" owner_mac=""
for _ in $(seq 300); do
  o1=$(status_owner 1) o2=$(status_owner 2) o3=$(status_owner 3)
  if [ -n "$o1" ] && [ "$o1" = "$o2" ] && [ "$o2" = "$o3" ]; then
    mac=$(arp_owner 50)
    if [ -n "$mac" ] && [ "${mac_of[$mac]:-}" = "$o1" ]; then owner=$o1 owner_mac=$mac; break; fi
  fi
  sleep 0.1
done
[ -n "$owner" ] || { echo "demo: the cluster did not settle; logs in $work" >&2; tail -5 "$work"/*.log >&2; exit 1; }
in_ns "$tag-h1" "$bin/vigil" status
echo
echo "== the client sees $vip at $owner_mac ($owner), the elected owner"

n=${owner#host-}
echo "== SIGKILL of $owner's speaker; the client keeps asking for $vip (each question waits 30 ms)"
kill -9 "${pids[$((n - 1))]}"
wait "${pids[$((n - 1))]}" 2>/dev/null || true
killed=$(date +%s%N)
new_mac=""
for _ in $(seq 1000); do # bounded: at most ~1000 questions
  mac=$(arp_owner 30)
  if [ -n "$mac" ] && [ "$mac" != "$owner_mac" ]; then new_mac=$mac; break; fi
  [ $(( ($(date +%s%N) - killed) / 1000000 )) -gt 15000 ] && break
done
answered=$(date +%s%N)
if [ -z "$new_mac" ]; then
  echo "demo: no other host took $vip over within 15 s" >&2
  in_ns "$tag-h$(( n % 3 + 1 ))" "$bin/vigil" status >&2 || true
  tail -3 "$work"/host-*.log >&2
  exit 1
fi
echo "== $vip now answers from $new_mac (${mac_of[$new_mac]}) after $(( (answered - killed) / 1000000 )) ms without an answer"
echo "   (profile $profile; measured by the client, so it includes up to one question's 30 ms wait)"
survivor=1; [ "$n" = 1 ] && survivor=2
sleep 1
in_ns "$tag-h$survivor" "$bin/vigil" status || true
echo "== tearing the lab down"
