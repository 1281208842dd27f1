#!/usr/bin/env bash
# Seeds fuzz/corpus/<target>/ with one file per Go memberlist test vector
# (tests/vectors/memberlist/vectors.json: the decoded "hex" of each vector).
#
#   fuzz/seed.sh                 # seeds wire_decode and wire_roundtrip
#   fuzz/seed.sh wire_decode     # seeds just the named targets
#
# Files are named vector-<kind>-<name>; re-running overwrites them and leaves whatever the
# fuzzer added to the corpus alone.
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

for target in targets:
    out_dir = os.path.join(corpus_root, target)
    os.makedirs(out_dir, exist_ok=True)
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
