#!/usr/bin/env bash
# Builds the install image (deploy/Containerfile) from a release build, offline:
#   deploy/build-image.sh [--build-dir build/release] [--tag localhost/shmipam:VERSION]
# The image holds the static plugin and the static shmipamctl (no etcd client), and, for cluster
# mode's node pass (the DaemonSet's node-pass container), the shmipamctl with the etcd client as
# shmipamctl-cluster with the shared libraries it loads (libcurl's and the C++ runtime's, from
# this machine, under their own paths). Cluster mode's helper is still installed from a build
# on the node (docs/operations.md).
set -euo pipefail
cd "$(dirname "$0")/.."
build=build/release
tag=""
while [ $# -gt 0 ]; do
    case "$1" in
    --build-dir) build=$2; shift 2 ;;
    --tag) tag=$2; shift 2 ;;
    *) echo "usage: $0 [--build-dir DIR] [--tag TAG]" >&2; exit 2 ;;
    esac
done
version=$(sed -n 's/^project(shmipam VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
tag=${tag:-localhost/shmipam:$version}
for b in shmipam shmipamctl-static shmipamctl; do
    [ -x "$build/$b" ] || { echo "no $build/$b: cmake --build --preset release first" >&2; exit 2; }
done
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
cp "$build/shmipam" "$ctx/shmipam"
cp "$build/shmipamctl-static" "$ctx/shmipamctl"
cp deploy/10-shmipam.conflist "$ctx/"
cp "$build/shmipamctl" "$ctx/shmipamctl-cluster"
# Every library ldd resolves, and the dynamic loader, at their paths (symlinks followed).
mkdir -p "$ctx/rootfs"
for lib in $(ldd "$build/shmipamctl" | grep -o '/[^ ]*'); do
    mkdir -p "$ctx/rootfs$(dirname "$lib")"
    cp -L "$lib" "$ctx/rootfs$lib"
done
podman ${PODMAN_OPTS:-} build --quiet --tag "$tag" --file deploy/Containerfile "$ctx" >/dev/null
echo "$tag"
