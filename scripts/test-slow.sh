#!/usr/bin/env bash
# The test command on a machine made slow on purpose: CPU-bound processes (one per core unless
# SLOW_HOGS says otherwise) run beside the whole of scripts/test.sh, so the tests get about half
# the CPU time they would have and every plugin call takes two to three times as long. A test
# whose precondition rests on the machine's speed (a kill window in fixed microseconds, a count
# of operations that "is enough" to reach some state) fails here first.
#   bash scripts/test-slow.sh              # one hog per core
#   SLOW_HOGS=4 bash scripts/test-slow.sh  # slower still
set -euo pipefail
cd "$(dirname "$0")/.."
hogs=${SLOW_HOGS:-$(nproc)}
pids=()
stop_hogs() { [ ${#pids[@]} -eq 0 ] || kill "${pids[@]}" 2>/dev/null || true; }
trap stop_hogs EXIT
for ((i = 0; i < hogs; i++)); do
    (while :; do :; done) &
    pids+=($!)
done
echo "== $hogs CPU-bound processes run beside the tests" >&2
bash scripts/test.sh "$@"
