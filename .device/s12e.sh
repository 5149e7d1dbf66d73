#!/usr/bin/env bash
# STREAM_K=1 (the fastest in cycles) with wider KV tiles under ncu at locked clocks at
# 4,16,4096,128: does any of them keep the tensor pipe 80 % active?
set -u
source .device/ncu_prof.sh
source .device/trace_tile.sh
run() { prof "[$1]" "" 4,16,4096,128 $(with_knobs "$1"); }
run "BLOCK_N=160 STREAM_K=1"
run "BLOCK_N=160 STREAM_K=1 PRODUCER_REGS=40"
run "BLOCK_N=160 STREAM_K=1 PRODUCER_REGS=40 TMA_STORE=0"
run "BLOCK_N=176 STREAM_K=1 TMA_STORE=0"
run "BLOCK_N=176 STREAM_K=1 TMA_STORE=0 PRODUCER_REGS=40"
run "BLOCK_N=192 STREAM_K=1 TMA_STORE=0"
run "BLOCK_N=160 STREAM_K=0 PRODUCER_REGS=56"
run "BLOCK_N=176 STREAM_K=0 TMA_STORE=0 PRODUCER_REGS=40"
run "BLOCK_N=160 STREAM_K=1"
