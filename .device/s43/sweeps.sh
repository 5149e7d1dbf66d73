#!/usr/bin/env bash
# Issue 17, forty-third session: two more recordings the project does not hold, swept on the
# lent GPU (an H200; no H100 is lent) for the held-out checks of .device/holdout. Each sweep is
# bounded by SWEEP_S seconds and continues the recording in .device/s43/ when one is there.
set -u
E=build-bundle/evo
S=${SWEEP_S:-285}
mkdir -p $OUT
CONTINUE=.device/s43
source .device/sweep_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
for w in ${WHICH:-f h}; do
  case $w in
    f) sweep holdout_fp8_8x16x1024x64_qfp8 -t sdpa_fp8 --shape 8,16,1024,64 --problem Q_FP8=1 ;;
    h) sweep holdout_hopper_bf16_2x16x4096x128 -t sdpa_hopper --shape 2,16,4096,128 --problem BF16=1 \
         --fix SPLITS=1 PACK_GQA=0 LAST_CTA_COMBINES=0 PRODUCER_REGS=24 TMA_STORE=1 \
         SOFTMAX_WARP_SYNC=0 KV_INTERLEAVE=0 FAST_EXP=1 ;;
    d) sweep holdout_fp16_2x16x2048x256_causal -t sdpa_fp16 --shape 2,16,2048,256 --causal \
         --fix SPLITS=1 PACK_GQA=0 LAST_CTA_COMBINES=0 ;;
    r) sweep holdout_rmsnorm_fp16_8192x1024 -t rmsnorm --problem ROWS=8192 --problem COLS=1024 \
         --fix STREAMING=0 CACHE_WEIGHT=0 ;;
  esac
done
