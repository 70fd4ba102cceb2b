#!/usr/bin/env bash
# The node pass's cost (shmipamctl cluster pass, docs/cluster.md): one node holding 200 pods in
# one pool of /26 blocks against a local 3-member etcd; the wall time of a pass (the exec, the
# store's reads, the pool state's sweep, the cache compared), 21 runs. Prints a Markdown table.
#   bash scripts/bench-node-pass.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset release >/dev/null
cmake --build --preset release --target shmipam shmipam-cluster shmipamctl >/dev/null
work=$(mktemp -d "${TMPDIR:-/var/tmp}/node-pass-XXXXXX")
trap 'bash scripts/local-etcd.sh stop "$work/etcd" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
endpoints=$(bash scripts/local-etcd.sh start "$work/etcd")
mkdir -p "$work/pools"
cat >"$work/pools/pool.yaml" <<YAML
apiVersion: spiderpool.spidernet.io/v2beta1
kind: SpiderIPPool
metadata: {name: shared}
spec: {subnet: 10.200.0.0/16, ips: ["10.200.0.0-10.200.255.255"], default: true}
YAML
endpoint_list=$(printf '"%s",' ${endpoints//,/ })
cat >"$work/conf.json" <<JSON
{"cniVersion": "1.1.0", "name": "net", "type": "bridge",
 "ipam": {"type": "shmipam", "runDir": "$work/run", "dataDir": "$work/data",
          "poolsDir": "$work/pools", "nodeName": "node-0", "durability": "none", "reuseDelay": 0,
          "claimAheadPercent": 0, "clusterHelper": "$PWD/build/release/shmipam-cluster",
          "etcd": {"endpoints": [${endpoint_list%,}]}}}
JSON
for i in $(seq 1 200); do
    CNI_COMMAND=ADD CNI_CONTAINERID="c$i" CNI_NETNS=/x CNI_IFNAME=eth0 CNI_PATH=/x \
        build/release/shmipam <"$work/conf.json" >/dev/null
done
python3 - "$work/conf.json" "$(wc -l <"$work/data/_cluster/shared.blocks")" <<'PY'
import statistics, subprocess, sys, time
conf, blocks = sys.argv[1], sys.argv[2]
times = []
for _ in range(21):
    t = time.perf_counter()
    subprocess.run(["build/release/shmipamctl", "cluster", "pass", "--config", conf],
                   capture_output=True, check=True)
    times.append((time.perf_counter() - t) * 1000)
times.sort()
print("| node pass (1 pool, %s blocks, 200 pods) | p50 | p90 | max |" % blocks)
print("|---|---:|---:|---:|")
print("| wall time per pass, 21 runs | %.1f ms | %.1f ms | %.1f ms |"
      % (statistics.median(times), times[int(len(times) * 0.9)], times[-1]))
PY
