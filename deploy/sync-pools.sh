#!/usr/bin/env bash
# Keeps a node's poolsDir in step with the cluster: every SpiderIPPool, SpiderSubnet and
# SpiderReservedIP, the Namespaces and this node's Node object, written as `kubectl get -o yaml`
# writes them (kind: List), one file per kind. Each file is written aside and renamed into place,
# so the plugin never reads half a file (names starting with '.' are skipped by it).
#   sync-pools.sh [--dir /etc/cni/shmipam/pools] [--node NAME] [--interval 10] [--once]
# Needs kubectl with read access to those kinds (a DaemonSet's service account, or a kubeconfig).
set -euo pipefail

dir=/etc/cni/shmipam/pools
node=$(hostname)
interval=10
once=0
while [ $# -gt 0 ]; do
    case "$1" in
    --dir) dir=$2; shift 2 ;;
    --node) node=$2; shift 2 ;;
    --interval) interval=$2; shift 2 ;;
    --once) once=1; shift ;;
    *) echo "usage: $0 [--dir DIR] [--node NAME] [--interval SECONDS] [--once]" >&2; exit 2 ;;
    esac
done
mkdir -p "$dir"

# Writes the output of `kubectl get ARGS -o yaml` to DIR/FILE, only when it changed (an unchanged
# file keeps its timestamps, so the plugin's compiled snapshot stays valid).
sync_one() {
    local file=$1; shift
    local tmp="$dir/.$file.tmp.$$"
    if ! kubectl get "$@" -o yaml >"$tmp" 2>"$tmp.err"; then
        # A kind the cluster does not have (Spiderpool's CRDs not installed) is an empty list;
        # anything else keeps the last good file and says why.
        if grep -q "the server doesn't have a resource type" "$tmp.err"; then
            printf 'apiVersion: v1\nkind: List\nitems: []\n' >"$tmp"
        else
            echo "sync-pools: kubectl get $*: $(cat "$tmp.err")" >&2
            rm -f "$tmp" "$tmp.err"
            return 1
        fi
    fi
    rm -f "$tmp.err"
    if [ -f "$dir/$file" ] && cmp -s "$tmp" "$dir/$file"; then
        rm -f "$tmp"
    else
        mv -f "$tmp" "$dir/$file"
    fi
}

while :; do
    status=0
    sync_one spiderippools.yaml spiderippools.spiderpool.spidernet.io || status=1
    sync_one spidersubnets.yaml spidersubnets.spiderpool.spidernet.io || status=1
    sync_one spiderreservedips.yaml spiderreservedips.spiderpool.spidernet.io || status=1
    sync_one namespaces.yaml namespaces || status=1
    sync_one node.yaml node "$node" || status=1
    [ "$once" -eq 1 ] && exit $status
    sleep "$interval"
done
