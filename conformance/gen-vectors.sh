#!/usr/bin/env bash
# Rebuild vigil-conformance if needed and regenerate
# tests/vectors/memberlist/vectors.json from memberlist 0.2.2's own code.
# The output is deterministic: a rerun must leave `git diff` empty.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="$here/../tests/vectors/memberlist/vectors.json"

bin="$("$here/build.sh" conformance | tail -n 1)/vigil-conformance"
mkdir -p "$(dirname "$out")"
# Write to a temporary file first so a failed run leaves the old file intact.
tmp="$(mktemp "$out.XXXXXX")"
trap 'rm -f "$tmp"' EXIT
"$bin" vectors >"$tmp"
chmod 0644 "$tmp"
mv "$tmp" "$out"
trap - EXIT
echo "wrote $(cd "$(dirname "$out")" && pwd)/$(basename "$out")"
