#!/usr/bin/env bash
# Writes plugin/plugin.order: the functions an exec'd plugin runs on its common paths (ADD,
# repeated ADD, CHECK, DEL, GC, STATUS, VERSION; ranges mode IPv4 and IPv6, pool mode), which
# the release build's linker (lld, --symbol-ordering-file) places side by side at the start of
# the text. An exec pays for every page of code it touches: together, they are a few pages
# instead of scattered over three megabytes (docs/performance.md, "Code layout").
#
# Run after changes that add or rename functions on those paths (a stale list costs speed,
# never correctness: a name not in the binary is ignored, a function not in the list goes
# where the linker puts it). Needs valgrind (apt-get install valgrind).
#   bash scripts/function-order.sh
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "function-order.sh: needs valgrind" >&2; exit 1; }
cmake --preset release >/dev/null
cmake --build --preset release --target shmipam >/dev/null
plugin=$PWD/build/release/shmipam
work=$(mktemp -d "${TMPDIR:-/tmp}/shmipam-order-XXXXXX")
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT

mkdir -p "$work/pools"
cat > "$work/pools/pools.yaml" <<'YAML'
apiVersion: v1
kind: List
items:
- apiVersion: spiderpool.spidernet.io/v2beta1
  kind: SpiderIPPool
  metadata: {name: v4}
  spec: {subnet: 10.77.0.0/24, ips: ["10.77.0.10-10.77.0.200"], gateway: 10.77.0.1, default: true}
- apiVersion: spiderpool.spidernet.io/v2beta1
  kind: SpiderIPPool
  metadata: {name: v6}
  spec: {subnet: "fd77::/120", ips: ["fd77::10-fd77::ff"], gateway: "fd77::1", default: true}
YAML
# Old enough for the snapshot to be written (a file changed within two seconds is re-read, and
# touch sets the ctime to now): the traced calls take the common path, the snapshot.
touch -d '1 hour ago' "$work/pools/pools.yaml" "$work/pools"
sleep 3
common='"type": "shmipam", "runDir": "'$work'/run", "dataDir": "'$work'/data"'
echo '{"cniVersion": "1.1.0", "name": "r", "type": "bridge", "ipam": {'"$common"',
  "ranges": [[{"subnet": "10.66.0.0/24"}], [{"subnet": "fd66::/120"}]]}}' > "$work/ranges.json"
echo '{"cniVersion": "1.1.0", "name": "p", "type": "bridge", "ipam": {'"$common"',
  "poolsDir": "'$work'/pools", "nodeName": "n"}}' > "$work/pools.json"
# IPv4 only, a named pool, no journal sync: as bench/pool_bench measures.
echo '{"cniVersion": "1.1.0", "name": "r4", "type": "bridge", "ipam": {'"$common"',
  "durability": "none", "ranges": [[{"subnet": "10.67.0.0/24"}]]}}' > "$work/ranges4.json"
echo '{"cniVersion": "1.1.0", "name": "p4", "type": "bridge", "ipam": {'"$common"',
  "durability": "none", "poolsDir": "'$work'/pools", "nodeName": "n",
  "default_ipv4_ippool": ["v4"]}}' > "$work/pools4.json"
# The invocation log on (ipam.logFile): its functions placed after the common paths' own.
echo '{"cniVersion": "1.1.0", "name": "r5", "type": "bridge", "ipam": {'"$common"',
  "durability": "none", "ranges": [[{"subnet": "10.68.0.0/24"}]],
  "logFile": "'$work'/shmipam.log"}}' > "$work/logged.json"
echo '{"cniVersion": "1.1.0", "name": "r", "type": "bridge", "ipam": {'"$common"',
  "ranges": [[{"subnet": "10.66.0.0/24"}], [{"subnet": "fd66::/120"}]]},
  "cni.dev/valid-attachments": [{"containerID": "keep", "ifname": "eth0"}]}' > "$work/gc.json"

n=0
run() {  # run COMMAND CONFIG [traced]
    n=$((n + 1))
    local out=/dev/null
    [ "${3:-}" = traced ] && out=$work/trace.$n
    CNI_COMMAND=$1 CNI_CONTAINERID=c$((n % 3)) CNI_NETNS=/x CNI_IFNAME=eth0 CNI_PATH=/x \
        CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=p" \
        valgrind --tool=callgrind --demangle=no --callgrind-out-file="$out" \
        "$plugin" < "$work/$2" >/dev/null 2>&1 || true
}
for cfg in ranges.json pools.json ranges4.json pools4.json; do
    run ADD "$cfg"  # creates the state: not a common path
    run DEL "$cfg"
    for cmd in ADD ADD CHECK DEL; do run "$cmd" "$cfg" traced; done
done
run ADD logged.json
run DEL logged.json
for cmd in ADD DEL; do run "$cmd" logged.json traced; done
run GC gc.json traced
run STATUS ranges.json traced
run VERSION ranges.json traced

# Every function named in the traces, the ADDs' first; callgrind's "'2" marks recursion depth.
for f in $(ls "$work"/trace.* | sort -t. -k2 -n); do
    grep -oE '^c?fn=\([0-9]+\) .*' "$f" | sed -E "s/^c?fn=\([0-9]+\) //; s/'[0-9]+$//"
done | grep -v '^0x' | grep -v '^shmipam_hot_text_end$' | awk '!seen[$0]++' > plugin/plugin.order
# Last: the marker plugin/main.cpp maps the ordered functions up to.
echo shmipam_hot_text_end >> plugin/plugin.order
echo "plugin/plugin.order: $(wc -l < plugin/plugin.order) functions" >&2
