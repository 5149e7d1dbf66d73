#!/usr/bin/env bash
# Forty-fifth session: every [gpu] test with the bundle of 190df99 (sdpa_fp8's one-stage barrier).
set -u
mkdir -p $OUT
start=$(date +%s)
timeout ${LIMIT:-560} build-bundle/evo_tests "[gpu]" > $OUT/gpu.log 2>&1
rc=$?
grep -E "^All tests passed|^test cases|^assertions|FAILED|failed|sdpa_fp8.*on NVIDIA|one stage" $OUT/gpu.log | cut -c1-300 | head -40
echo "gpu: rc $rc, $(( $(date +%s) - start )) s"
