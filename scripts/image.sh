#!/usr/bin/env bash
# Builds vigil's container images without a Docker daemon: a statically linked `vigil` binary
# (glibc, crt-static) in images of its own with nothing else in them, built by buildah from
# deploy/image/Containerfile: vigil (ENTRYPOINT /usr/bin/vigil), and vigil-speaker and
# vigil-controller (ENTRYPOINT /speaker and /controller, links to the same binary), the two
# that replace MetalLB's images under MetalLB's own manifests or chart. Then, where podman can
# run containers here, runs them once.
#
# Usage: scripts/image.sh [TAG]         (default tag: vigil:<workspace version>; the other two
#                                        are named vigil-speaker:<tag> and vigil-controller:<tag>)
# Output: the images in buildah/podman's local storage, and OCI archives at
#         target/image/vigil{,-speaker,-controller}-<version>.oci.tar (for `skopeo copy` or
#         `podman load`).
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
rm -rf "$out/context"
mkdir -p "$out/context/rootfs/usr/bin"
cp "$bin" "$out/context/rootfs/usr/bin/vigil"
# MetalLB's program names, as links: the binary runs the subcommand its name says.
ln -s usr/bin/vigil "$out/context/rootfs/speaker"
ln -s usr/bin/vigil "$out/context/rootfs/controller"
echo "    $(du -h "$bin" | cut -f1) static binary in $((SECONDS - start)) s"

name=${tag%%:*}
tag_version=${tag#*:}
[ "$tag_version" = "$tag" ] && tag_version=latest
for target in vigil speaker controller; do
  case $target in
    vigil) image=$tag ;;
    *) image=$name-$target:$tag_version ;;
  esac
  echo "=== image $image (target $target)"
  buildah --storage-driver "$driver" build -q \
    --file deploy/image/Containerfile --target "$target" --tag "$image" \
    --annotation org.opencontainers.image.version="$version" \
    "$out/context" >/dev/null
  archive=$out/$(basename "${image%%:*}")-$version.oci.tar
  rm -f "$archive"
  buildah --storage-driver "$driver" push -q "$image" "oci-archive:$archive:$image"
  size=$(buildah --storage-driver "$driver" images --format '{{.Size}}' "$image" | head -n 1)
  echo "    image size: $size (OCI archive $(du -h "$archive" | cut -f1))"
done
speaker_image=$name-speaker:$tag_version
controller_image=$name-controller:$tag_version

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
  # MetalLB's way: the entrypoint alone with MetalLB's flags; --help parses and exits 0.
  "${run[@]}" "$speaker_image" --help >/dev/null
  "${run[@]}" "$controller_image" --port=9120 --log-level=info --help >/dev/null
  echo "    podman ran the images (only CAP_NET_RAW, read-only root)"
else
  echo "    podman cannot run containers on this machine; the image was built but not run"
fi
