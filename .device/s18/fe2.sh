#!/usr/bin/env bash
# FAST_EXP=2 (exponentials of fp16 pairs, P left packed) on the H100: the gates on odd shapes,
# then ncu at locked clocks (tensor pipe) at 4,16,4096,128 and 1,16,16384,128 against FAST_EXP=1,
# interleaved, then evo bench timings.
set -u
source .device/ncu_prof.sh
source .device/trace_tile.sh
if [ "${PART:-12}" != 2 ]; then
for fe in 2 1; do
gate "gate FE$fe elite" 4,16,4096,128 "" $(with_knobs "BLOCK_N=160 FAST_EXP=$fe")
gate "gate FE$fe causal pack" 2,8,300,900,128 "--problem H_kv=2 --causal" $(with_knobs "FAST_EXP=$fe PACK_GQA=1 STREAM_K=0")
gate "gate FE$fe odd D64 causal" 3,5,1500,129,64 "--causal" $(with_knobs "FAST_EXP=$fe NUM_CONSUMERS=3 STAGES=4 TMA_STORE=0")
gate "gate FE$fe D256" 1,4,1000,5000,256 "" $(with_knobs "FAST_EXP=$fe BLOCK_N=64 PINGPONG=0 STREAM_K=0 TMA_STORE=0")
gate "gate FE$fe splits" 2,32,3,5000,128 "--problem H_kv=8" NUM_CONSUMERS=1 BLOCK_N=64 STAGES=4 INTRA_OVERLAP=1 TMA_STORE=0 SPLITS=4 PACK_GQA=1 FAST_EXP=$fe PINGPONG=0
gate "gate FE$fe interleave" 8,32,16,8192,128 "--problem H_kv=8" NUM_CONSUMERS=2 BLOCK_N=128 STAGES=2 INTRA_OVERLAP=0 KV_INTERLEAVE=1 PINGPONG=0 PACK_GQA=1 FAST_EXP=$fe
gate "gate FE$fe no overlap" 2,8,2048,128 "" $(with_knobs "FAST_EXP=$fe INTRA_OVERLAP=0 RESCALE_UNDER_QK=0")
done
fi
[ "${PART:-12}" = 1 ] && exit 0
S=4,16,4096,128
for r in 1 2; do
  for fe in 1 2; do
    prof "[BN160 SK1 FE$fe]" "" $S $(with_knobs "BLOCK_N=160 FAST_EXP=$fe")
  done
done
for fe in 1 2; do
  prof "[BN128 SK1 FE$fe]" "" $S $(with_knobs "FAST_EXP=$fe")
  prof "[BN160 SK0 FE$fe]" "" $S $(with_knobs "BLOCK_N=160 STREAM_K=0 FAST_EXP=$fe")
  prof "[BN192 SK1 TS0 FE$fe]" "" $S $(with_knobs "BLOCK_N=192 TMA_STORE=0 FAST_EXP=$fe")
done
for fe in 1 2; do
  prof "[BN160 SK1 FE$fe]" "" 1,16,16384,128 $(with_knobs "BLOCK_N=160 FAST_EXP=$fe")
done
for r in 1 2; do
  for fe in 1 2; do
    bench "bench BN160 SK1 FE$fe" $S $(with_knobs "BLOCK_N=160 FAST_EXP=$fe")
  done
done
