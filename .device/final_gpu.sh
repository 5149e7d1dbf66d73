#!/usr/bin/env bash
# The [gpu] tests in two parts (each under the 10-minute limit of one device command).
set -u
start=$(date +%s)
build-bundle/evo_tests -f .device/gpu_part${PART}.txt > $OUT/gpu_part${PART}.log 2>&1
rc=$?
grep -E "^All tests passed|^test cases|FAILED|failed" $OUT/gpu_part${PART}.log | head -20
echo "part ${PART}: rc $rc, $(( $(date +%s) - start )) s"
