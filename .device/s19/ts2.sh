#!/usr/bin/env bash
# TMA_STORE=2 (O staged one 64-column block at a time, 8 KB a consumer) on the H100: the gates on
# odd shapes, then ncu at locked clocks (tensor pipe) at 4,16,4096,128 and 1,16,16384,128, the
# 176-key tiles it makes room for beside the elite, then evo bench timings interleaved.
set -u
source .device/ncu_prof.sh
source .device/trace_tile.sh
if [ "${PART:-12}" != 2 ]; then
gate "gate TS2 BN176 SK1" 4,16,4096,128 "" $(with_knobs "BLOCK_N=176 TMA_STORE=2")
gate "gate TS2 odd bf16 causal" 3,5,1500,1300,128 "--causal --problem BF16=1" $(with_knobs "BLOCK_N=176 TMA_STORE=2")
gate "gate TS2 causal pack" 2,8,300,900,128 "--problem H_kv=2 --causal" $(with_knobs "TMA_STORE=2 PACK_GQA=1 STREAM_K=0")
gate "gate TS2 D256" 1,4,1000,5000,256 "" $(with_knobs "TMA_STORE=2 BLOCK_N=64 STREAM_K=0 RESCALE_UNDER_QK=0")
gate "gate TS2 D256 SK odd" 2,3,777,1234,256 "--causal" $(with_knobs "TMA_STORE=2 BLOCK_N=64 RESCALE_UNDER_QK=0")
gate "gate TS2 interleave" 8,32,16,8192,128 "--problem H_kv=8" NUM_CONSUMERS=2 BLOCK_N=128 STAGES=2 INTRA_OVERLAP=0 KV_INTERLEAVE=1 PINGPONG=0 PACK_GQA=1 TMA_STORE=2
gate "gate TS2 1c" 2,8,2048,128 "" $(with_knobs "TMA_STORE=2 NUM_CONSUMERS=1 PINGPONG=0 STREAM_K=0 RESCALE_UNDER_QK=0 PERSISTENT=0 STAGES=3")
fi
S=4,16,4096,128
if [ "${PART:-12}" != 2 ]; then
for r in 1 2; do
  prof "[BN160 SK1 TS1]" "" $S $(with_knobs "BLOCK_N=160")
  prof "[BN176 SK1 TS2]" "" $S $(with_knobs "BLOCK_N=176 TMA_STORE=2")
done
prof "[BN176 SK0 TS2]" "" $S $(with_knobs "BLOCK_N=176 TMA_STORE=2 STREAM_K=0")
prof "[BN160 SK1 TS2]" "" $S $(with_knobs "BLOCK_N=160 TMA_STORE=2")
prof "[BN176 SK1 TS2 PR40]" "" $S $(with_knobs "BLOCK_N=176 TMA_STORE=2 PRODUCER_REGS=40")
prof "[BN176 SK1 TS0]" "" $S $(with_knobs "BLOCK_N=176 TMA_STORE=0")
prof "[BN160 SK1 TS1]" "" 1,16,16384,128 $(with_knobs "BLOCK_N=160")
prof "[BN176 SK1 TS2]" "" 1,16,16384,128 $(with_knobs "BLOCK_N=176 TMA_STORE=2")
PROBLEM=BF16=1 prof "[bf16 BN176 SK1 TS2]" "" $S $(with_knobs "BLOCK_N=176 TMA_STORE=2")
fi
[ "${PART:-12}" = 1 ] && exit 0
for r in 1 2 3; do
  bench "bench BN160 SK1 TS1" $S $(with_knobs "BLOCK_N=160")
  bench "bench BN176 SK1 TS2" $S $(with_knobs "BLOCK_N=176 TMA_STORE=2")
  bench "bench BN176 SK0 TS2" $S $(with_knobs "BLOCK_N=176 TMA_STORE=2 STREAM_K=0")
done
# D=256: two consumers with the O tile fit only staged by block.
for r in 1 2; do
  bench "bench D256 BN80 TS0" 4,16,4096,256 $(with_knobs "BLOCK_N=80 TMA_STORE=0")
  bench "bench D256 BN64 TS2" 4,16,4096,256 $(with_knobs "BLOCK_N=64 TMA_STORE=2 RESCALE_UNDER_QK=0")
  bench "bench D256 BN80 TS0 RQ0" 4,16,4096,256 $(with_knobs "BLOCK_N=80 TMA_STORE=0 RESCALE_UNDER_QK=0")
done
