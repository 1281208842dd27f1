#!/usr/bin/env bash
# Seeds fuzz/corpus/<target>/ with one file per Go memberlist test vector
# (tests/vectors/memberlist/vectors.json: the decoded "hex" of each vector), and
# fuzz/corpus/metallb_objects/ with a few JSON documents of MetalLB objects, and
# fuzz/corpus/l2_wire/ and l2_announcer/ with ARP and Neighbour Discovery frames.
#
#   fuzz/seed.sh                 # seeds wire_decode and wire_roundtrip
#   fuzz/seed.sh wire_decode     # seeds just the named targets
#
# Files are named vector-<kind>-<name> (metallb-<name> for metallb_objects); re-running
# overwrites them and leaves whatever the fuzzer added to the corpus alone.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
vectors="$here/../tests/vectors/memberlist/vectors.json"
if [ "$#" -eq 0 ]; then
    set -- wire_decode wire_roundtrip
fi

python3 - "$vectors" "$here/corpus" "$@" <<'PY'
import json, os, re, sys

vectors_path, corpus_root, targets = sys.argv[1], sys.argv[2], sys.argv[3:]
with open(vectors_path) as f:
    vectors = json.load(f)["vectors"]

# MetalLB objects as the JSON form of the metallb_objects target reads them.
pool = {"metadata": {"name": "a", "labels": {"app": "web"}},
        "spec": {"addresses": ["198.18.0.0/24", " 198.18.1.1 - 198.18.1.9 ", "::ffff:198.18.2.0/120",
                               "2001:db8::/126"],
                 "serviceAllocation": {"priority": 1, "namespaces": ["default"],
                                       "serviceSelectors": [{"matchExpressions": [
                                           {"key": "app", "operator": "In", "values": ["web"]}]}]}}}
ad = {"metadata": {"name": "l2"},
      "spec": {"ipAddressPoolSelectors": [{"matchLabels": {"app": "web"}}], "interfaces": ["eth0"],
               "nodeSelectors": [{"matchExpressions": [{"key": "kubernetes.io/hostname",
                                                        "operator": "NotIn", "values": ["n3"]}]}],
               "preferredNodeSelectors": [{"weight": 5, "preference": {"matchLabels": {"zone": "x"}}}]}}
service = {"metadata": {"name": "s0", "namespace": "default", "labels": {"app": "web"}},
           "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local"},
           "status": {"loadBalancer": {"ingress": [{"ip": "198.18.0.7"}, {"ip": "2001:db8::1"}]}}}
endpoints = {"metadata": {"name": "s0-x", "namespace": "default",
                          "labels": {"kubernetes.io/service-name": "s0"}},
             "addressType": "IPv4",
             "endpoints": [{"addresses": ["198.18.9.9"], "nodeName": "n1",
                            "conditions": {"ready": True}}]}
node = {"metadata": {"name": "n1", "labels": {"zone": "x", "kubernetes.io/hostname": "n1"}},
        "status": {"addresses": [{"type": "InternalIP", "address": "198.18.9.1"}]}}
pod = {"metadata": {"name": "speaker-1", "namespace": "metallb-system",
                    "labels": {"app": "metallb"}},
       "spec": {"nodeName": "n1", "hostNetwork": True, "containers": []},
       "status": {"podIP": "198.18.9.1"}}
metallb_seeds = {
    "all": {"pools": [pool], "ads": [ad], "services": [service], "slices": [endpoints],
            "nodes": [node], "pods": [pod], "node": "n1", "speakerSelector": "app=metallb"},
    "overlap": {"pools": [pool, {"metadata": {"name": "b"},
                                 "spec": {"addresses": ["198.18.0.128-198.18.0.130"]}}]},
    "bad-selector": {"pools": [pool], "ads": [{"metadata": {"name": "l2"}, "spec": {
        "serviceSelectors": [{"matchExpressions": [{"key": "app", "operator": "Near"}]}]}}]},
}

def checksum16(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2))
    while s > 0xffff:
        s = (s & 0xffff) + (s >> 16)
    return (~s) & 0xffff

def mac(text):
    return bytes.fromhex(text.replace(":", ""))

def ip6(text):
    import ipaddress
    return ipaddress.IPv6Address(text).packed

def arp_frame(op, sha, spa, tha, tpa, dst="ff:ff:ff:ff:ff:ff"):
    body = (b"\x00\x01\x08\x00\x06\x04" + op.to_bytes(2, "big") + mac(sha) + bytes(spa)
            + mac(tha) + bytes(tpa))
    return mac(dst) + mac(sha) + b"\x08\x06" + body

def ndisc_frame(kind, src_mac, dst_mac, src, dst, target, flags=0, option=2, hop=255):
    msg = bytes([kind, 0, 0, 0, flags, 0, 0, 0]) + ip6(target) + bytes([option, 1]) + mac(src_mac)
    pseudo = ip6(src) + ip6(dst) + len(msg).to_bytes(4, "big") + b"\0\0\0\x3a"
    c = checksum16(pseudo + msg)
    msg = msg[:2] + c.to_bytes(2, "big") + msg[4:]
    ip = (b"\x60\0\0\0" + len(msg).to_bytes(2, "big") + bytes([58, hop]) + ip6(src) + ip6(dst))
    return mac(dst_mac) + mac(src_mac) + b"\x86\xdd" + ip + msg

client, other = "02:00:00:00:cc:01", "02:00:00:00:bb:01"
l2_frames = {
    "arp-request": arp_frame(1, client, [198, 18, 0, 1], "00:00:00:00:00:00", [198, 18, 0, 100]),
    "arp-request-eth1-only": arp_frame(1, client, [198, 18, 0, 1], "00:00:00:00:00:00",
                                       [198, 18, 0, 101]),
    "arp-gratuitous-claim": arp_frame(2, other, [198, 18, 0, 100], "ff:ff:ff:ff:ff:ff",
                                      [198, 18, 0, 100]),
    "arp-probe": arp_frame(1, client, [0, 0, 0, 0], "00:00:00:00:00:00", [198, 18, 0, 100]),
    "ndp-solicit": ndisc_frame(135, client, "33:33:ff:00:01:00", "2001:db8::1",
                               "ff02::1:ff00:100", "2001:db8::100", option=1),
    "ndp-solicit-unicast": ndisc_frame(135, client, "02:00:00:00:aa:01", "2001:db8::1",
                                       "2001:db8::100", "2001:db8::100", option=1),
    "ndp-advert-claim": ndisc_frame(136, other, "33:33:00:00:00:01", "2001:db8::100", "ff02::1",
                                    "2001:db8::100", flags=0x20),
    "ndp-solicit-hop-64": ndisc_frame(135, client, "33:33:ff:00:01:00", "2001:db8::1",
                                      "ff02::1:ff00:100", "2001:db8::100", option=1, hop=64),
}

for target in targets:
    out_dir = os.path.join(corpus_root, target)
    os.makedirs(out_dir, exist_ok=True)
    if target in ("l2_wire", "l2_announcer"):
        for name, frame in l2_frames.items():
            if target == "l2_announcer":
                # One record on eth0: [control, delay_ms, len_hi, len_lo, frame...].
                frame = bytes([0, 1]) + len(frame).to_bytes(2, "big") + frame
            with open(os.path.join(out_dir, f"frame-{name}"), "wb") as f:
                f.write(frame)
        if target == "l2_announcer":
            script = b"".join(bytes([i % 2, 13]) + len(f).to_bytes(2, "big") + f
                              for i, f in enumerate(l2_frames.values()))
            with open(os.path.join(out_dir, "script-all"), "wb") as f:
                f.write(script)
        print(f"seed: {len(l2_frames)} frames -> {os.path.relpath(out_dir)}")
        continue
    if target == "metallb_objects":
        for name, doc in metallb_seeds.items():
            with open(os.path.join(out_dir, f"metallb-{name}"), "w") as f:
                json.dump(doc, f)
        print(f"seed: {len(metallb_seeds)} documents -> {os.path.relpath(out_dir)}")
        continue
    names = set()
    for v in vectors:
        stem = re.sub(r"[^A-Za-z0-9._-]+", "_", f"vector-{v['kind']}-{v['name']}")
        name, n = stem, 1
        while name in names:
            n += 1
            name = f"{stem}-{n}"
        names.add(name)
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(bytes.fromhex(v["hex"]))
    print(f"seed: {len(names)} vectors -> {os.path.relpath(out_dir)}")
PY
