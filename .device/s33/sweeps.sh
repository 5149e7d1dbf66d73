#!/usr/bin/env bash
# Issue 17, thirty-third session: two more recordings the project does not hold, swept on the
# lent GPU (an H200: the H100's processor with faster memory) for the held-out checks of
# .device/holdout. Each sweep is bounded by SWEEP_S seconds and continues the recording in
# .device/s33/ when one is there, so a second call finishes what the first left. The finished
# recordings were moved, gzipped, to .device/holdout/.
set -u
E=build-bundle/evo
S=${SWEEP_S:-285}
mkdir -p $OUT
CONTINUE=.device/s33
source .device/sweep_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
for w in ${WHICH:-d e}; do
  case $w in
    d) sweep holdout_hopper_4x16x4096x64 -t sdpa_hopper --shape 4,16,4096,64 \
         --fix SPLITS=1 PACK_GQA=0 LAST_CTA_COMBINES=0 KV_INTERLEAVE=0 PRODUCER_REGS=24 \
         RESCALE_UNDER_QK=0 FAST_EXP=1 TMA_STORE=1 ;;
    e) sweep holdout_fp16_16x32x1x4096x128 -t sdpa_fp16 --shape 16,32,1,4096,128 --problem H_kv=32 \
         --fix PACK_GQA=0 LAST_CTA_COMBINES=0 WARP_SPECIALIZED=0 LAZY_RESCALE=0 FAST_EXP=1 ;;
  esac
done
