#!/usr/bin/env bash
# The exec cost of the dynamic helpers as shipped, against the static plugin's
# (docs/dependencies.md): wall time per exec, averaged over RUNS execs from a shell loop, of
#   - busybox true (static, does nothing: the loop's own fork + exec),
#   - the static plugin answering VERSION,
#   - each helper in BUILD_DIR answering a request it refuses (another protocol version: it
#     reads stdin, decodes, answers an error JSON, exits 1): start-up and dynamic loading,
#     nothing else. Run as shipped: copied with the libraries ldd resolves for it (glibc's
#     apart) into a shmipam-lib/ beside it, which its RPATH names.
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
    mkdir -p "$work/$h/shmipam-lib"
    cp "$build/$h" "$work/$h/"
    for lib in $(ldd "$build/$h" | grep -o '/[^ ]*'); do
        case "$(basename "$lib")" in
        ld-linux*.so.* | libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | \
            libresolv.so.*) continue ;;
        esac
        cp -L "$lib" "$work/$h/shmipam-lib/"
    done
    n=$(ls "$work/$h/shmipam-lib" | wc -l)
    printf '%-40s %s\n' "$h refused request ($n libs shipped)" "$(per_exec "$work/$h/$h")"
done
