#!/usr/bin/env bash
# Issue 17, forty-fifth session: two more recordings the project does not hold, swept on the lent
# GPU (an H200; no H100 is lent) with the bundle of 8613cc6, to judge engine changes on landscapes
# no setting was chosen on: sdpa_fp8 at a long causal prefill with e4m3 Q and sdpa_fp16
# at a medium D=128 prefill. Each sweep is bounded by SWEEP_S seconds and continues the recording
# in .device/s45/ when one is there.
set -u
E=build-bundle/evo
S=${SWEEP_S:-270}
mkdir -p $OUT
CONTINUE=.device/s45
source .device/sweep_lib.sh
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
for w in ${WHICH:-f m}; do
  case $w in
    f) sweep holdout_fp8_2x16x4096x128_causal_qfp8 -t sdpa_fp8 --shape 2,16,4096,128 --causal --problem Q_FP8=1 ;;
    m) sweep holdout_fp16_8x16x1024x128 -t sdpa_fp16 --shape 8,16,1024,128 \
         --fix SPLITS=1 PACK_GQA=0 LAST_CTA_COMBINES=0 ;;
  esac
done
