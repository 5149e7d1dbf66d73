#!/usr/bin/env bash
# Issue 16 at 1,32:8,1,32768,128: how the best split-KV call's time divides between the forward
# kernel and the combine kernel (ncu, each kernel alone), beside evo bench's time for the whole
# call, for the best configurations the searches found (BENCHMARKS.md, decode section).
set -u
E=build-bundle/evo
shape=1,32,1,32768,128
B="--template sdpa_hopper --shape $shape --problem H_kv=8"
for cfg in "NUM_CONSUMERS=1 BLOCK_N=64 STAGES=2 SPLITS=16 PACK_GQA=1 PERSISTENT=1 INTRA_OVERLAP=1 PINGPONG=0 TMA_STORE=0 PRODUCER_REGS=24 FAST_EXP=1 LAST_CTA_COMBINES=0" \
           "NUM_CONSUMERS=1 BLOCK_N=128 STAGES=2 SPLITS=16 PACK_GQA=1 PERSISTENT=1 INTRA_OVERLAP=0 PINGPONG=0 TMA_STORE=0 PRODUCER_REGS=24 FAST_EXP=1 LAST_CTA_COMBINES=0" \
           "NUM_CONSUMERS=1 BLOCK_N=128 STAGES=4 SPLITS=16 PACK_GQA=1 PERSISTENT=1 INTRA_OVERLAP=0 PINGPONG=0 TMA_STORE=0 PRODUCER_REGS=24 FAST_EXP=1 LAST_CTA_COMBINES=0"; do
  args=""; for s in $cfg; do args="$args --set $s"; done
  echo "== $cfg"
  $E bench $B $args 2>&1 | grep -E "^verdict|median|correctness" | head -4
  timeout 200 ncu --target-processes all --metrics gpu__time_duration.sum,dram__bytes_read.sum.per_second,sm__cycles_elapsed.avg.per_second \
    -k regex:sdpa_hopper --launch-skip 60 -c 2 $E bench $B $args > $OUT/ncu_dec.txt 2>&1
  grep -E "sdpa_hopper_(fwd|combine)|duration|per_second" $OUT/ncu_dec.txt | sed 's/  */ /g' | cut -c1-120
done
