#!/usr/bin/env bash
# Real clocks: `evo bench` of 160-key kernels with and without RESCALE_UNDER_QK, and the 128-key
# elite, in rounds back to back. Does the kernel that keeps the tensor pipe busier get a lower
# SM clock under sustained load?
set -u
source .device/ncu_prof.sh
source .device/trace_tile.sh
S=${S:-4,16,4096,128}
run() { local label=$1; shift; bench "$label" $S $(with_knobs "$*"); }
for r in 1 2 3; do
  run "r$r 160 ruq0" STREAM_K=0 BLOCK_N=160 RESCALE_UNDER_QK=0
  run "r$r 160 ruq1" STREAM_K=0 BLOCK_N=160 RESCALE_UNDER_QK=1
  run "r$r 128 ruq1" STREAM_K=0 BLOCK_N=128 RESCALE_UNDER_QK=1
  run "r$r 128 ruq0" STREAM_K=0 BLOCK_N=128 RESCALE_UNDER_QK=0
  run "r$r 160 ruq1 sk1" STREAM_K=1 BLOCK_N=160 RESCALE_UNDER_QK=1
done
