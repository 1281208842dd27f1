#!/usr/bin/env bash
# Builds vigil's container image without a Docker daemon: a statically linked `vigil` binary
# (glibc, crt-static) in an image of its own with nothing else in it, built by buildah from
# deploy/image/Containerfile. Then, where podman can run containers here, runs it once.
#
# Usage: scripts/image.sh [TAG]         (default tag: vigil:<workspace version>)
# Output: the image in buildah/podman's local storage, and an OCI archive at
#         target/image/vigil-<version>.oci.tar (for `skopeo copy` or `podman load`).
# Environment: VIGIL_IMAGE_STORAGE_DRIVER (default vfs, which works everywhere, including
# inside a VM without overlay support).
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
tag=${1:-vigil:${version}}
driver=${VIGIL_IMAGE_STORAGE_DRIVER:-vfs}
out=target/image

need() { command -v "$1" >/dev/null 2>&1; }
if ! need buildah; then
  if [ "$(id -u)" = 0 ] && need apt-get; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq buildah podman >/dev/null
  else
    echo "image.sh: buildah is needed (apt-get install buildah podman)" >&2
    exit 1
  fi
fi

# A separate target directory: crt-static changes every crate's flags, so sharing target/
# would rebuild the test build from scratch each time.
echo "=== static vigil binary"
start=$SECONDS
CARGO_TARGET_DIR=$out/cargo \
  RUSTFLAGS='-C target-feature=+crt-static' \
  CARGO_PROFILE_RELEASE_DEBUG=0 CARGO_PROFILE_RELEASE_STRIP=symbols \
  cargo build -q --release --locked -p vigil --bin vigil --no-default-features --target x86_64-unknown-linux-gnu
bin=$out/cargo/x86_64-unknown-linux-gnu/release/vigil
# A static-pie binary has neither an interpreter nor NEEDED entries (ldd says "statically
# linked" and exits 0, so it cannot tell).
if readelf -l "$bin" | grep -q INTERP || readelf -d "$bin" | grep -q NEEDED; then
  echo "image.sh: $bin is dynamically linked" >&2
  exit 1
fi
mkdir -p "$out/context"
cp "$bin" "$out/context/vigil"
echo "    $(du -h "$bin" | cut -f1) static binary in $((SECONDS - start)) s"

echo "=== image $tag"
buildah --storage-driver "$driver" build -q \
  --file deploy/image/Containerfile --tag "$tag" \
  --annotation org.opencontainers.image.version="$version" \
  "$out/context" >/dev/null
rm -f "$out/vigil-$version.oci.tar"
buildah --storage-driver "$driver" push -q "$tag" "oci-archive:$out/vigil-$version.oci.tar:$tag"
size=$(buildah --storage-driver "$driver" images --format '{{.Size}}' "$tag" | head -n 1)
echo "    image size: $size (OCI archive $(du -h "$out/vigil-$version.oci.tar" | cut -f1))"

echo "=== run it"
# podman's default runtime here (crun) refuses hybrid cgroups and setting RLIMIT_NOFILE above
# the current limit; runc with explicit limits runs where crun cannot.
if [ "$(id -u)" = 0 ] && ! need runc && need apt-get; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq runc >/dev/null || true
fi
run=(podman --storage-driver "$driver")
if need runc; then run+=(--runtime "$(command -v runc)"); fi
run+=(run --rm --network none --ulimit nofile=1024:1024 --ulimit nproc=1024:1024
  --cap-drop all --cap-add NET_RAW --read-only)
if need podman && "${run[@]}" "$tag" --version; then
  "${run[@]}" "$tag" keygen >/dev/null
  echo "    podman ran the image (only CAP_NET_RAW, read-only root)"
else
  echo "    podman cannot run containers on this machine; the image was built but not run"
fi
