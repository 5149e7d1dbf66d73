#!/usr/bin/env bash
# Issue 15: what caps the tensor pipe near 80 %: the template against its mmaonly copy (almost no
# softmax, no rescale; sol2.py makes both), under ncu at locked clocks, 4,16,4096,128 and
# 1,16,16384,128 fp16.
set -u
exec > >(tee $OUT/skeleton.log) 2>&1
source .device/ncu_prof.sh
python3 .device/s38/sol2.py /tmp/sk
base="PERSISTENT=1 RESCALE_UNDER_QK=1"
while read shape knobs; do
  for v in ref mmaonly; do prof "[$v]" /tmp/sk/$v $shape $base $knobs; done
done <<'L'
4,16,4096,128 BLOCK_N=128
4,16,4096,128 BLOCK_N=160 STREAM_K=1
4,16,4096,128 BLOCK_N=128 PINGPONG=0
1,16,16384,128 BLOCK_N=128
4,16,4096,128 BLOCK_N=128 STAGES=3 TMA_STORE=0
L
