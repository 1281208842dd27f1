#!/usr/bin/env bash
# Seeds fuzz/corpus/<target>/ with one file per Go memberlist test vector
# (tests/vectors/memberlist/vectors.json: the decoded "hex" of each vector), and
# fuzz/corpus/metallb_objects/ with a few JSON documents of MetalLB objects.
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

for target in targets:
    out_dir = os.path.join(corpus_root, target)
    os.makedirs(out_dir, exist_ok=True)
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
