#!/usr/bin/env bash
# Builds the install image (deploy/Containerfile) from a release build, offline:
#   deploy/build-image.sh [--build-dir build/release] [--tag localhost/shmipam:VERSION]
# The image's /opt/shmipam/bin holds the static plugin and the static shmipamctl, and the
# dynamic binaries:
#   - the helpers the plugin execs on its rare paths, each one this source tree builds:
#     shmipam-cluster (etcd, cluster mode) and shmipam-kube (the Kubernetes API, pod facts);
#     both link libcurl. `shmipamctl install` copies them onto each node beside the plugin.
#   - shmipamctl-cluster (shmipamctl with the etcd client), for cluster mode's node pass.
# Their shared libraries, every one ldd resolves for any of them, once, in
# /opt/shmipam/bin/shmipam-lib/, glibc's and its dynamic loader too: each dynamic binary's RPATH
# names it ($ORIGIN/shmipam-lib, CMakeLists.txt), and install copies it beside the helpers. On a
# node the plugin starts a helper through the loader shipped there (base/shipped_libraries.h):
# it runs with the libraries it was built with and needs nothing of the node's C library
# (docs/operations.md, "What the helpers need on a host"). glibc's files are also put at their
# own paths in the image, to run the dynamic binaries there directly.
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
fail() { echo "build-image.sh: $*" >&2; exit 2; }

# The helpers this source tree builds (a target defined in one of its CMakeLists.txt): each
# must be in the build, a missing one is an image without it, never silently.
helpers=()
for h in shmipam-cluster shmipam-kube; do
    if find . -path ./build -prune -o -name CMakeLists.txt -print0 |
        xargs -0 grep -qsE "add_executable\\($h([[:space:]]|\\))"; then
        helpers+=("$h")
    fi
done
for b in shmipam shmipamctl-static shmipamctl "${helpers[@]}"; do
    [ -x "$build/$b" ] ||
        fail "no $build/$b: cmake --build --preset release --target $b first"
done
# The dynamic binaries, as file-in-the-build:name-in-the-image.
dynamic=(shmipamctl:shmipamctl-cluster)
for h in "${helpers[@]}"; do dynamic+=("$h:$h"); done

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/bin/shmipam-lib" "$ctx/rootfs"
cp "$build/shmipam" "$ctx/bin/shmipam"
cp "$build/shmipamctl-static" "$ctx/bin/shmipamctl"
cp deploy/10-shmipam.conflist "$ctx/"

# glibc's own libraries: one build of glibc, whose parts must match each other and the
# loader exactly.
is_glibc() {
    case "$(basename "$1")" in
    ld-linux*.so.* | libc.so.* | libm.so.* | libmvec.so.* | libpthread.so.* | libdl.so.* | \
        librt.so.* | libresolv.so.* | libanl.so.* | libutil.so.* | libnss_*.so.* | \
        libBrokenLocale.so.* | libc_malloc_debug.so.*) return 0 ;;
    esac
    return 1
}
declare -A shipped  # basename -> the file it came from
for pair in "${dynamic[@]}"; do
    src=$build/${pair%%:*}
    name=${pair#*:}
    readelf -l "$src" | grep -q 'Requesting program interpreter' ||
        fail "$src is not a dynamic binary"
    # An RPATH (not a RUNPATH: that would not serve libcurl's own dependencies).
    readelf -d "$src" | grep -qF '(RPATH)              Library rpath: [$ORIGIN/shmipam-lib]' ||
        fail "$src has no RPATH \$ORIGIN/shmipam-lib (CMakeLists.txt gives it to every shipped dynamic binary): it would not find its libraries"
    cp "$src" "$ctx/bin/$name"
    libs=$(ldd "$src") || fail "ldd $src failed"
    if grep -q 'not found' <<<"$libs"; then fail "$src: a library is not found: $libs"; fi
    for lib in $(grep -o '/[^ ]*' <<<"$libs"); do
        if is_glibc "$lib" && [ ! -e "$ctx/rootfs$lib" ]; then
            mkdir -p "$ctx/rootfs$(dirname "$lib")"
            cp -L "$lib" "$ctx/rootfs$lib"
        fi
        base=$(basename "$lib")
        if [ -n "${shipped[$base]:-}" ]; then
            cmp -s "${shipped[$base]}" "$lib" ||
                fail "two different $base: ${shipped[$base]} and $lib"
            continue
        fi
        shipped[$base]=$lib
        cp -L "$lib" "$ctx/bin/shmipam-lib/$base"
    done
done
# The helpers start through the loader shipped with them: a host needs no C library for them.
loader=$(readelf -l "$build/${dynamic[0]%%:*}" | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')
[ -f "$ctx/bin/shmipam-lib/$(basename "$loader")" ] ||
    fail "the dynamic loader $loader is not among the libraries ldd resolved"
glibc=$(objdump -T "$ctx/bin/shmipam-lib/libc.so.6" | grep -o 'GLIBC_[0-9][0-9.]*' | sort -Vu | tail -1)
echo "build-image.sh: ${#shipped[@]} libraries in /opt/shmipam/bin/shmipam-lib for ${dynamic[*]}," \
    "glibc ${glibc#GLIBC_} and its loader $(basename "$loader") among them" >&2
podman ${PODMAN_OPTS:-} build --quiet --tag "$tag" --file deploy/Containerfile "$ctx" >/dev/null
echo "$tag"
