#!/usr/bin/env bash
# deploy/sync-pools.sh against a stand-in kubectl (no Kubernetes runs here; the stand-in prints
# what `kubectl get <kind> -o yaml` prints): it writes one file per kind that shmipamctl explain
# reads as a pools directory, leaves an unchanged file untouched (so the plugin's snapshot stays
# valid), replaces a changed one by rename, and keeps the last good file when kubectl fails.
#   sync_pools_test.sh SHMIPAMCTL
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
ctl=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin" "$work/pools"
cat >"$work/bin/kubectl" <<'KUBECTL'
#!/usr/bin/env bash
# kubectl get <resource> [name] -o yaml
case "$2" in
spiderippools.spiderpool.spidernet.io)
    [ -f "$STANDIN_DIR/fail" ] && { echo "error: connection refused" >&2; exit 1; }
    cat "$STANDIN_DIR/pools.yaml" ;;
spidersubnets.spiderpool.spidernet.io | spiderreservedips.spiderpool.spidernet.io)
    echo "error: the server doesn't have a resource type \"${2%%.*}\"" >&2; exit 1 ;;
namespaces)
    printf 'apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Namespace\n  metadata: {name: default}\n' ;;
node)
    printf 'apiVersion: v1\nkind: Node\nmetadata:\n  name: %s\n  labels: {rack: r1}\n' "$3" ;;
esac
KUBECTL
chmod +x "$work/bin/kubectl"
pools() {  # the cluster's pools: a List as kubectl writes it, with the given ips
    printf 'apiVersion: v1\nkind: List\nitems:\n- apiVersion: spiderpool.spidernet.io/v2beta1\n  kind: SpiderIPPool\n  metadata: {name: rack}\n  spec:\n    subnet: 10.80.0.0/24\n    ips: ["%s"]\n    nodeAffinity: {matchLabels: {rack: r1}}\n    default: true\n' "$1" >"$work/standin-pools.yaml"
}
export STANDIN_DIR=$work
cp /dev/null "$work/pools.yaml"
fail() { echo "FAILED: $*"; exit 1; }
sync() { PATH="$work/bin:$PATH" bash "$root/deploy/sync-pools.sh" --dir "$work/pools" --node node-a --once; }

pools "10.80.0.10-10.80.0.20"; cp "$work/standin-pools.yaml" "$work/pools.yaml"
sync || fail "first sync"
for f in spiderippools.yaml spidersubnets.yaml spiderreservedips.yaml namespaces.yaml node.yaml; do
    [ -f "$work/pools/$f" ] || fail "$f not written"
done
out=$("$ctl" explain --pools-dir "$work/pools" --node node-a --json) || fail "explain: $out"
grep -q '"allocatable": "11"' <<<"$out" || fail "explain did not read the synced pools: $out"

# Unchanged: the file keeps its inode and mtime.
before=$(stat -c '%i %Y.%y' "$work/pools/spiderippools.yaml")
sleep 1.1
sync || fail "second sync"
[ "$before" = "$(stat -c '%i %Y.%y' "$work/pools/spiderippools.yaml")" ] || fail "unchanged file rewritten"

# Changed: replaced by rename (a new inode), and read.
pools "10.80.0.10-10.80.0.30"; cp "$work/standin-pools.yaml" "$work/pools.yaml"
sync || fail "third sync"
[ "$before" != "$(stat -c '%i %Y.%y' "$work/pools/spiderippools.yaml")" ] || fail "change not written"
out=$("$ctl" explain --pools-dir "$work/pools" --node node-a --json)
grep -q '"allocatable": "21"' <<<"$out" || fail "the change was not read: $out"

# kubectl failing: the last good file stays, the script says why and exits non-zero.
touch "$work/fail"
if sync 2>"$work/err"; then fail "a failed kubectl went unreported"; fi
grep -q "connection refused" "$work/err" || fail "no reason given: $(cat "$work/err")"
grep -q "10.80.0.10-10.80.0.30" "$work/pools/spiderippools.yaml" || fail "last good file lost"
ls -A "$work/pools" | grep -q '^\.' && fail "temp files left: $(ls -A "$work/pools")"
echo "sync-pools: all checks passed"
