#!/usr/bin/env bash
# The main job: install, build, then drive the real shmipam binary with the example config:
# one ADD by hand, a few hundred concurrent ADDs and DELs, and the arena as shmipamctl sees it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
echo "== building the plugin, shmipamctl and the storm driver (release build; the first one takes"
echo "   several minutes on 2 cores: progress every 10%)"
cmake --preset release >/dev/null
build_log=$(mktemp)
if ! cmake --build --preset release --target shmipam shmipamctl cni_storm 2>&1 | tee "$build_log" |
    awk '/^\[[0-9]+\/[0-9]+\]/ {
            split(substr($1, 2), step, "/")
            tenth = int(10 * step[1] / step[2])
            if (tenth > shown) { printf "   %d%% (%s)\n", 10 * tenth, $1; shown = tenth; fflush() }
        }'; then
    echo "the build failed; its last lines:" >&2
    tail -n 40 "$build_log" >&2
    exit 1
fi
rm -f "$build_log"

bin=build/release
conf=examples/10-shmipam-bridge.conf
net=shmipam-demo
run_dir=/run/shmipam
if [ "$(id -u)" -ne 0 ] || ! mkdir -p "$run_dir" 2>/dev/null; then
    run_dir=$(mktemp -d)/run  # not root: keep the demo's state in a temporary directory
fi
data_dir=$(mktemp -d)
rm -rf "${run_dir:?}/$net"   # a fresh demo network each time
config=$(mktemp)
# The config as the plugin will see it: the example, with this demo's state directories.
sed -e "s#\"type\": \"shmipam\",#\"type\": \"shmipam\", \"runDir\": \"$run_dir\", \"dataDir\": \"$data_dir\",#" "$conf" >"$config"

echo "== config ($conf)"
cat "$conf"
echo
echo "== one ADD by hand: CNI_COMMAND=ADD $bin/shmipam < config"
CNI_COMMAND=ADD CNI_CONTAINERID=by-hand CNI_NETNS=/var/run/netns/demo CNI_IFNAME=eth0 \
    CNI_PATH=/usr/lib/cni "$bin/shmipam" <"$config"
echo
echo "== 400 concurrent ADDs (32 callers, each a fresh plugin process)"
"$bin/bench/cni_storm" --plugin "$bin/shmipam" --config "$config" -n 400 -k 32 --phase add
echo
echo "== shmipamctl --run-dir $run_dir dump $net (first 12 rows)"
dump=$("$bin/shmipamctl" --run-dir "$run_dir" dump "$net")
sed -n '1,14p' <<<"$dump"
echo "   ..."
tail -n 1 <<<"$dump"
echo
echo "== shmipamctl verify $net"
"$bin/shmipamctl" --run-dir "$run_dir" verify "$net"
echo
echo "== 400 concurrent DELs, and the hand-made one"
"$bin/bench/cni_storm" --plugin "$bin/shmipam" --config "$config" -n 400 -k 32 --phase del
CNI_COMMAND=DEL CNI_CONTAINERID=by-hand CNI_IFNAME=eth0 CNI_PATH=/usr/lib/cni "$bin/shmipam" <"$config"
"$bin/shmipamctl" --run-dir "$run_dir" verify "$net"
dump=$("$bin/shmipamctl" --run-dir "$run_dir" dump "$net")
sed -n '2,3p' <<<"$dump"
tail -n 1 <<<"$dump"
echo
echo "== one caller at a time: 100 ADDs then 100 DELs (the latency a single pod start sees)"
"$bin/bench/cni_storm" --plugin "$bin/shmipam" --config "$config" -n 100 -k 1
rm -f "$config"

echo
echo "== pool mode (docs/pools.md): two Spiderpool pools, a pod that names them by annotation"
pools=$(mktemp -d)
cat >"$pools/pools.yaml" <<'YAML'
apiVersion: spiderpool.spidernet.io/v2beta1
kind: SpiderIPPool
metadata: {name: demo-small}
spec: {subnet: 10.89.0.0/24, ips: ["10.89.0.10-10.89.0.11"], gateway: 10.89.0.1}
---
apiVersion: spiderpool.spidernet.io/v2beta1
kind: SpiderIPPool
metadata: {name: demo-big}
spec: {subnet: 10.89.1.0/24, ips: ["10.89.1.10-10.89.1.200"], gateway: 10.89.1.1}
YAML
pool_config=$(mktemp)
cat >"$pool_config" <<JSON
{"cniVersion": "1.1.0", "name": "shmipam-demo-pools", "type": "bridge",
 "ipam": {"type": "shmipam", "runDir": "$run_dir", "dataDir": "$data_dir", "poolsDir": "$pools"},
 "runtimeConfig": {"io.kubernetes.cri.pod-annotations":
   {"ipam.spidernet.io/ippool": "{\"ipv4\": [\"demo-small\", \"demo-big\"]}"}}}
JSON
rm -rf "${run_dir:?}/_pools/ippool_demo-small" "${run_dir:?}/_pools/ippool_demo-big"
rm -rf "${data_dir:?}/_pools"
echo "shmipamctl explain --config <that network config>:"
"$bin/shmipamctl" explain --config "$pool_config"
for i in 1 2 3; do
    echo "ADD pod-$i:"
    CNI_COMMAND=ADD CNI_CONTAINERID="pool-demo-$i" CNI_NETNS=/var/run/netns/demo CNI_IFNAME=eth0 \
        CNI_ARGS="IgnoreUnknown=1;K8S_POD_NAMESPACE=demo;K8S_POD_NAME=pod-$i" \
        CNI_PATH=/usr/lib/cni "$bin/shmipam" <"$pool_config"
done
echo "(demo-small has two addresses: the third pod fell through to demo-big)"
"$bin/shmipamctl" --run-dir "$run_dir" verify pool/demo-small
"$bin/shmipamctl" --run-dir "$run_dir" verify pool/demo-big
for i in 1 2 3; do
    CNI_COMMAND=DEL CNI_CONTAINERID="pool-demo-$i" CNI_IFNAME=eth0 CNI_PATH=/usr/lib/cni \
        "$bin/shmipam" <"$pool_config"
done
rm -rf "$pools" "$pool_config"
