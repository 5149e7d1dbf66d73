#!/usr/bin/env bash
# Speed of light of sdpa_hopper's softmax under ncu at base clocks (steady figures, unlike the
# timed runs of s9c.sh): the template against copies without exponentials or without the rescale.
# The MUFU (xu) pipe and the issue slots besides the usual figures.
set -u
M=sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__issue_active.avg.pct_of_peak_sustained_active
source .device/ncu_prof.sh
python3 .device/sol_variants.py /tmp/sol
for cfg in "BLOCK_N=128 PINGPONG=0" "BLOCK_N=128 PINGPONG=1"; do
  for v in ref noexp norescale; do
    prof "== $v" /tmp/sol/$v 4,16,4096,128 PERSISTENT=1 STREAM_K=1 $cfg
  done
done
