#!/usr/bin/env bash
# FAST_EXP=2 with P packed into registers of its own and copied into the MMA's operand after the
# wait for P V: ncu against FAST_EXP=1, interleaved (its gates: fe2.sh with PART=1 on the same
# build).
set -u
source .device/ncu_prof.sh
source .device/trace_tile.sh
S=4,16,4096,128
for r in 1 2; do
  for fe in 1 2; do
    prof "[BN160 SK1 FE$fe]" "" $S $(with_knobs "BLOCK_N=160 FAST_EXP=$fe")
  done
done
prof "[BN128 SK1 FE2]" "" $S $(with_knobs "FAST_EXP=2")
prof "[BN128 SK1 PP0 RUQ0 FE2]" "" $S $(with_knobs "FAST_EXP=2 PINGPONG=0 RESCALE_UNDER_QK=0")
prof "[BN128 SK1 PP0 RUQ0 FE1]" "" $S $(with_knobs "FAST_EXP=1 PINGPONG=0 RESCALE_UNDER_QK=0")
