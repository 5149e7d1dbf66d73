#!/usr/bin/env bash
# Issue 17, twenty-sixth session: recordings the project does not hold, swept on the H100 for
# the held-out checks of .device/holdout (a landscape per task; no engine setting is chosen on
# them). Each sweep is bounded by SWEEP_S seconds and continues an existing recording, so a
# second call finishes what the first left: WHICH=a|b|c picks the sweeps to run.
set -u
E=build-bundle/evo
S=${SWEEP_S:-280}
mkdir -p $OUT
sweep() {
  local name=$1; shift
  [ -f .device/holdout/$name.jsonl ] && cp .device/holdout/$name.jsonl $OUT/$name.jsonl
  local start=$(date +%s)
  timeout $S $E sweep "$@" --out $OUT/$name.jsonl < /dev/null > $OUT/$name.log 2>&1
  echo "== $name: rc $?, $(( $(date +%s) - start )) s, $(( $(wc -l < $OUT/$name.jsonl) - 1 )) configurations"
  tail -3 $OUT/$name.log | cut -c1-200
}
for w in ${WHICH:-a b c}; do
  case $w in
    a) sweep holdout_rmsnorm_bf16_32768x4096 -t rmsnorm --problem ROWS=32768 --problem COLS=4096 \
         --problem BF16=1 --fix STREAMING=0 CACHE_WEIGHT=0 ;;
    b) sweep holdout_fp16_4x32kv8x16x4096x128 -t sdpa_fp16 --shape 4,32,16,4096,128 --problem H_kv=8 \
         --fix PACK_GQA=1 LAST_CTA_COMBINES=0 WARP_SPECIALIZED=0 PERSISTENT=0 LAZY_RESCALE=0 ;;
    c) sweep holdout_hopper_bf16_2x16x2048x128_causal -t sdpa_hopper --shape 2,16,2048,128 --causal \
         --problem BF16=1 --fix SPLITS=1 PACK_GQA=0 LAST_CTA_COMBINES=0 KV_INTERLEAVE=0 \
         PRODUCER_REGS=24 SOFTMAX_WARP_SYNC=0 TMA_STORE=1 ;;
  esac
done
