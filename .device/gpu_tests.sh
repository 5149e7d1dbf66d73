#!/usr/bin/env bash
# The [gpu] tests named in FILE (one Catch2 spec per line) with build-bundle's evo_tests, under
# LIMIT seconds (default 580, one device command's limit), into $OUT/<FILE's name>.log; prints
# the lines that matter and the time taken. Each session's gpu.sh names its lists.
set -u
file=$1 limit=${2:-580}
name=$(basename "$file" .txt)
start=$(date +%s)
timeout "$limit" build-bundle/evo_tests -d yes -f "$file" > $OUT/$name.log 2>&1
rc=$?
grep -E "^All tests passed|^test cases|FAILED|failed| s: |measured|incorrect|skipped" $OUT/$name.log | cut -c1-220 | head -60
echo "$name: rc $rc, $(( $(date +%s) - start )) s"
