#!/usr/bin/env bash
# Captures the Linux kernel's own ARP and Neighbour Discovery frames between two network
# namespaces joined by a veth pair, into kernel.pcap. Needs root, iproute2 and tcpdump.
# Touches nothing outside the two namespaces it creates (and deletes, even on failure).
# Addresses: 198.18.1.0/24 and 2001:db8:1::/64. MACs are fixed so that the capture is stable.
set -euo pipefail
cd "$(dirname "$0")"
P="vgl2cap-$$"
X="$P-x" Y="$P-y"
TCPDUMP_PID=""
cleanup() {
    [ -n "$TCPDUMP_PID" ] && kill "$TCPDUMP_PID" 2>/dev/null && wait "$TCPDUMP_PID" 2>/dev/null
    ip netns del "$X" 2>/dev/null || true
    ip netns del "$Y" 2>/dev/null || true
}
trap cleanup EXIT

ip netns add "$X"
ip netns add "$Y"
ip link add veth0 netns "$X" address 02:00:00:00:01:01 type veth \
    peer name veth0 netns "$Y" address 02:00:00:00:01:02
for ns in "$X" "$Y"; do
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.veth0.accept_dad=1
    ip netns exec "$ns" sysctl -qw net.ipv4.conf.veth0.arp_notify=1
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.veth0.ndisc_notify=1
    # Reach PROBE (unicast solicitations) quickly once an entry is stale.
    ip netns exec "$ns" sysctl -qw net.ipv4.neigh.veth0.delay_first_probe_time=1
    ip netns exec "$ns" sysctl -qw net.ipv6.neigh.veth0.delay_first_probe_time=1
    ip -n "$ns" link set veth0 addrgenmode none
done
ip -n "$X" addr add 198.18.1.1/24 dev veth0
ip -n "$X" addr add 2001:db8:1::1/64 dev veth0 nodad
ip -n "$X" link set veth0 up

ip netns exec "$X" tcpdump -i veth0 -U -s 0 -w kernel.pcap \
    'arp or (icmp6 and (ip6[40] == 135 or ip6[40] == 136))' 2>/dev/null &
TCPDUMP_PID=$!
sleep 1

# Y comes up with its addresses: DAD probe (NS from ::), then unsolicited NA (ndisc_notify).
ip -n "$Y" addr add 198.18.1.2/24 dev veth0
ip -n "$Y" addr add 2001:db8:1::2/64 dev veth0
ip -n "$Y" link set veth0 up
sleep 3
# A MAC change with arp_notify / ndisc_notify: gratuitous ARP and unsolicited NA.
ip -n "$Y" link set veth0 address 02:00:00:00:01:02
ip netns exec "$Y" ip link set veth0 address 02:00:00:00:01:03
ip netns exec "$Y" ip link set veth0 address 02:00:00:00:01:02
sleep 1

# X resolves Y: broadcast ARP request and reply, multicast NS and solicited NA.
send() { ip netns exec "$X" python3 -c "
import socket,sys
fam = socket.AF_INET6 if ':' in sys.argv[1] else socket.AF_INET
socket.socket(fam, socket.SOCK_DGRAM).sendto(b'v', (sys.argv[1], 9))" "$1"; }
send 198.18.1.2
send 2001:db8:1::2
sleep 3
# Entries go stale; new traffic makes X re-check Y with unicast probes (ARP and NS).
ip -n "$X" neigh change 198.18.1.2 dev veth0 nud stale
ip -n "$X" neigh change 2001:db8:1::2 dev veth0 nud stale
send 198.18.1.2
send 2001:db8:1::2
sleep 1
send 2001:db8:1::2
sleep 3
kill "$TCPDUMP_PID"
wait "$TCPDUMP_PID" 2>/dev/null || true
TCPDUMP_PID=""
tcpdump -r kernel.pcap -n -e -v 2>/dev/null > kernel.txt
cat kernel.txt
