#!/usr/bin/env bash
# scripts/check-layers.sh passes on the repository and fails, naming the file and the include,
# on a copy with one wrong include planted for each kind of rule.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
script="$root/scripts/check-layers.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0 failed=0

expect() {  # name, expected exit (0 or 1), tree, expected text in the output
    local out rc=0
    out=$(bash "$script" "$3" 2>&1) || rc=$?
    if [ "$rc" -eq "$2" ] && grep -qF -- "$4" <<<"$out"; then
        passed=$((passed + 1))
    else
        echo "FAILED $1: exit $rc, output:"; echo "$out"
        failed=$((failed + 1))
    fi
}

expect "the repository" 0 "$root" "every include points down"

plant_line() {  # file to plant in a fresh copy, the line; prints the copy's path
    local tree="$work/$RANDOM$RANDOM"
    mkdir -p "$tree"
    cp -r "$root/base" "$root/shm" "$root/engine" "$root/pools" "$root/cluster" "$root/kube" "$root/ipam" "$root/plugin" "$root/tools" "$root/bench" "$tree/"
    mkdir -p "$(dirname "$tree/$1")"
    printf '%s\n' "$2" >>"$tree/$1"
    echo "$tree"
}

plant() {  # file to plant in a fresh copy, the header it includes; prints the copy's path
    plant_line "$1" "#include \"$2\""
}

expect "shm includes plugin" 1 "$(plant shm/journal.cpp plugin/netconf.h)" \
    "shm/journal.cpp: includes plugin/netconf.h"
expect "engine includes tools" 1 "$(plant engine/planted.cpp tools/render_text.h)" \
    "engine/planted.cpp: includes tools/render_text.h"
expect "plugin includes shm" 1 "$(plant plugin/commands.cpp shm/format.h)" \
    "plugin/commands.cpp: includes shm/format.h"
expect "base includes shm" 1 "$(plant base/clock.h shm/format.h)" "base/clock.h: includes shm/format.h"
expect "an engine area includes one above it" 1 \
    "$(plant engine/slots/planted.cpp engine/ops/planted.h)" \
    "engine/slots/planted.cpp: includes engine/ops/planted.h"
expect "the engine includes pools" 1 "$(plant engine/ops/planted.cpp pools/selection.h)" \
    "engine/ops/planted.cpp: includes pools/selection.h"
expect "pools includes plugin" 1 "$(plant pools/selection.cpp plugin/netconf.h)" \
    "pools/selection.cpp: includes plugin/netconf.h"
expect "pools includes shm" 1 "$(plant pools/catalog.cpp shm/format.h)" \
    "pools/catalog.cpp: includes shm/format.h"
expect "plugin includes cluster" 1 "$(plant plugin/commands.cpp cluster/helper_protocol.h)" \
    "plugin/commands.cpp: includes cluster/helper_protocol.h"
expect "cluster includes ipam" 1 "$(plant cluster/node_files.cpp ipam/request.h)" \
    "cluster/node_files.cpp: includes ipam/request.h"
expect "cluster includes pools" 1 "$(plant cluster/block_store.cpp pools/ip_set.h)" \
    "cluster/block_store.cpp: includes pools/ip_set.h"
expect "pools includes ipam" 1 "$(plant pools/selection.cpp ipam/operations.h)" \
    "pools/selection.cpp: includes ipam/operations.h"
expect "ipam includes plugin" 1 "$(plant ipam/operations.cpp plugin/netconf.h)" \
    "ipam/operations.cpp: includes plugin/netconf.h"
expect "kube includes the engine" 1 "$(plant kube/kubeconfig.cpp engine/addr/ip_address.h)" \
    "kube/kubeconfig.cpp: includes engine/addr/ip_address.h"
expect "kube includes pools" 1 "$(plant kube/objects.cpp pools/sticky.h)" \
    "kube/objects.cpp: includes pools/sticky.h"
expect "kube includes ipam" 1 "$(plant kube/api_client.cpp ipam/pod_lookup.h)" \
    "kube/api_client.cpp: includes ipam/pod_lookup.h"
expect "plugin includes kube" 1 "$(plant plugin/commands.cpp kube/pod_protocol.h)" \
    "plugin/commands.cpp: includes kube/pod_protocol.h"
expect "the engine includes kube" 1 "$(plant engine/ops/planted.cpp kube/kubeconfig.h)" \
    "engine/ops/planted.cpp: includes kube/kubeconfig.h"
expect "the cluster agent includes the etcd client" 1 \
    "$(plant cluster/agent.cpp cluster/etcd_client.h)" \
    "cluster/agent.cpp: includes cluster/etcd_client.h"
expect "a tool writes the block cache" 1 \
    "$(plant_line tools/verbs/cluster.cpp 'void f() { (void)cluster::write_block_cache("", {}); }')" \
    "tools/verbs/cluster.cpp: writes the block cache"
expect "the helper's main includes the etcd client" 0 \
    "$(plant tools/cluster_helper.cpp cluster/etcd_client.h)" "every include points down"
expect "ipam includes kube" 0 \
    "$(plant ipam/operations.cpp kube/pod_protocol.h)" "every include points down"
expect "a header beside the file" 0 "$(plant shm/journal.cpp journal.h)" "every include points down"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
