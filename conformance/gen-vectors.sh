#!/usr/bin/env bash
# Rebuild the conformance programs if needed and regenerate the test vectors from memberlist's
# own code:
#   tests/vectors/memberlist/vectors.json        every vector, from Debian's memberlist 0.2.2;
#   tests/vectors/memberlist/vectors-0.5.1.json  only those 0.5.1 writes differently;
#   tests/vectors/memberlist/vectors-0.7.0.json  only those 0.7.0 writes differently from both.
# The output is deterministic: a rerun must leave `git diff` empty.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dir="$(cd "$here/.." && pwd)/tests/vectors/memberlist"

bindir="$("$here/build.sh" conformance gopeer-0.5.1 gopeer-0.7.0 | tail -n 1)"
mkdir -p "$dir"

# write FILE PROGRAM ARGS...: run the generator into a temporary file first, so that a failed
# run leaves the old file intact.
write() {
    local out=$1
    shift
    local tmp
    tmp="$(mktemp "$out.XXXXXX")"
    if ! "$@" >"$tmp"; then
        rm -f "$tmp"
        echo "gen-vectors.sh: $* failed" >&2
        exit 1
    fi
    chmod 0644 "$tmp"
    mv "$tmp" "$out"
    echo "wrote $out"
}

write "$dir/vectors.json" "$bindir/vigil-conformance" vectors
write "$dir/vectors-0.5.1.json" "$bindir/vigil-conformance-0.5.1" vectors \
    -baseline "$dir/vectors.json"
write "$dir/vectors-0.7.0.json" "$bindir/vigil-conformance-0.7.0" vectors \
    -baseline "$dir/vectors.json" -baseline "$dir/vectors-0.5.1.json"
