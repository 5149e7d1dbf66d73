#!/usr/bin/env bash
# ncu's tensor pipe at 1,16,16384,128 fp16 (and 4,16,4096,128) for RESCALE_UNDER_QK with and without ping-pong.
set -u
E=build-bundle/evo
M=sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second
prof() {  # shape, settings...
  local shape=$1; shift
  local args=""; for s in "$@"; do args="$args --set $s"; done
  timeout 150 ncu --target-processes all --metrics $M -k regex:sdpa_hopper_fwd --launch-skip 30 -c 1 \
    $E bench --template sdpa_hopper --shape $shape $args > $OUT/ncu.txt 2>&1
  echo "$shape $*: $(grep -E "pct_of_peak|duration|per_second" $OUT/ncu.txt | sed 's/  */ /g' | tr '\n' ';')"
}
S=1,16,16384,128
prof $S PERSISTENT=1 STREAM_K=1 BLOCK_N=128 RESCALE_UNDER_QK=1
prof $S PERSISTENT=1 STREAM_K=1 BLOCK_N=128 RESCALE_UNDER_QK=0
prof $S PERSISTENT=1 STREAM_K=1 BLOCK_N=192 TMA_STORE=0 PINGPONG=1 RESCALE_UNDER_QK=1
prof $S PERSISTENT=1 STREAM_K=1 BLOCK_N=192 TMA_STORE=0 PINGPONG=0 RESCALE_UNDER_QK=0
prof 4,16,4096,128 PERSISTENT=1 STREAM_K=1 BLOCK_N=128 RESCALE_UNDER_QK=1
prof 4,16,4096,128 PERSISTENT=1 STREAM_K=1 BLOCK_N=128 PINGPONG=0 RESCALE_UNDER_QK=0
