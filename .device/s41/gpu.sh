#!/usr/bin/env bash
# [gpu] tests by list: LIST=hopper (.device/s41/gpu_LIST.txt) or s40's part1|part2|lagged.
set -u
start=$(date +%s)
f=.device/s41/gpu_${LIST}.txt; [ -f $f ] || f=.device/s40/gpu_${LIST}.txt
timeout ${LIMIT:-580} build-bundle/evo_tests -d yes -f $f > $OUT/gpu_${LIST}.log 2>&1
rc=$?
grep -E "^All tests passed|^test cases|FAILED|failed| s: |measured|incorrect|skipped" $OUT/gpu_${LIST}.log | cut -c1-220 | head -60
echo "gpu ${LIST}: rc $rc, $(( $(date +%s) - start )) s"
