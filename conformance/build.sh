#!/usr/bin/env bash
# Build the Go side of vigil's memberlist wire-codec conformance harness.
#
# The harness needs memberlist's *unexported* encoders and decoders, so we
# cannot simply import the package.  Instead we assemble a throw-away GOPATH
# under conformance/.build/ (gitignored) holding a copy of Debian's memberlist
# 0.2.2 sources plus our own file(s) from conformance/memberlist-export/, which
# add exported wrappers inside package memberlist.  Everything else
# (go-msgpack, go-metrics, ...) comes from /usr/share/gocode.  Nothing is
# fetched from the network: GOPATH mode, GO111MODULE=off, GOPROXY=off.
#
# Also builds cmd/vigil-gopeer, a real memberlist node for vigil's mixed-cluster
# tests, next to it as .build/bin/vigil-gopeer.
#
# Prints the path of the built vigil-conformance binary on the last line of stdout.
#
#   build.sh           build if anything changed
#   build.sh --check   also run gofmt and go vet over our Go code (always rebuilds)
set -euo pipefail

check=0
case "${1:-}" in
    --check) check=1 ;;
    "") ;;
    *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
system_gopath="${VIGIL_SYSTEM_GOPATH:-/usr/share/gocode}"
upstream="$system_gopath/src/github.com/hashicorp/memberlist"
msgpack="$system_gopath/src/github.com/hashicorp/go-msgpack/codec"

build="$here/.build"
gopath="$build/gopath"
bin="$build/bin/vigil-conformance"
pkg_dir="$gopath/src/github.com/hashicorp/memberlist"
cmd_import="vigil/conformance/cmd/vigil-conformance"
cmd_dir="$gopath/src/$cmd_import"
peer_bin="$build/bin/vigil-gopeer"
peer_import="vigil/conformance/cmd/vigil-gopeer"
peer_dir="$gopath/src/$peer_import"

die() {
    echo "conformance/build.sh: $*" >&2
    exit 1
}

command -v go >/dev/null 2>&1 ||
    die "'go' not found on PATH (Debian: apt-get install golang-go)"
[ -f "$upstream/net.go" ] && [ -f "$upstream/util.go" ] ||
    die "memberlist sources not found at $upstream (Debian: apt-get install golang-github-hashicorp-memberlist-dev)"
[ -d "$msgpack" ] ||
    die "go-msgpack not found at $msgpack (Debian: apt-get install golang-github-hashicorp-go-msgpack-dev)"

# Skip the build when the binary is newer than every input.  The Go build
# cache would make a rebuild cheap too, but this keeps repeated calls from
# the Rust test-suite at a few milliseconds.
inputs=("$here/build.sh" "$here/memberlist-export" "$here/cmd" "$upstream")
if [ "$check" = 0 ] && [ -x "$bin" ] && [ -x "$peer_bin" ] &&
    [ -z "$(find "${inputs[@]}" -newer "$bin" -print -quit)" ] &&
    [ -z "$(find "${inputs[@]}" -newer "$peer_bin" -print -quit)" ]; then
    echo "$bin"
    exit 0
fi

# Fresh copy each time so that files deleted from our sources disappear too.
rm -rf "$pkg_dir" "$cmd_dir" "$peer_dir"
mkdir -p "$pkg_dir" "$cmd_dir" "$peer_dir" "$build/bin"

# Upstream package: non-test Go files, internal/ and vendor/ (0.2.2 vendors
# github.com/sean-/seed).  Tests are left out; they are not ours to vet.
find "$upstream" -maxdepth 1 -name '*.go' ! -name '*_test.go' -exec cp {} "$pkg_dir/" \;
for sub in internal vendor; do
    if [ -d "$upstream/$sub" ]; then
        cp -R "$upstream/$sub" "$pkg_dir/"
    fi
done
find "$pkg_dir" -name '*_test.go' -delete
cp "$here"/memberlist-export/*.go "$pkg_dir/"
cp "$here"/cmd/vigil-conformance/*.go "$cmd_dir/"
cp "$here"/cmd/vigil-gopeer/*.go "$peer_dir/"

export GOPATH="$gopath:$system_gopath"
export GO111MODULE=off
export GOPROXY=off
export GOFLAGS=
export GOCACHE="${VIGIL_GOCACHE:-$build/gocache}"

if [ "$check" = 1 ]; then
    unformatted="$(gofmt -l "$here/memberlist-export" "$here/cmd")"
    [ -z "$unformatted" ] || die "not gofmt-formatted: $unformatted"
    # Vet our command and the package as a whole (upstream files included,
    # since our wrappers live inside it).
    go vet "$cmd_import" "$peer_import" github.com/hashicorp/memberlist >&2 || die "go vet failed"
fi
go build -o "$bin" "$cmd_import" >&2 || die "go build failed"
go build -o "$peer_bin" "$peer_import" >&2 || die "go build of vigil-gopeer failed"
echo "$bin"
