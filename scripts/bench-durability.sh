#!/usr/bin/env bash
# Durable-commit figures: exec-level ADD and DEL latency (a fresh plugin process per call, one
# caller at a time) for each journal durability / backend, with the journal on disk and on
# tmpfs, all in one run. Prints a Markdown table (docs/durability.md holds the last one).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target shmipam cni_storm >/dev/null
n=${N:-400}
disk=$(mktemp -d "${TMPDIR:-/var/tmp}/shmipam-bench-XXXXXX")
shm=$(mktemp -d /dev/shm/shmipam-bench-XXXXXX)
trap 'rm -rf "$disk" "$shm"' EXIT
conf=examples/10-shmipam-bridge.conf

row() {  # label data_dir durability backend
    local run="$shm/run-$RANDOM$RANDOM"
    local out
    out=$(build/release/bench/cni_storm --plugin build/release/shmipam --config "$conf" -n "$n" -k 1 \
        --set-ipam "runDir=$run" --set-ipam "dataDir=$2/data-$RANDOM$RANDOM" \
        --set-ipam "durability=$3" --set-ipam "durabilityBackend=$4")
    local add del
    add=$(awk '/^ADD/ {print $7" | "$13" | "$16}' <<<"$out")
    del=$(awk '/^DEL/ {print $7" | "$13" | "$16}' <<<"$out")
    echo "| $1 | $add | $del |"
}

echo "| journal on, durability, backend | ADD p50 ms | ADD p99 ms | ADD max ms | DEL p50 ms | DEL p99 ms | DEL max ms |"
echo "|---|---:|---:|---:|---:|---:|---:|"
floor=$(build/release/bench/cni_storm --plugin /bin/true --config "$conf" -n "$n" -k 1 --phase add |
    awk '/^ADD/ {print $7" | "$13" | "$16}')
echo "| floor: /bin/true through the same spawner | $floor | | | |"
for round in 1 2; do
    row "disk, fsync, fdatasync" "$disk" fsync fdatasync
    row "disk, fsync, io_uring" "$disk" fsync io_uring
    row "tmpfs, fsync, fdatasync" "$shm" fsync fdatasync
    row "tmpfs, fsync, io_uring" "$shm" fsync io_uring
    row "tmpfs, none" "$shm" none fdatasync
done
