#!/usr/bin/env bash
# The template's own knobs around the elite without STREAM_K, under ncu at locked clocks at
# 4,16,4096,128: does any whole-tile configuration keep the tensor pipe 80 % active?
set -u
source .device/ncu_prof.sh
source .device/trace_tile.sh
for v in "" "PERSISTENT=0" "PRODUCER_REGS=40" "PRODUCER_REGS=56" "TMA_STORE=0" "RESCALE_UNDER_QK=0" \
         "PINGPONG=0 RESCALE_UNDER_QK=0" "STAGES=1" "FAST_EXP=0" ""; do
  prof "[$v]" "" 4,16,4096,128 $(with_knobs "STREAM_K=0 $v")
done
