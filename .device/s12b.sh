#!/usr/bin/env bash
# BLOCK_N=160 (26 KV tiles of 160 for 4096 keys, the last one 96 keys) against the 128-key elite
# under ncu at locked clocks, repeated and interleaved; its neighbours; cuDNN under the same ncu;
# the other long shape and bf16.
set -u
source .device/ncu_prof.sh
source .device/trace_tile.sh
run() { local shape=$1; shift; prof "[$1]" "" $shape $(with_knobs "STREAM_K=0 $1"); grep -E "spill" $OUT/ncu.txt | head -1; }
S=4,16,4096,128
run $S "BLOCK_N=160"
run $S ""
run $S "BLOCK_N=160"
run $S "BLOCK_N=160 PRODUCER_REGS=40"
run $S "BLOCK_N=160 STREAM_K=1"
run $S "BLOCK_N=160 PINGPONG=0 RESCALE_UNDER_QK=0"
run $S "BLOCK_N=160 TMA_STORE=0 PRODUCER_REGS=40"
run $S "BLOCK_N=144 STREAM_K=1"
run $S ""
run $S "BLOCK_N=160"
for p in fp16 bf16; do
  timeout 120 ncu --metrics $M -k regex:cudnn --launch-skip 1 -c 1 python3 scripts/attention-once.py --peer cudnn --shape $S --dtype $p > $OUT/ncu_cudnn_$p.txt 2>&1 \
    || timeout 120 ncu --metrics $M -k regex:cudnn --launch-skip 1 -c 1 python3 scripts/attention-once.py --peer cudnn --shape $S > $OUT/ncu_cudnn_$p.txt 2>&1
  echo "cudnn $p $S: $(grep -E "^  [a-z].*(cudnn|sm90)|pct_of_peak|duration|per_second" $OUT/ncu_cudnn_$p.txt | sed 's/  */ /g' | cut -c1-120 | tr '\n' ';')"
done
run 1,16,16384,128 "BLOCK_N=160"
run 1,16,16384,128 ""
run 1,16,16384,128 "BLOCK_N=160 STREAM_K=1"
PROBLEM=BF16=1 prof "[bf16 BLOCK_N=160]" "" $S $(with_knobs "STREAM_K=0 BLOCK_N=160")
PROBLEM=BF16=1 prof "[bf16]" "" $S $(with_knobs "STREAM_K=0")
