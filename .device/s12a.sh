#!/usr/bin/env bash
# Wider KV tiles under ncu at locked clocks at 4,16,4096,128 (whole tiles only at 128): the
# per-KV-tile overhead amortized over more keys, against the 128-key elite, interleaved.
set -u
source .device/ncu_prof.sh
source .device/trace_tile.sh
run() { prof "[$1]" "" 4,16,4096,128 $(with_knobs "STREAM_K=0 $1"); grep -E "spill|stored|registers" $OUT/ncu.txt | head -3; }
run ""
for v in "BLOCK_N=144" "BLOCK_N=160" "BLOCK_N=160 TMA_STORE=0" "BLOCK_N=176" "BLOCK_N=176 TMA_STORE=0" \
         "BLOCK_N=176 PINGPONG=0 RESCALE_UNDER_QK=0 TMA_STORE=0" "BLOCK_N=192 TMA_STORE=0" \
         "BLOCK_N=192 PINGPONG=0 RESCALE_UNDER_QK=0 TMA_STORE=0" "BLOCK_N=192 PINGPONG=0 TMA_STORE=0"; do
  run "$v"
done
run ""
run "BLOCK_N=176 STREAM_K=1"
run "BLOCK_N=192 PINGPONG=0 RESCALE_UNDER_QK=0 TMA_STORE=0 STREAM_K=1"
