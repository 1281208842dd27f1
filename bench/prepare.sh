# Shared set-up of bench/failover/run.sh and bench/soak/run.sh (sourced, from the checkout's
# root): refuse to run without root, install what is missing (Debian packages, keepalived),
# build vigil and vigil-l2-client in release mode, and say what is being measured.
#
#   bench_prepare NAME WHY TOOL...   NAME names the bench in messages, WHY says why root is
#                                    needed, TOOLs must be on PATH; sets $target (the cargo
#                                    target directory: $CARGO_TARGET_DIR or ./target)

bench_prepare() {
  local name=$1 why=$2
  shift 2
  if [ "$(id -u)" -ne 0 ]; then
    echo "bench/$name: run as root ($why)" >&2
    exit 1
  fi
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null || bash scripts/install-deps.sh
  done
  # Debian's package may start its own service in the root namespace; it is not ours and it
  # touches no lab namespace, so it is left alone.
  command -v keepalived >/dev/null || apt-get install -y -q keepalived >/dev/null
  target=${CARGO_TARGET_DIR:-$PWD/target}
  echo "== building vigil (release) into $target" >&2
  CARGO_TARGET_DIR=$target cargo build -q --release -p vigil -p vigil-netlab
}

# One line on what is measured where: commit, local changes, CPUs, load, keepalived version.
bench_describe() {
  echo "== commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- crates || echo ' (crates/ has local changes)'), $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), load $(cut -d' ' -f1-3 /proc/loadavg), keepalived $(keepalived --version 2>&1 | head -1 | cut -d' ' -f2)" >&2
}
