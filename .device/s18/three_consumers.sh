#!/usr/bin/env bash
# Three consumer warpgroups (192 query rows a CTA) at D=128, 4,16,4096,128 fp16: each consumer's
# softmax then runs under two others' MMAs. ncu at locked clocks beside the elite.
set -u
source .device/ncu_prof.sh
source .device/trace_tile.sh
S=4,16,4096,128
run() { prof "[$1]" "" $S $(with_knobs "$1"); }
run "BLOCK_N=160"
run "NUM_CONSUMERS=3 BLOCK_N=64 STAGES=4 TMA_STORE=0 STREAM_K=0"
run "NUM_CONSUMERS=3 BLOCK_N=64 STAGES=4 TMA_STORE=0"
run "NUM_CONSUMERS=3 BLOCK_N=80 STAGES=3 TMA_STORE=0 STREAM_K=0"
run "NUM_CONSUMERS=3 BLOCK_N=80 STAGES=3 TMA_STORE=0"
run "NUM_CONSUMERS=3 BLOCK_N=80 STAGES=2 TMA_STORE=0"
run "NUM_CONSUMERS=3 BLOCK_N=80 STAGES=3 TMA_STORE=0 RESCALE_UNDER_QK=0"
run "NUM_CONSUMERS=3 BLOCK_N=64 STAGES=4 TMA_STORE=0 RESCALE_UNDER_QK=0 STREAM_K=0"
run "NUM_CONSUMERS=3 BLOCK_N=80 STAGES=3 TMA_STORE=0 PRODUCER_REGS=40"
