#!/usr/bin/env bash
# vigil's whole test suite, from a fresh Debian machine, as root.
#
# Installs what the tests need (Go and Debian's hashicorp/memberlist for the interop peer,
# iproute2 and nftables for the network-namespace labs, cargo-fuzz for the fuzz smoke run),
# then runs: formatting and lint checks, the I/O-free check on the pure crates, every cargo
# test (Go interop and netns tests included, required rather than skipped), and each fuzz
# target for a short bounded time.
#
# Environment: FUZZ_SECONDS (default 20) per fuzz target; SKIP_FUZZ=1 to skip fuzzing.
set -euo pipefail
cd "$(dirname "$0")/.."
# One clean build: incremental state would only cost disk (gigabytes) and time.
export CARGO_INCREMENTAL=0

passed=0
failed=0
stage() {
  local name=$1
  shift
  echo "=== ${name}"
  local start=$SECONDS
  if "$@"; then
    passed=$((passed + 1))
    echo "=== ${name}: ok ($((SECONDS - start)) s)"
  else
    failed=$((failed + 1))
    echo "=== ${name}: FAILED ($((SECONDS - start)) s)"
  fi
}

install_packages() {
  bash scripts/install-deps.sh
}

lint() {
  cargo fmt --all -- --check
  cargo clippy -q --workspace --all-targets -- -D warnings
}

# The protocol core (gossip, l2, lb, MetalLB's model and the speaker core) must stay sans-IO: no
# async runtime, sockets or libc in its dependency tree.
pure_crates_have_no_io() {
  local bad=0
  for c in vigil-gossip vigil-l2 vigil-lb vigil-metallb vigil-speaker-core; do
    cargo metadata --format-version 1 --no-deps 2>/dev/null | grep -q "\"name\":\"$c\"" || continue
    local io
    io=$(cargo tree -q -p "$c" -e normal --prefix none | awk '{print $1}' | grep -xE 'tokio|mio|socket2|libc|nix' | sort -u | tr '\n' ' ')
    if [ -n "$io" ]; then
      echo "$c depends on I/O crates: $io" >&2
      bad=1
    fi
  done
  return $bad
}

# docs/ARCHITECTURE.md's dependency rule: no product crate depends on a lab or test-support crate,
# and the controller links none of the speaker's I/O (speaker runner, announcer, gossip driver,
# the speaker's Kubernetes half). The `vigil` binary is checked without its `lab` feature.
dependency_rule_holds() {
  local bad=0 c deps
  local labs='vigil-netlab|vigil-kubelab|vigil-bench-k8s'
  for c in vigil-gossip vigil-gossip-net vigil-l2 vigil-l2-net vigil-lb vigil-metallb \
    vigil-speaker-core vigil-speaker vigil-observe vigil-standalone vigil-k8s vigil-controller; do
    deps=$(cargo tree -q -p "$c" -e normal --prefix none | awk '{print $1}' | sort -u)
    if grep -qxE "$labs" <<<"$deps"; then
      echo "$c depends on a lab crate: $(grep -xE "$labs" <<<"$deps" | tr '\n' ' ')" >&2
      bad=1
    fi
  done
  deps=$(cargo tree -q -p vigil --no-default-features -e normal --prefix none | awk '{print $1}' | sort -u)
  if grep -qxE "$labs" <<<"$deps"; then
    echo "the vigil binary without --features lab depends on: $(grep -xE "$labs" <<<"$deps" | tr '\n' ' ')" >&2
    bad=1
  fi
  deps=$(cargo tree -q -p vigil-controller -e normal --prefix none | awk '{print $1}' | sort -u)
  if grep -qxE 'vigil-speaker|vigil-l2|vigil-l2-net|vigil-gossip-net|vigil-k8s' <<<"$deps"; then
    echo "vigil-controller depends on speaker crates: $(grep -xE 'vigil-speaker|vigil-l2|vigil-l2-net|vigil-gossip-net|vigil-k8s' <<<"$deps" | tr '\n' ' ')" >&2
    bad=1
  fi
  return $bad
}

# Every Go program the tests use, built once here (conformance/build.sh prints each build and its
# time); the cargo tests find them in $go_bin.
go_targets=(conformance gopeer-0.5.1 gopeer-0.7.0 metallb metallb-alloc testenv kubectl helm promtool)
go_bin=
go_programs() {
  go_bin=$(bash conformance/build.sh --check "${go_targets[@]}" | tail -n 1)
}

cargo_tests() {
  [ -n "$go_bin" ] || { echo "the Go programs were not built" >&2; return 1; }
  VIGIL_GO_BIN_DIR="$go_bin" VIGIL_CONFORMANCE_BIN="$go_bin/vigil-conformance" \
    VIGIL_REQUIRE_GO=1 VIGIL_REQUIRE_ROOT=1 \
    cargo test --workspace --no-fail-fast 2>&1 | tee target/cargo-test.log
  return "${PIPESTATUS[0]}"
}

fuzz_smoke() {
  bash fuzz/run.sh "${FUZZ_SECONDS:-20}"
}

stage "install packages" install_packages
stage "fmt and clippy" lint
stage "pure crates have no I/O dependencies" pure_crates_have_no_io
stage "dependency rule (no labs in product crates, controller without the speaker)" dependency_rule_holds
stage "Go programs build (and our Go code vets)" go_programs
mkdir -p target
stage "cargo test (workspace)" cargo_tests
if [ "${SKIP_FUZZ:-0}" != 1 ] && [ -f fuzz/run.sh ]; then
  stage "fuzz smoke run" fuzz_smoke
fi

echo "disk: $(du -sh target 2>/dev/null | cut -f1) in target, $(df -h . | awk 'NR == 2 {print $4}') free"
echo "stages: ${passed} passed, ${failed} failed"
[ "$failed" -eq 0 ]
