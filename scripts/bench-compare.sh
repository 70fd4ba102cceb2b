#!/usr/bin/env bash
# Two builds of the plugin side by side in one run, for a closing note's before-and-after: the
# exec'd ADD in ranges mode and pool mode (bench/pool_bench) and in cluster mode against a local
# 3-member etcd (bench/cluster_bench), the two builds in turns, ROUNDS times each, then the
# median of each build's p50s and their ratio. These machines are noisy: compare the ratio of
# one run, never figures of two runs.
#   bash scripts/bench-compare.sh OLD_DIR NEW_DIR [ROUNDS]
# Each DIR holds a build's shmipam and shmipam-cluster (copy them aside before rebuilding).
set -euo pipefail
cd "$(dirname "$0")/.."
old=${1:?usage: bench-compare.sh OLD_DIR NEW_DIR [ROUNDS]}
new=${2:?usage: bench-compare.sh OLD_DIR NEW_DIR [ROUNDS]}
rounds=${3:-5}
old=$(cd "$old" && pwd)
new=$(cd "$new" && pwd)
cmake --preset release >/dev/null
cmake --build --preset release --target pool_bench cluster_bench >/dev/null
work=$(mktemp -d "${TMPDIR:-/var/tmp}/bench-compare-XXXXXX")
etcd_dir="$work/etcd"
trap 'bash scripts/local-etcd.sh stop "$etcd_dir" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
endpoints=$(bash scripts/local-etcd.sh start "$etcd_dir")

for ((r = 0; r < rounds; r++)); do
    for build in old new; do
        dir=$old
        [ "$build" = new ] && dir=$new
        build/release/bench/pool_bench --plugin "$dir/shmipam" --work "$work/pools-$build-$r" \
            --calls 400 --rounds 4 --pools 1 --json "$work/pool-$build-$r.json" >/dev/null
        build/release/bench/cluster_bench --plugin "$dir/shmipam" --helper "$dir/shmipam-cluster" \
            --endpoints "$endpoints" --work "$work/cluster-$build-$r" --nodes 4 --pods 400 -k 4 \
            --claims 1 --claimers 1 --json "$work/cluster-$build-$r.json" >/dev/null
        rm -rf "$work/pools-$build-$r" "$work/cluster-$build-$r"
    done
done

python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def p50s(build, kind):
    out = {}
    for r in range(rounds):
        doc = json.load(open(f"{work}/{kind}-{build}-{r}.json"))
        if kind == "pool":
            for row in doc:
                out.setdefault(f"{row['mode']} ADD", []).append(row["add_p50_us"] / 1000)
        else:
            for phase, name in (("cluster_add", "cluster ADD"), ("cluster_del", "cluster DEL"),
                                ("local_add", "pool mode (no etcd) ADD, concurrent")):
                out.setdefault(name, []).append(doc[phase]["p50_ms"])
    return out
old = {**p50s("old", "pool"), **p50s("old", "cluster")}
new = {**p50s("new", "pool"), **p50s("new", "cluster")}
print(f"| p50 (median of {rounds} rounds, builds in turns) | before (ms) | after (ms) | after / before |")
print("|---|---:|---:|---:|")
for key in old:
    a, b = statistics.median(old[key]), statistics.median(new[key])
    print(f"| {key} | {a:.3f} | {b:.3f} | {b / a:.3f} |")
PY
