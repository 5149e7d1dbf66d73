#!/usr/bin/env bash
# CLUSTER_M=2 lost 27-35 % in cycles with STAGES=2 (cluster.sh). Does a deeper ring (STAGES=3,
# O from registers to make room) or no PINGPONG take the loss back? Two rounds, 4,16,4096,128.
set -u
exec > >(tee $OUT/cluster2.log) 2>&1
rows=(
  "STAGES=3 TMA_STORE=0 PERSISTENT=1 RESCALE_UNDER_QK=1"
  "STAGES=3 TMA_STORE=0 PERSISTENT=1 RESCALE_UNDER_QK=1 BLOCK_N=112"
  "STAGES=4 TMA_STORE=0 PERSISTENT=1 RESCALE_UNDER_QK=1 BLOCK_N=96"
  "PINGPONG=0 PERSISTENT=1"
)
for round in 1 2; do
  for knobs in "${rows[@]}"; do
    for c in 1 2; do timeout 120 bash -c "source .device/ncu_prof.sh; bench 'r$round 4,16,4096,128 $knobs CLUSTER_M=$c' 4,16,4096,128 $knobs CLUSTER_M=$c"; done
  done
done
source .device/ncu_prof.sh
for c in 1 2; do
  prof ncu "" 4,16,4096,128 STAGES=3 TMA_STORE=0 PERSISTENT=1 RESCALE_UNDER_QK=1 CLUSTER_M=$c
done
