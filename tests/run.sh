#!/usr/bin/env bash
# Runs every test program of one build and prints the sum as "N passed, N failed".
# Usage: tests/run.sh [BUILD_DIR]   (default: build). Exit status 1 if anything failed.
set -u
cd "$(dirname "$0")/.."
build=${1:-build}
passed=0; failed=0; broken=0
for t in "$build"/tests/test_*; do
    [ -x "$t" ] || continue
    out=$("$t" 2>&1); rc=$?
    line=$(printf '%s\n' "$out" | grep -E '^[a-z_0-9]+: [0-9]+ passed, [0-9]+ failed$' | tail -n 1)
    if [ -z "$line" ]; then
        printf '%s\n' "$out"; echo "$t: exited $rc without a tally"; broken=$((broken + 1)); continue
    fi
    [ $rc -eq 0 ] || printf '%s\n' "$out"
    echo "$line"
    p=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed.*/\1/'); f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed$/\1/')
    passed=$((passed + p)); failed=$((failed + f))
done
failed=$((failed + broken))
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
