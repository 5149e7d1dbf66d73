#!/usr/bin/env bash
# Forty-fifth session: the [gpu] tests that the first call's 560 s did not reach, as far as the
# time left allows (the list in .device/s45/gpu_rest.txt, last ones first).
set -u
mkdir -p $OUT
start=$(date +%s)
tac .device/s45/gpu_rest.txt > $OUT/rest.txt
timeout ${LIMIT:-270} build-bundle/evo_tests -d yes -f $OUT/rest.txt > $OUT/gpu_rest.log 2>&1
rc=$?
grep -E "^All tests passed|^test cases|^assertions|FAILED| s: " $OUT/gpu_rest.log | cut -c1-200 | head -40
echo "gpu rest: rc $rc, $(( $(date +%s) - start )) s"
