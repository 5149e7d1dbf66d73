#!/usr/bin/env bash
# The gates' determinism check over the STREAM_K knobs the earlier nondeterministic export may have had.
set -u
E=build-bundle/evo
run() {  # shape, settings...
  local shape=$1; shift
  local args=""; for s in "$@"; do args="$args -s $s"; done
  local v=$($E bench --template sdpa_hopper --shape $shape $args 2>&1 | grep -E "^verdict|^status" | tail -1)
  echo "$shape $* -> $v"
}
for fe in 0 1; do for pr in 24 40 56; do for pg in 0 1; do
  run 2,8,1400,1400,128 PERSISTENT=1 STREAM_K=1 FAST_EXP=$fe PRODUCER_REGS=$pr PACK_GQA=$pg
done; done; done
for s in 2,8,1000,1000,128 1,4,3000,3000,64 1,4,2997,2995,64 2,8,2048,2048,128; do
  run $s PERSISTENT=1 STREAM_K=1
  run $s PERSISTENT=1 STREAM_K=1 PRODUCER_REGS=40
done
