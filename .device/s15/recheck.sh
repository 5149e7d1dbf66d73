#!/usr/bin/env bash
# After e7bea5f (the last KV tile computed after the loop): the KV_INTERLEAVE gates on odd shapes,
# the long-shape elite of issue 15 (it had spilled before the fix), and the sdpa_hopper [gpu] tests.
set -u
PART=1 bash .device/s15/dec2.sh
build-bundle/evo bench --template sdpa_hopper --shape 4,16,4096,128 --set BLOCK_N=160 --set STREAM_K=1 --set PERSISTENT=1 --set RESCALE_UNDER_QK=1 2>&1 | grep -E '^spills|^correctness|^timing|^sm clock'
start=$(date +%s)
build-bundle/evo_tests -f .device/s15/hopper_gpu.txt > $OUT/hopper_gpu.log 2>&1
echo "hopper gpu tests: rc $?, $(( $(date +%s) - start )) s"
grep -E "^All tests passed|^test cases|FAILED|measured$|: incorrect|of [0-9]+ measured" $OUT/hopper_gpu.log | head -30
