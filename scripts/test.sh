#!/usr/bin/env bash
# The test command: installs what it needs, builds, runs every test.
#   0. the layering: every #include points down (scripts/check-layers.sh); every script parses
#      (scripts/check-scripts.sh)
#   1. ASan + UBSan build of the unit tests
#   2. TSan build of the engine's concurrency tests
#   3. optimised build with fault points: processes killed at every step, SIGKILL storms
#   4. release build (statically linked plugin): unit, exec-level and end-to-end tests via ctest
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
jobs=$(nproc)

echo "== layers, scripts"
bash scripts/check-layers.sh
bash scripts/check-scripts.sh

echo "== ASan + UBSan: unit tests"
cmake --preset debug >/dev/null
cmake --build --preset debug --target unit_tests -j "$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    ./build/debug/tests/unit_tests --gtest_brief=1

echo "== TSan: concurrency tests"
cmake --preset tsan >/dev/null
cmake --build --preset tsan --target unit_tests -j "$jobs"
TSAN_OPTIONS=halt_on_error=1 \
    ./build/tsan/tests/unit_tests --gtest_brief=1 \
    --gtest_filter='Concurrency.*:AttachmentIndex*:Healing*:SlotOps*:JournalCompaction.Concurrent*'

echo "== fault points: crash tests"
cmake --preset faults >/dev/null
cmake --build --preset faults --target crash_tests -j "$jobs"
ctest --test-dir build/faults -L crash --output-on-failure -j "$jobs"

echo "== release: unit, exec-level and end-to-end tests"
cmake --preset release >/dev/null
cmake --build --preset release -j "$jobs"
ctest --test-dir build/release --output-on-failure -j "$jobs"
