#!/usr/bin/env bash
# Cluster mode on one machine (docs/cluster.md): a local 3-member etcd, three simulated nodes
# (each its own state directories and node name) sharing one pool cut into /27 blocks, the real
# plugin and cluster helper. Shows blocks claimed per node, allocation going on with etcd gone,
# the clear error when a node needs a block and etcd is gone, and empty blocks given back.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target shmipam shmipam-cluster shmipamctl cni_storm 2>&1 | tail -n 1

bin=$PWD/build/release
work=$(mktemp -d)
etcd_dir=$work/etcd
trap 'bash scripts/local-etcd.sh stop "$etcd_dir"; rm -rf "$work"' EXIT

echo "== a 3-member etcd on loopback (scripts/local-etcd.sh)"
endpoints=$(bash scripts/local-etcd.sh start "$etcd_dir")
echo "$endpoints"
json_endpoints="\"${endpoints//,/\", \"}\""

mkdir -p "$work/pools"
cat >"$work/pools/pool.yaml" <<'YAML'
apiVersion: spiderpool.spidernet.io/v2beta1
kind: SpiderIPPool
metadata: {name: demo}
spec: {subnet: 10.66.0.0/24, ips: ["10.66.0.2-10.66.0.254"], gateway: 10.66.0.1, default: true}
YAML
sleep 3  # out of the pools directory's racy window (docs/pools.md)
config() {  # config NODE -> the node's network config file
    local f=$work/$1.conf
    cat >"$f" <<JSON
{"cniVersion": "1.1.0", "name": "cluster-demo", "type": "bridge",
 "ipam": {"type": "shmipam", "poolsDir": "$work/pools", "nodeName": "$1",
          "runDir": "$work/$1/run", "dataDir": "$work/$1/data", "blockSize": 27,
          "reuseDelay": 0, "blockMinAgeS": 0, "clusterHelper": "$bin/shmipam-cluster",
          "etcd": {"endpoints": [$json_endpoints], "prefix": "/shmipam-demo", "budgetMs": 3000}}}
JSON
    echo "$f"
}

echo
echo "== the config of node-a"
cat "$(config node-a)"
echo
for node in node-a node-b node-c; do
    n=$([ $node = node-a ] && echo 40 || echo 20)
    n=$([ $node = node-c ] && echo 36 || echo "$n")
    echo "== $n concurrent ADDs on $node (a fresh plugin process each)"
    "$bin/bench/cni_storm" --plugin "$bin/shmipam" --config "$(config $node)" -n "$n" -k 8 \
        --phase add
done
echo
echo "== shmipamctl cluster ls --config node-a.conf: every node's blocks, node-a's beside them"
"$bin/shmipamctl" cluster ls --config "$work/node-a.conf"

echo
echo "== every etcd member killed; node-b still has room in its blocks (no etcd call)"
bash scripts/local-etcd.sh stop "$etcd_dir"
ok=0
for i in $(seq 1 40); do
    if out=$(CNI_COMMAND=ADD CNI_CONTAINERID="node-b-late-$i" CNI_NETNS=/x CNI_IFNAME=eth0 \
        CNI_PATH=/x "$bin/shmipam" <"$work/node-b.conf"); then
        ok=$((ok + 1))
    else
        echo "ADD $((20 + i)) on node-b needs a new block, and the answer is:"
        echo "$out"
        break
    fi
done
echo "$ok more ADDs on node-b succeeded without etcd"

echo
echo "== etcd back; all of node-c's pods deleted: one block given back, the last one kept"
bash scripts/local-etcd.sh restart "$etcd_dir" >/dev/null
"$bin/shmipamctl" cluster ls --config "$work/node-c.conf" | grep -E "POOL|node-c" || true
"$bin/bench/cni_storm" --plugin "$bin/shmipam" --config "$work/node-c.conf" -n 36 -k 8 --phase del
sleep 1  # the helper a DEL started, detached, gives the block back
"$bin/shmipamctl" cluster ls --config "$work/node-c.conf" | grep -E "POOL|node-c|blocks"
echo
echo "== shmipamctl verify, on every node"
for node in node-a node-b node-c; do
    "$bin/shmipamctl" --run-dir "$work/$node/run" verify pool/demo | tail -n 1
done
