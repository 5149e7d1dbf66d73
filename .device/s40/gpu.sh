#!/usr/bin/env bash
# [gpu] tests by list: LIST=part1|part2|lagged (.device/s40/gpu_LIST.txt; part1 and part2 are all
# of them, each under one device command's limit).
set -u
start=$(date +%s)
timeout 580 build-bundle/evo_tests -d yes -f .device/s40/gpu_${LIST}.txt > $OUT/gpu_${LIST}.log 2>&1
rc=$?
grep -E "^All tests passed|^test cases|FAILED|failed| s: |measured|incorrect|skipped" $OUT/gpu_${LIST}.log | cut -c1-220 | head -60
echo "gpu ${LIST}: rc $rc, $(( $(date +%s) - start )) s"
