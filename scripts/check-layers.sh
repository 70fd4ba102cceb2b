#!/usr/bin/env bash
# Checks that dependencies point one way, reading every #include "dir/..." line:
#   base <- shm <- engine (addr <- slots <- state <- {policy, inspect} <- recovery <- ops)
#        <- {pools, cluster} <- ipam <- {plugin, tools, bench}
#   base <- kube <- {ipam, tools}
# kube/ (the Kubernetes API: the helper protocol, the kubeconfig, the HTTPS client) is a layer
# beside pools/ and cluster/ that includes only base/: nothing of the store or the engine is
# needed to read a pod, and ipam/ and tools/ reach it, never the engine or pools.
# plugin/ includes no shm/ header (the engine owns what the CNI glue needs of the store) and no
# cluster/ or kube/ header (ipam/ owns pool, cluster and API orchestration; the plugin is CNI
# glue).
# Inside the layers, two seams (below: the key-value seam under cluster mode's logic, and the one
# writer of a node's block cache).
# Prints each include or call that breaks a rule and exits 1; exits 0 when there is none.
#   bash scripts/check-layers.sh [ROOT]   (default: the repository)
set -euo pipefail
root=${1:-"$(cd "$(dirname "$0")/.." && pwd)"}

# What each layer may include (bash patterns). A file's layer is its top directory, or
# engine/<area> for a file in an engine area.
allowed_for() {  # sets `allowed`
    local low="base shm engine/addr engine/slots"
    case "$1" in
    base) allowed="base" ;;
    shm) allowed="base shm" ;;
    engine/addr) allowed="base shm engine/addr" ;;
    engine/slots) allowed="$low" ;;
    engine/state) allowed="$low engine/state" ;;
    engine/policy) allowed="$low engine/state engine/policy" ;;
    engine/inspect) allowed="$low engine/state engine/inspect" ;;
    engine/recovery) allowed="$low engine/state engine/policy engine/recovery" ;;
    engine/ops | engine) allowed="base shm engine engine/*" ;;
    pools) allowed="base engine engine/* pools" ;;
    cluster) allowed="base engine engine/* cluster" ;;
    kube) allowed="base kube" ;;
    ipam) allowed="base engine engine/* pools cluster kube ipam" ;;
    plugin) allowed="base engine engine/* pools ipam plugin" ;;
    tools) allowed="base shm engine engine/* pools cluster kube ipam tools" ;;
    bench) allowed="base shm engine engine/* pools cluster ipam plugin bench" ;;
    *) allowed="*" ;;  # tests/ and anything else may include anything
    esac
}

layer_of() {  # sets layer_result: engine/ops/add.cpp -> engine/ops, shm/format.h -> shm
    local top=${1%%/*} rest=${1#*/}
    if [ "$top" = engine ] && [ "$rest" != "${rest#*/}" ]; then
        layer_result="engine/${rest%%/*}"
    else
        layer_result=$top
    fi
}

violations=0
while IFS= read -r file; do
    rel=${file#"$root"/}
    layer_of "$rel"
    layer=$layer_result
    allowed_for "$layer"
    [ "$allowed" = "*" ] && continue
    while IFS= read -r line; do
        [[ $line =~ \"([^\"]+)\" ]] || continue
        inc=${BASH_REMATCH[1]}
        [ "$inc" = "${inc#*/}" ] && continue  # a header beside the file
        layer_of "$inc"
        target=$layer_result
        ok=0
        for pattern in $allowed; do
            # shellcheck disable=SC2053  # the pattern is meant to match as a glob
            if [[ $target == $pattern ]]; then ok=1; break; fi
        done
        if [ $ok -eq 0 ]; then
            echo "$rel: includes $inc ($layer may not depend on $target)"
            violations=$((violations + 1))
        fi
    done < <(grep -E '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$file" || true)
done < <(find "$root/base" "$root/shm" "$root/engine" "$root/pools" "$root/cluster" "$root/kube" "$root/ipam" "$root/plugin" "$root/tools" "$root/bench" \
    -type f \( -name '*.h' -o -name '*.cpp' \) 2>/dev/null | sort)

# Two seams inside the layers:
#   - cluster mode's logic reaches etcd only through the key-value seam (cluster/kv_store.h):
#     in cluster/, only the client itself and the config that names it include
#     cluster/etcd_client.h, so the agent, the node pass and the guards run over any store (the
#     unit tests' in-memory one); the tools that open etcd are above it;
#   - only cluster/ writes a node's block cache (the agent, a block's release, the node pass),
#     under the pool lock: a verb that rewrote it could lose a block an agent just claimed.
while IFS= read -r file; do
    rel=${file#"$root"/}
    case "$rel" in
    cluster/etcd_client.* | cluster/etcd_config.* | tools/*) ;;
    *)
        if grep -qE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"cluster/etcd_client\.h"' "$file"; then
            echo "$rel: includes cluster/etcd_client.h (cluster logic goes through cluster/kv_store.h)"
            violations=$((violations + 1))
        fi
        ;;
    esac
    case "$rel" in
    cluster/*) ;;
    *)
        if grep -qE '(^|[^_[:alnum:]])write_block_cache[[:space:]]*\(' "$file"; then
            echo "$rel: writes the block cache (only cluster/ does, under the pool lock)"
            violations=$((violations + 1))
        fi
        ;;
    esac
done < <(find "$root/base" "$root/shm" "$root/engine" "$root/pools" "$root/cluster" "$root/kube" "$root/ipam" "$root/plugin" "$root/tools" "$root/bench" \
    -type f \( -name '*.h' -o -name '*.cpp' \) 2>/dev/null | sort)

if [ $violations -ne 0 ]; then
    echo "$violations include(s) or call(s) against the layering (scripts/check-layers.sh)" >&2
    exit 1
fi
echo "layers: every include points down"
