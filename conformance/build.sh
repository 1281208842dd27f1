#!/usr/bin/env bash
# Every Go build of vigil's test peers happens here, each printed with what it builds and how
# long it took. Binaries land in conformance/.build/bin/; the last line of stdout is that
# directory.
#
# Two Go toolchains, kept apart by full path:
# - Debian's Go 1.19 (/usr/lib/go-1.19/bin/go, package golang-go) builds the memberlist 0.2.2
#   programs in GOPATH mode over Debian's golang-github-hashicorp-memberlist-dev, offline.
# - The machine's modern Go (>= 1.26; `go` on the PATH, or VIGIL_GO) builds everything in module
#   mode from the Go module proxy: memberlist 0.5.1 and 0.7.0 peers, vigil-testenv
#   (kube-apiserver + etcd), MetalLB's speaker and controller.
# Module-mode builds share fixed caches outside the checkout, so a second run (CI on the same
# machine, a new clone) reuses them: VIGIL_GO_CACHE (default /var/cache/vigil/go) holds mod/
# (GOMODCACHE) and build/ (GOCACHE).
#
#   build.sh [--check] [TARGET...]   build the targets (default: all) if their inputs changed
#   --check                          also gofmt and go vet our Go code
#
# Targets: conformance (vigil-conformance, vigil-gopeer on 0.2.2), gopeer-0.5.1, gopeer-0.7.0,
# testenv, metallb, metallb-alloc (MetalLB's allocator behind a probe), kubectl, helm (the
# clients the deploy tests run over deploy/kubernetes and deploy/helm), promtool (Prometheus's
# rule evaluator, taken prebuilt from Debian's prometheus package).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="$here/.build"
bindir="$build/bin"
check=0
targets=()
for arg in "$@"; do
    case "$arg" in
        --check) check=1 ;;
        -*) echo "usage: $0 [--check] [TARGET...]" >&2; exit 2 ;;
        *) targets+=("$arg") ;;
    esac
done
all_targets=(conformance gopeer-0.5.1 gopeer-0.7.0 testenv metallb metallb-alloc kubectl helm promtool)
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")

die() {
    echo "conformance/build.sh: $*" >&2
    exit 1
}
say() { echo "conformance/build.sh: $*" >&2; }

go119=/usr/lib/go-1.19/bin/go
cache_root="${VIGIL_GO_CACHE:-/var/cache/vigil/go}"

# The modern toolchain: VIGIL_GO, else `go` on the PATH, else /usr/local/go/bin/go; it must
# not be Debian's 1.19.
modern_go() {
    local g
    for g in "${VIGIL_GO:-}" "$(command -v go || true)" /usr/local/go/bin/go; do
        [ -n "$g" ] && [ -x "$g" ] || continue
        local v
        v="$("$g" env GOVERSION 2>/dev/null || true)"
        case "$v" in
            go1.2[6-9]* | go1.[3-9][0-9]*) echo "$g"; return 0 ;;
        esac
    done
    return 1
}

# Environment for a module-mode build with the shared caches.
module_env() {
    local g
    g="$(modern_go)" || die "no Go >= 1.26 found (set VIGIL_GO, or put it on the PATH)"
    mkdir -p "$cache_root/mod" "$cache_root/build"
    export GOMODCACHE="$cache_root/mod" GOCACHE="$cache_root/build" GO111MODULE=on GOFLAGS=-mod=mod
    export GOTOOLCHAIN=local
    unset GOPATH
    GO="$g"
}

# True when $1 (a binary) exists and is newer than every other argument (files or folders).
up_to_date() {
    local out=$1
    shift
    [ -x "$out" ] && [ -z "$(find "$@" -newer "$out" -print -quit 2>/dev/null)" ]
}

# Runs a named build step, timing it.
timed() {
    local name=$1
    shift
    local start=$SECONDS
    say "$name: building"
    "$@" || die "$name: build failed"
    say "$name: built in $((SECONDS - start)) s"
}

# --- conformance: vigil-conformance and vigil-gopeer on Debian's memberlist 0.2.2 -------------
#
# The harness needs memberlist's *unexported* encoders and decoders, so we cannot simply import
# the package. Instead we assemble a throw-away GOPATH under .build/ holding a copy of Debian's
# memberlist 0.2.2 sources plus our own files from memberlist-export/, which add exported
# wrappers inside package memberlist. Everything else (go-msgpack, go-metrics, ...) comes from
# /usr/share/gocode. Nothing is fetched from the network: GOPATH mode, GO111MODULE=off,
# GOPROXY=off.
build_conformance() {
    local system_gopath="${VIGIL_SYSTEM_GOPATH:-/usr/share/gocode}"
    local upstream="$system_gopath/src/github.com/hashicorp/memberlist"
    local msgpack="$system_gopath/src/github.com/hashicorp/go-msgpack/codec"
    local gopath="$build/gopath"
    local bin="$bindir/vigil-conformance" peer_bin="$bindir/vigil-gopeer"
    local pkg_dir="$gopath/src/github.com/hashicorp/memberlist"
    local cmd_import="vigil/conformance/cmd/vigil-conformance"
    local peer_import="vigil/conformance/cmd/vigil-gopeer"
    local cmd_dir="$gopath/src/$cmd_import" peer_dir="$gopath/src/$peer_import"

    [ -x "$go119" ] || die "conformance: $go119 not found (Debian: apt-get install golang-go)"
    [ -f "$upstream/net.go" ] && [ -f "$upstream/util.go" ] ||
        die "conformance: memberlist sources not found at $upstream (Debian: apt-get install golang-github-hashicorp-memberlist-dev)"
    [ -d "$msgpack" ] ||
        die "conformance: go-msgpack not found at $msgpack (Debian: apt-get install golang-github-hashicorp-go-msgpack-dev)"

    local inputs=("$here/build.sh" "$here/memberlist-export" "$here/cmd/vigil-conformance" "$here/cmd/vigil-gopeer" "$upstream")
    if [ "$check" = 0 ] && up_to_date "$bin" "${inputs[@]}" && up_to_date "$peer_bin" "${inputs[@]}"; then
        say "conformance: up to date"
        return 0
    fi
    # Fresh copy each time so that files deleted from our sources disappear too.
    rm -rf "$pkg_dir" "$cmd_dir" "$peer_dir"
    mkdir -p "$pkg_dir" "$cmd_dir" "$peer_dir" "$bindir"
    # Upstream package: non-test Go files, internal/ and vendor/ (0.2.2 vendors
    # github.com/sean-/seed). Tests are left out; they are not ours to vet.
    find "$upstream" -maxdepth 1 -name '*.go' ! -name '*_test.go' -exec cp {} "$pkg_dir/" \;
    local sub
    for sub in internal vendor; do
        [ -d "$upstream/$sub" ] && cp -R "$upstream/$sub" "$pkg_dir/"
    done
    find "$pkg_dir" -name '*_test.go' -delete
    cp "$here"/memberlist-export/*.go "$here"/memberlist-export/0.2.2/*.go "$pkg_dir/"
    cp "$here"/cmd/vigil-conformance/*.go "$cmd_dir/"
    cp "$here"/cmd/vigil-gopeer/*.go "$peer_dir/"
    (
        export GOPATH="$gopath:$system_gopath" GO111MODULE=off GOPROXY=off GOFLAGS= GOTOOLCHAIN=local
        export GOCACHE="${VIGIL_GOCACHE:-$build/gocache}"
        if [ "$check" = 1 ]; then
            local unformatted
            unformatted="$("${go119%/go}/gofmt" -l "$here"/memberlist-export/*.go "$here/memberlist-export/0.2.2" "$here/cmd/vigil-conformance" "$here/cmd/vigil-gopeer")"
            [ -z "$unformatted" ] || die "conformance: not gofmt-formatted: $unformatted"
            # Vet our commands and the package as a whole (upstream files included, since our
            # wrappers live inside it).
            "$go119" vet "$cmd_import" "$peer_import" github.com/hashicorp/memberlist >&2 || die "conformance: go vet failed"
        fi
        timed "conformance: vigil-conformance (Go 1.19, memberlist 0.2.2)" "$go119" build -o "$bin" "$cmd_import" >&2
        timed "conformance: vigil-gopeer (Go 1.19, memberlist 0.2.2)" "$go119" build -o "$peer_bin" "$peer_import" >&2
    )
}

# --- gopeer-0.5.1, gopeer-0.7.0: memberlist peers in module mode --------------------------------
#
# Same programs as the conformance target, against a release from the module proxy. The build
# module is assembled under .build/modules/memberlist-VERSION/: our committed go.mod and go.sum
# (conformance/modules/memberlist-VERSION/, which require the release and replace it with
# ./memberlist), our commands, and in memberlist/ a copy of the release's sources from the module
# cache plus memberlist-export/*.go and memberlist-export/0.5-0.7/*.go (the variant for
# go-msgpack v2 and labels). The copied sources are never committed. -mod=readonly: the build
# fails rather than change the committed go.mod/go.sum (VIGIL_GO_TIDY=1 re-tidies them and
# writes them back, for a version bump).
build_gopeer() {
    local version=$1
    local name="gopeer-$version"
    local modsrc="$here/modules/memberlist-$version"
    local dir="$build/modules/memberlist-$version"
    local peer_bin="$bindir/vigil-gopeer-$version" conf_bin="$bindir/vigil-conformance-$version"
    local shims="$here/memberlist-export/0.5-0.7"
    [ -f "$modsrc/go.mod" ] || die "$name: $modsrc/go.mod missing"
    module_env
    local upstream
    upstream="$GOMODCACHE/github.com/hashicorp/memberlist@v$version"
    local inputs=("$here/build.sh" "$modsrc" "$here/memberlist-export" "$here/cmd/vigil-conformance" "$here/cmd/vigil-gopeer")
    if [ "$check" = 0 ] && [ -d "$upstream" ] && up_to_date "$peer_bin" "${inputs[@]}" "$upstream" &&
        up_to_date "$conf_bin" "${inputs[@]}" "$upstream"; then
        say "$name: up to date"
        return 0
    fi
    if [ ! -f "$upstream/net.go" ]; then
        timed "$name: download github.com/hashicorp/memberlist@v$version" \
            "$GO" mod download "github.com/hashicorp/memberlist@v$version" >&2
    fi
    # Fresh copy each time so that files deleted from our sources disappear too.
    rm -rf "$dir"
    mkdir -p "$dir/memberlist" "$dir/cmd/vigil-conformance" "$dir/cmd/vigil-gopeer" "$bindir"
    find "$upstream" -maxdepth 1 \( -name '*.go' ! -name '*_test.go' -o -name go.mod \) -exec cp {} "$dir/memberlist/" \;
    [ -d "$upstream/internal" ] && cp -R "$upstream/internal" "$dir/memberlist/"
    find "$dir/memberlist" -name '*_test.go' -delete
    chmod -R u+w "$dir/memberlist" # the module cache is read-only
    cp "$here"/memberlist-export/*.go "$shims"/*.go "$dir/memberlist/"
    cp "$here"/cmd/vigil-conformance/*.go "$dir/cmd/vigil-conformance/"
    cp "$here"/cmd/vigil-gopeer/*.go "$dir/cmd/vigil-gopeer/"
    cp "$modsrc/go.mod" "$dir/go.mod"
    [ -f "$modsrc/go.sum" ] && cp "$modsrc/go.sum" "$dir/go.sum"
    (
        cd "$dir"
        if [ "${VIGIL_GO_TIDY:-0}" = 1 ] || [ ! -f "$modsrc/go.sum" ]; then
            timed "$name: go mod tidy (writes $modsrc/go.mod, go.sum)" "$GO" mod tidy >&2
            cp go.mod go.sum "$modsrc/"
        fi
        export GOFLAGS=-mod=readonly
        if [ "$check" = 1 ]; then
            local unformatted
            unformatted="$("${GO%/go}/gofmt" -l "$shims" "$here/cmd/vigil-conformance" "$here/cmd/vigil-gopeer")"
            [ -z "$unformatted" ] || die "$name: not gofmt-formatted: $unformatted"
            # The package as a whole too (upstream files included), since our wrappers live in it.
            "$GO" vet ./cmd/vigil-conformance ./cmd/vigil-gopeer github.com/hashicorp/memberlist >&2 ||
                die "$name: go vet failed"
        fi
        timed "$name: vigil-conformance-$version (Go $("$GO" env GOVERSION), memberlist $version)" \
            "$GO" build -trimpath -o "$conf_bin" ./cmd/vigil-conformance >&2
        timed "$name: vigil-gopeer-$version (Go $("$GO" env GOVERSION), memberlist $version)" \
            "$GO" build -trimpath -o "$peer_bin" ./cmd/vigil-gopeer >&2
    )
}

# --- testenv: vigil-testenv (kube-apiserver v1.37.2 + embedded etcd, in one process) -----------
#
# conformance/testenv/ is a Go module of its own (never mixed with the other Go code): it
# requires k8s.io/kubernetes and replaces each of its 33 staging modules (which k8s.io/kubernetes
# itself pins at the placeholder v0.0.0) with the matching published v0.X.Y release. One static
# binary (CGO_ENABLED=0), stripped (-s -w), with the Kubernetes version stamped in as the
# release's own build would (otherwise /version says v0.0.0-master). `go vet` (with --check)
# and `go build` use the same build flags, so vet's compile of the ~2,000 dependency packages is
# the build's too (a cold build took 15-21 minutes on 2 shared cores; a warm one, the link). The
# fixed GOMODCACHE matters: without -trimpath a cache entry names its source directory.
# -mod=readonly: the build fails rather than change the committed go.mod/go.sum
# (VIGIL_GO_TIDY=1 re-tidies them, for a version bump).
build_testenv() {
    local modsrc="$here/testenv" bin="$bindir/vigil-testenv"
    [ -f "$modsrc/go.mod" ] && [ -f "$modsrc/go.sum" ] || die "testenv: $modsrc/go.mod or go.sum missing"
    module_env
    local inputs=("$here/build.sh" "$modsrc")
    if [ "$check" = 0 ] && up_to_date "$bin" "${inputs[@]}"; then
        say "testenv: up to date"
        return 0
    fi
    local k8s etcd
    k8s="$(sed -n 's/^[[:space:]]*k8s\.io\/kubernetes \(v[^ ]*\).*/\1/p' "$modsrc/go.mod")"
    etcd="$(sed -n 's/^[[:space:]]*go\.etcd\.io\/etcd\/server\/v3 \(v[^ ]*\).*/\1/p' "$modsrc/go.mod")"
    [[ "$k8s" =~ ^v([0-9]+)\.([0-9]+)\. ]] || die "testenv: no k8s.io/kubernetes version in $modsrc/go.mod"
    local pkg=k8s.io/component-base/version
    local ldflags="-s -w -X $pkg.gitVersion=$k8s -X $pkg.gitMajor=${BASH_REMATCH[1]}"
    ldflags+=" -X $pkg.gitMinor=${BASH_REMATCH[2]} -X $pkg.gitTreeState=clean"
    (
        cd "$modsrc"
        export CGO_ENABLED=0
        if [ "${VIGIL_GO_TIDY:-0}" = 1 ]; then
            timed "testenv: go mod tidy" "$GO" mod tidy >&2
        fi
        export GOFLAGS=-mod=readonly
        if [ "$check" = 1 ]; then
            local unformatted
            unformatted="$("${GO%/go}/gofmt" -l .)"
            [ -z "$unformatted" ] || die "testenv: not gofmt-formatted: $unformatted"
            "$GO" vet . >&2 || die "testenv: go vet failed"
        fi
        timed "testenv: vigil-testenv (Go $("$GO" env GOVERSION), kubernetes $k8s, etcd $etcd)" \
            "$GO" build -ldflags "$ldflags" -o "$bin" . >&2
    )
}

# --- metallb: MetalLB's speaker and controller from the module proxy ---------------------------
#
# conformance/metallb/ is a build module of ours: its go.mod requires go.universe.tf/metallb at
# the release we test against and names the speaker and controller as tools; go.sum pins every
# dependency. No MetalLB code is in the repo: the build compiles the release from the module
# cache.
#
# One gap: MetalLB v0.16.2 was released against github.com/metallb/frr-k8s v0.0.27, which the
# module proxy refuses (403, "This module version is not available"); the newest it serves is
# v0.0.21, whose API lacks one type and one field that MetalLB's frr-k8s BGP writer fills in.
# So our go.mod replaces frr-k8s with .build/modules/frr-k8s: a copy of v0.0.21's go.mod and
# api/ from the module cache plus, in our own words, that type
# (conformance/metallb/_frr-k8s/vigil_aspathprepend.go) and field. Only frr-k8s BGP mode
# (METALLB_BGP_TYPE=frr-k8s) touches them; vigil's tests run MetalLB in layer-2 mode. The copy
# is never committed. Static binaries (CGO_ENABLED=0); -mod=readonly: the build fails rather
# than change the committed go.mod/go.sum (VIGIL_GO_TIDY=1 re-tidies them, for a version bump).
build_metallb() {
    local modsrc="$here/metallb"
    local speaker="$bindir/metallb-speaker" controller="$bindir/metallb-controller"
    local frr_version=v0.0.21 frr_dir="$build/modules/frr-k8s"
    [ -f "$modsrc/go.mod" ] && [ -f "$modsrc/go.sum" ] || die "metallb: $modsrc/go.mod or go.sum missing"
    module_env
    local inputs=("$here/build.sh" "$modsrc")
    if [ "$check" = 0 ] && [ -f "$frr_dir/go.mod" ] && up_to_date "$speaker" "${inputs[@]}" &&
        up_to_date "$controller" "${inputs[@]}"; then
        say "metallb: up to date"
        return 0
    fi
    local frr_upstream="$GOMODCACHE/github.com/metallb/frr-k8s@$frr_version"
    if [ ! -f "$frr_upstream/go.mod" ]; then
        timed "metallb: download github.com/metallb/frr-k8s@$frr_version" \
            "$GO" mod download "github.com/metallb/frr-k8s@$frr_version" >&2
    fi
    rm -rf "$frr_dir"
    mkdir -p "$frr_dir" "$bindir"
    cp "$frr_upstream/go.mod" "$frr_dir/"
    cp -R "$frr_upstream/api" "$frr_dir/"
    chmod -R u+w "$frr_dir" # the module cache is read-only
    find "$frr_dir" -name '*_test.go' -delete
    cp "$modsrc/_frr-k8s/vigil_aspathprepend.go" "$frr_dir/api/v1beta1/"
    local types="$frr_dir/api/v1beta1/frrconfiguration_types.go"
    grep -q 'PrefixesWithCommunity \[\]CommunityPrefixes' "$types" ||
        die "metallb: frr-k8s $frr_version: Advertise.PrefixesWithCommunity not found in $types"
    sed -i '/PrefixesWithCommunity \[\]CommunityPrefixes/a\
	// PrefixesWithAsPathPrepend: added by vigil'"'"'s conformance/build.sh (see vigil_aspathprepend.go).\
	PrefixesWithAsPathPrepend []AsPathPrependPrefixes `json:"withAsPathPrepend,omitempty"`' "$types"
    local version
    version="$(sed -n 's/^[[:space:]]*go\.universe\.tf\/metallb \(v[^ ]*\).*/\1/p' "$modsrc/go.mod")"
    (
        cd "$modsrc"
        if [ "${VIGIL_GO_TIDY:-0}" = 1 ]; then
            timed "metallb: go mod tidy (writes $modsrc/go.mod, go.sum)" "$GO" mod tidy >&2
        fi
        export GOFLAGS=-mod=readonly CGO_ENABLED=0
        if [ "$check" = 1 ]; then
            local unformatted
            unformatted="$("${GO%/go}/gofmt" -l "$modsrc/_frr-k8s")"
            [ -z "$unformatted" ] || die "metallb: not gofmt-formatted: $unformatted"
        fi
        timed "metallb: metallb-speaker (Go $("$GO" env GOVERSION), MetalLB $version)" \
            "$GO" build -trimpath -ldflags="-s -w" -o "$speaker" go.universe.tf/metallb/speaker >&2
        timed "metallb: metallb-controller (Go $("$GO" env GOVERSION), MetalLB $version)" \
            "$GO" build -trimpath -ldflags="-s -w" -o "$controller" go.universe.tf/metallb/controller >&2
    )
}

# --- metallb-alloc: MetalLB's own allocator behind a JSON probe ------------------------------
#
# metallb-alloc-probe (conformance/metallb-alloc) runs go.universe.tf/metallb's
# internal/allocator for crates/lb/tests/pool_metallb.rs. Its module path lies under
# go.universe.tf/metallb/ so Go allows the internal imports; it reuses the metallb target's
# frr-k8s copy (same requirements as conformance/metallb).
build_metallb_alloc() {
    local modsrc="$here/metallb-alloc" out="$bindir/metallb-alloc-probe"
    [ -f "$build/modules/frr-k8s/go.mod" ] || build_metallb
    module_env
    if [ "$check" = 0 ] && up_to_date "$out" "$here/build.sh" "$modsrc"; then
        say "metallb-alloc: up to date"
        return 0
    fi
    (
        cd "$modsrc"
        if [ "${VIGIL_GO_TIDY:-0}" = 1 ]; then
            timed "metallb-alloc: go mod tidy (writes $modsrc/go.mod, go.sum)" "$GO" mod tidy >&2
        fi
        export GOFLAGS=-mod=readonly CGO_ENABLED=0
        if [ "$check" = 1 ]; then
            local unformatted
            unformatted="$("${GO%/go}/gofmt" -l "$modsrc")"
            [ -z "$unformatted" ] || die "metallb-alloc: not gofmt-formatted: $unformatted"
            timed "metallb-alloc: go vet" "$GO" vet . >&2
        fi
        timed "metallb-alloc: metallb-alloc-probe (Go $("$GO" env GOVERSION))" \
            "$GO" build -trimpath -ldflags="-s -w" -o "$out" . >&2
    )
}

# --- kubectl: the Kubernetes client, from the published k8s.io/kubectl module ------------------
#
# conformance/kubectl/ is a build module of ours with a five-line main over
# k8s.io/kubectl/pkg/cmd (what k8s.io/kubernetes/cmd/kubectl does, without pulling the whole
# kubernetes module into the build). Its go.mod was seeded with vigil-testenv's dependency
# versions, so most of the ~1,000 packages it compiles (client-go, apimachinery, ...) are the
# same build-cache entries as testenv's. The tests use it for `kubectl kustomize` and
# `kubectl apply --server-side --dry-run=server`. Static, stripped; -mod=readonly.
build_kubectl() {
    local modsrc="$here/kubectl" out="$bindir/kubectl"
    [ -f "$modsrc/go.mod" ] && [ -f "$modsrc/go.sum" ] || die "kubectl: $modsrc/go.mod or go.sum missing"
    module_env
    if [ "$check" = 0 ] && up_to_date "$out" "$here/build.sh" "$modsrc"; then
        say "kubectl: up to date"
        return 0
    fi
    local version
    version="$(sed -n 's/^[[:space:]]*k8s\.io\/kubectl \(v[^ ]*\).*/\1/p' "$modsrc/go.mod")"
    (
        cd "$modsrc"
        if [ "${VIGIL_GO_TIDY:-0}" = 1 ]; then
            timed "kubectl: go mod tidy (writes $modsrc/go.mod, go.sum)" "$GO" mod tidy >&2
        fi
        export GOFLAGS=-mod=readonly CGO_ENABLED=0
        if [ "$check" = 1 ]; then
            local unformatted
            unformatted="$("${GO%/go}/gofmt" -l .)"
            [ -z "$unformatted" ] || die "kubectl: not gofmt-formatted: $unformatted"
            "$GO" vet . >&2 || die "kubectl: go vet failed"
        fi
        # kubectl's `version` reports the client version from component-base's stamps.
        local pkg=k8s.io/component-base/version
        timed "kubectl: kubectl (Go $("$GO" env GOVERSION), k8s.io/kubectl $version)" \
            "$GO" build -trimpath -ldflags="-s -w -X $pkg.gitVersion=${version/v0./v1.}" -o "$out" . >&2
    )
}

# --- helm: Helm 3's client, from the module proxy ---------------------------------------------
#
# conformance/helm/ is a build module of ours naming helm.sh/helm/v3/cmd/helm as a tool; go.sum
# pins every dependency (its k8s.io modules raised from Helm's v0.37.0 to v0.37.2, the patch
# release vigil-testenv and kubectl use, so the build cache is shared). No Helm code is in the
# repo. The tests use it for `helm template` and `helm lint` over deploy/helm/vigil.
build_helm() {
    local modsrc="$here/helm" out="$bindir/helm"
    [ -f "$modsrc/go.mod" ] && [ -f "$modsrc/go.sum" ] || die "helm: $modsrc/go.mod or go.sum missing"
    module_env
    if [ "$check" = 0 ] && up_to_date "$out" "$here/build.sh" "$modsrc"; then
        say "helm: up to date"
        return 0
    fi
    local version
    version="$(sed -n 's/^[[:space:]]*helm\.sh\/helm\/v3 \(v[^ ]*\).*/\1/p' "$modsrc/go.mod")"
    (
        cd "$modsrc"
        if [ "${VIGIL_GO_TIDY:-0}" = 1 ]; then
            timed "helm: go mod tidy (writes $modsrc/go.mod, go.sum)" "$GO" mod tidy >&2
        fi
        export GOFLAGS=-mod=readonly CGO_ENABLED=0
        timed "helm: helm (Go $("$GO" env GOVERSION), Helm $version)" \
            "$GO" build -trimpath -ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$version" \
            -o "$out" helm.sh/helm/v3/cmd/helm >&2
    )
}

# --- promtool: Prometheus's rule evaluator, from Debian's prometheus package ------------------
#
# `promtool test rules` evaluates the chart's PrometheusRule on series scraped from vigil
# (crates/vigil/tests/k8s_metrics.rs). Built from the Go module proxy, promtool took 499 s cold
# on this 2-core machine (2.5 GB of module and build cache): too much for CI's cold run. Debian
# ships the same tool prebuilt (prometheus 2.42 in bookworm): its promtool alone is taken out of
# the .deb (apt-get download, dpkg-deb -x, about 2 s); nothing is installed or started.
build_promtool() {
    local out="$bindir/promtool"
    if [ -x "$out" ]; then
        say "promtool: up to date"
        return 0
    fi
    command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null ||
        die "promtool: needs apt-get and dpkg-deb (Debian)"
    local work
    work="$(mktemp -d)"
    fetch_promtool() {
        (cd "$work" && apt-get download -qq prometheus >/dev/null 2>&1) ||
            { apt-get update -qq >/dev/null 2>&1 && (cd "$work" && apt-get download -qq prometheus >/dev/null 2>&1); }
    }
    timed "promtool: Debian's prometheus package" fetch_promtool
    dpkg-deb -x "$work"/prometheus_*.deb "$work/root" || die "promtool: cannot unpack the package"
    install -m 0755 "$work/root/usr/bin/promtool" "$out"
    rm -rf "$work"
    say "promtool: $("$out" --version 2>&1 | head -n 1)"
}

mkdir -p "$bindir"
for t in "${targets[@]}"; do
    case "$t" in
        conformance) build_conformance ;;
        gopeer-0.5.1) build_gopeer 0.5.1 ;;
        gopeer-0.7.0) build_gopeer 0.7.0 ;;
        testenv) build_testenv ;;
        metallb) build_metallb ;;
        metallb-alloc) build_metallb_alloc ;;
        kubectl) build_kubectl ;;
        helm) build_helm ;;
        promtool) build_promtool ;;
        *) die "unknown target '$t' (known: ${all_targets[*]})" ;;
    esac
done
echo "$bindir"
