#!/usr/bin/env bash
# The [gpu] tests in two parts (PART=1 or 2), each under one device command's limit.
set -u
start=$(date +%s)
timeout 580 build-bundle/evo_tests -d yes -f .device/s39/gpu_part${PART}.txt > $OUT/gpu_part${PART}.log 2>&1
rc=$?
grep -E "^All tests passed|^test cases|FAILED|failed| s: |measured|incorrect|skipped" $OUT/gpu_part${PART}.log | cut -c1-220 | head -60
echo "part ${PART}: rc $rc, $(( $(date +%s) - start )) s"
