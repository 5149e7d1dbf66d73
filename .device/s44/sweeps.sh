#!/usr/bin/env bash
# Issue 17, forty-fourth session: two more recordings the project does not hold, swept on the
# lent GPU (an H200; no H100 is lent): sdpa_fp16 at a speculative-decoding task (128 queries
# against 8192 keys, grouped heads) and sdpa_hopper at a short fp16 prefill; later (WHICH=l) a
# long causal sdpa_fp16 at D=64. Each sweep is
# bounded by SWEEP_S seconds and continues the recording in .device/s44/ when one is there.
set -u
E=build-bundle/evo
S=${SWEEP_S:-270}
mkdir -p $OUT
CONTINUE=.device/s44
source .device/sweep_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
for w in ${WHICH:-g p}; do
  case $w in
    g) sweep holdout_fp16_8x32kv8x128x8192x128 -t sdpa_fp16 --shape 8,32,128,8192,128 --problem H_kv=8 \
         --fix WARP_SPECIALIZED=0 LAZY_RESCALE=0 LAST_CTA_COMBINES=0 FAST_EXP=1 PERSISTENT=0 ;;
    p) sweep holdout_hopper_8x16x512x128 -t sdpa_hopper --shape 8,16,512,128 \
         --fix SPLITS=1 PACK_GQA=0 LAST_CTA_COMBINES=0 PRODUCER_REGS=24 TMA_STORE=1 \
         SOFTMAX_WARP_SYNC=0 KV_INTERLEAVE=0 FAST_EXP=1 ;;
    l) sweep holdout_fp16_4x16x8192x64_causal -t sdpa_fp16 --shape 4,16,8192,64 --causal \
         --fix SPLITS=1 PACK_GQA=0 LAST_CTA_COMBINES=0 FAST_EXP=1 ;;
  esac
done
