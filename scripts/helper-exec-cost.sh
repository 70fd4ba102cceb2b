#!/usr/bin/env bash
# The exec cost of the dynamic helpers as shipped, against the static plugin's
# (docs/dependencies.md): wall time per exec, averaged over RUNS execs from a shell loop, of
#   - busybox true (static, does nothing: the loop's own fork + exec),
#   - the static plugin answering VERSION,
#   - each helper in BUILD_DIR answering a request it refuses (another protocol version: it
#     reads stdin, decodes, answers an error JSON, exits 1): start-up and dynamic loading,
#     nothing else. Run two ways, each with the libraries ldd resolves for it copied into a
#     shmipam-lib/ beside it:
#       "host glibc": glibc's left out, the helper exec'd by itself (the host's loader and C
#       library; how helpers ran before they shipped glibc);
#       "shipped loader": every library, glibc's and the loader too, the helper started through
#       the shipped loader as the plugin starts it (base/shipped_libraries.h).
#     Each line also gives the size of the shmipam-lib/ it ran with.
#   bash scripts/helper-exec-cost.sh [BUILD_DIR (build/release)] [RUNS (200)]
set -euo pipefail
build=${1:-build/release}
runs=${2:-200}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo '{"version": 2, "op": "claim-block"}' >"$work/refused.json"
: >"$work/empty"

# ms per exec of "$@" with stdin from $input, over $runs execs.
input=$work/empty
per_exec() {
    local start end
    start=$(date +%s%N)
    for ((i = 0; i < runs; i++)); do "$@" <"$input" >/dev/null 2>&1 || true; done
    end=$(date +%s%N)
    awk -v ns=$((end - start)) -v n="$runs" 'BEGIN { printf "%.2f", ns / n / 1e6 }'
}

printf '%-40s %s\n' "binary ($runs execs each)" "ms per exec"
if [ -x /bin/busybox ]; then
    printf '%-40s %s\n' "busybox true (static no-op)" "$(per_exec /bin/busybox true)"
fi
printf '%-40s %s\n' "shmipam VERSION (static plugin)" \
    "$(CNI_COMMAND=VERSION per_exec "$build/shmipam")"
input=$work/refused.json
for h in shmipam-cluster shmipam-kube; do
    [ -x "$build/$h" ] || continue
    for way in host-glibc shipped-loader; do
        dir=$work/$h-$way
        mkdir -p "$dir/shmipam-lib"
        cp "$build/$h" "$dir/"
        for lib in $(ldd "$build/$h" | grep -o '/[^ ]*'); do
            case "$way:$(basename "$lib")" in
            host-glibc:ld-linux*.so.* | host-glibc:libc.so.* | host-glibc:libm.so.* | \
                host-glibc:libpthread.so.* | host-glibc:libdl.so.* | host-glibc:librt.so.* | \
                host-glibc:libresolv.so.*) continue ;;
            esac
            cp -L "$lib" "$dir/shmipam-lib/"
        done
        n=$(ls "$dir/shmipam-lib" | wc -l)
        size=$(du -sm "$dir/shmipam-lib" | cut -f1)
        if [ "$way" = host-glibc ]; then
            cost=$(per_exec "$dir/$h")
        else
            loader=$(ls "$dir/shmipam-lib" | grep '^ld-linux')
            cost=$(per_exec "$dir/shmipam-lib/$loader" --inhibit-cache --library-path \
                "$dir/shmipam-lib" --argv0 "$dir/$h" "$dir/$h")
        fi
        printf '%-40s %s\n' "$h, $way ($n libs, $size MB)" "$cost"
    done
done
