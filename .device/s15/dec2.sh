#!/usr/bin/env bash
# Issue 16: the template's KV_INTERLEAVE knob on the H100. Part 1: the gates on odd shapes
# (persistent walks whose tiles have odd KV counts, splits, D = 64/128/256, bf16, causal, three
# consumers). Part 2: evo bench at 8,32:8,16,8192,128 and 1,32:8,1,32768,128, interleaved in two
# rounds, beside the template's best configurations without the knob.
set -u
E=${EVO:-build-bundle/evo}
one() {  # LABEL SHAPE PROBLEM-ARGS -- KNOBS...
  local label=$1 shape=$2 prob=$3; shift 3
  local args=""; for s in "$@"; do args="$args --set $s"; done
  echo "$label $shape $prob: $($E ${CMD:-bench} --template sdpa_hopper --shape $shape $prob $args 2>&1 | grep -E "^verdict|^timing|^correctness|^status|error|sm clock|^smem|^registers|^spills" | cut -c1-110 | tr '\n' ';')"
}
I="KV_INTERLEAVE=1 PINGPONG=0 STREAM_K=0 LAST_CTA_COMBINES=0"
if [ "${PART:-12}" != 2 ]; then
one "gate C2 BN128 S2 IO1 TS1 P1" 2,8,300,900,128 "--problem H_kv=2 --causal" $I NUM_CONSUMERS=2 BLOCK_N=128 STAGES=2 INTRA_OVERLAP=1 TMA_STORE=1 PERSISTENT=1 PACK_GQA=1
one "gate C2 BN80 S2 IO0 TS1 P1" 3,5,1500,129,128 "--problem BF16=1" $I NUM_CONSUMERS=2 BLOCK_N=80 STAGES=2 INTRA_OVERLAP=0 TMA_STORE=1 PERSISTENT=1
one "gate C3 BN64 S3 IO1 TS0 P1" 1,8,100,777,64 "--problem H_kv=2 --problem BF16=1 --causal" $I NUM_CONSUMERS=3 BLOCK_N=64 STAGES=3 INTRA_OVERLAP=1 TMA_STORE=0 PERSISTENT=1 PACK_GQA=1
one "gate C2 BN64 S2 D256" 1,4,1000,5000,256 "" $I NUM_CONSUMERS=2 BLOCK_N=64 STAGES=2 INTRA_OVERLAP=1 TMA_STORE=0
one "gate C2 SPLITS4 FE0" 2,32,3,5000,128 "--problem H_kv=8" $I NUM_CONSUMERS=2 BLOCK_N=64 STAGES=4 INTRA_OVERLAP=0 TMA_STORE=0 SPLITS=4 PACK_GQA=1 FAST_EXP=0
one "gate C2 SPLITS8 RUQ" 1,32,1,1000,128 "--problem H_kv=8" $I NUM_CONSUMERS=2 BLOCK_N=64 STAGES=2 INTRA_OVERLAP=1 RESCALE_UNDER_QK=1 TMA_STORE=0 SPLITS=8 PACK_GQA=1
one "gate C2 one KV tile" 2,8,70,60,128 "--problem H_kv=8" $I NUM_CONSUMERS=2 BLOCK_N=64 STAGES=2 INTRA_OVERLAP=1 TMA_STORE=1 PERSISTENT=1
fi
[ "${PART:-12}" = 1 ] && exit 0
base="FAST_EXP=1 PINGPONG=0 STREAM_K=0 PRODUCER_REGS=24 PACK_GQA=1 LAST_CTA_COMBINES=0"
for round in 1 2; do
  S=8,32,16,8192,128
  one "template 1c BN64 ST4 SP1 IO1 TS1" $S "--problem H_kv=8" NUM_CONSUMERS=1 BLOCK_N=64 STAGES=4 PERSISTENT=0 SPLITS=1 INTRA_OVERLAP=1 TMA_STORE=1 $base
  for cfg in "NUM_CONSUMERS=2 BLOCK_N=128 STAGES=2 INTRA_OVERLAP=0 TMA_STORE=0" "NUM_CONSUMERS=2 BLOCK_N=128 STAGES=2 INTRA_OVERLAP=1 TMA_STORE=1" \
             "NUM_CONSUMERS=2 BLOCK_N=128 STAGES=2 INTRA_OVERLAP=1 TMA_STORE=0" "NUM_CONSUMERS=2 BLOCK_N=64 STAGES=4 INTRA_OVERLAP=1 TMA_STORE=1" \
             "NUM_CONSUMERS=2 BLOCK_N=96 STAGES=2 INTRA_OVERLAP=1 TMA_STORE=1" "NUM_CONSUMERS=3 BLOCK_N=64 STAGES=3 INTRA_OVERLAP=1 TMA_STORE=1" \
             "NUM_CONSUMERS=3 BLOCK_N=64 STAGES=3 INTRA_OVERLAP=0 TMA_STORE=1"; do
    one "interleave [$cfg]" $S "--problem H_kv=8" $base $I $cfg
  done
  S=1,32,1,32768,128
  one "template 1c BN64 ST2 SP16 P1 IO1" $S "--problem H_kv=8" NUM_CONSUMERS=1 BLOCK_N=64 STAGES=2 PERSISTENT=1 SPLITS=16 INTRA_OVERLAP=1 TMA_STORE=0 $base
  for cfg in "NUM_CONSUMERS=2 SPLITS=16 BLOCK_N=64 STAGES=2 INTRA_OVERLAP=1" "NUM_CONSUMERS=2 SPLITS=16 BLOCK_N=128 STAGES=2 INTRA_OVERLAP=1" "NUM_CONSUMERS=2 SPLITS=8 BLOCK_N=64 STAGES=4 INTRA_OVERLAP=1" "NUM_CONSUMERS=2 SPLITS=8 BLOCK_N=128 STAGES=2 INTRA_OVERLAP=1" "NUM_CONSUMERS=3 SPLITS=8 BLOCK_N=64 STAGES=3 INTRA_OVERLAP=1"; do
    one "interleave [$cfg]" $S "--problem H_kv=8" TMA_STORE=0 $base $I $cfg
  done
done
