#!/usr/bin/env bash
# Issue 15: which SM pipe the row maximum loads: ncu's per-pipe instruction rates and issue
# activity for the template and sol2.py's nomax and mmaonly copies, 4,16,4096,128 fp16,
# BLOCK_N=128 PERSISTENT=1 RESCALE_UNDER_QK=1 (one metric per ncu call where a name may not exist).
set -u
exec > >(tee $OUT/pipes.log) 2>&1
source .device/ncu_prof.sh
python3 .device/s38/sol2.py /tmp/sol2
base=sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active
for metric in sm__issue_active.avg.pct_of_peak_sustained_active \
  sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active \
  sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active \
  sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active \
  sm__inst_executed_pipe_fmaheavy.avg.pct_of_peak_sustained_active; do
  for v in ref nomax mmaonly; do
    M=$base,$metric prof "[$v]" /tmp/sol2/$v 4,16,4096,128 PERSISTENT=1 RESCALE_UNDER_QK=1
  done
done
