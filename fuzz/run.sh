#!/usr/bin/env bash
# Builds and runs vigil's fuzz targets (the memberlist wire codec and engine, MetalLB's model,
# the L2 wire types and announcer), one after the other.
#
#   fuzz/run.sh [SECONDS] [TARGET...]
#
# SECONDS per target (default 30); TARGETs default to all of them. Installs cargo-fuzz if it
# is missing, seeds the corpora (fuzz/seed.sh), builds with the nightly toolchain and runs
# libFuzzer with -max_total_time=SECONDS -rss_limit_mb=2048 -max_len=70000. Each run's full log
# goes to fuzz/artifacts/<target>.log; crashes land in fuzz/artifacts/<target>/. Exits non-zero
# if any target crashed (panic, failed assertion, timeout, OOM) or failed to build.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

seconds="${1:-30}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -eq 0 ]; then
    echo "usage: fuzz/run.sh [SECONDS] [TARGET...]" >&2
    exit 2
fi
shift $(( $# > 0 ? 1 : 0 ))
targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
    targets=(wire_decode wire_roundtrip membership_ops metallb_objects l2_wire l2_announcer)
fi
toolchain="${FUZZ_TOOLCHAIN:-nightly}"

if ! rustup run "$toolchain" rustc --version >/dev/null 2>&1; then
    echo "fuzz: the '$toolchain' toolchain is not installed (rustup toolchain list)" >&2
    exit 1
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz: installing cargo-fuzz"
    cargo install cargo-fuzz --locked --quiet
fi

./seed.sh "${targets[@]}"

echo "fuzz: building ${targets[*]} ($(rustup run "$toolchain" rustc --version))"
build_log="$here/artifacts/build.log"
mkdir -p "$here/artifacts"
for target in "${targets[@]}"; do
    if ! cargo "+$toolchain" fuzz build "$target" >"$build_log" 2>&1; then
        tail -n 40 "$build_log"
        echo "fuzz: build of $target FAILED (log: fuzz/artifacts/build.log)" >&2
        exit 1
    fi
done

failed=()
for target in "${targets[@]}"; do
    log="$here/artifacts/$target.log"
    mkdir -p "$here/artifacts/$target"
    echo "fuzz: running $target for ${seconds}s (log: fuzz/artifacts/$target.log)"
    start=$(date +%s)
    set +e
    cargo "+$toolchain" fuzz run "$target" -- \
        -max_total_time="$seconds" \
        -rss_limit_mb=2048 \
        -max_len=70000 \
        -timeout=60 \
        -print_final_stats=1 \
        >"$log" 2>&1
    status=$?
    set -e
    elapsed=$(( $(date +%s) - start ))
    if [ "$status" -eq 0 ]; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
        rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
        rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -n 1)
        done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -n 1 || true)
        echo "fuzz: $target OK after ${elapsed}s: ${runs:-?} execs, ${rate:-?} exec/s, peak rss ${rss:-?} MB"
        [ -n "$done_line" ] && echo "      $done_line"
    else
        echo "fuzz: $target FAILED (exit $status) after ${elapsed}s; last lines of fuzz/artifacts/$target.log:"
        tail -n 40 "$log" | cut -c1-300
        failed+=("$target")
    fi
done

if [ "${#failed[@]}" -gt 0 ]; then
    echo "fuzz: crashes in: ${failed[*]} (reproducers in fuzz/artifacts/<target>/; see fuzz/README.md)" >&2
    exit 1
fi
echo "fuzz: all ${#targets[@]} target(s) ran ${seconds}s each without a crash"
