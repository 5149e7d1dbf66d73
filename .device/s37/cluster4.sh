#!/usr/bin/env bash
# CLUSTER_M=2 with the remote arrivals at the default .release.cta semantics (mbarrier.arrive
# .shared::cluster) instead of .release.cluster: is the fence what cost the 20 %?
set -u
exec > >(tee $OUT/cluster4.log) 2>&1
source .device/ncu_prof.sh
for round in 1 2; do
  for knobs in "PERSISTENT=1 RESCALE_UNDER_QK=1" "PERSISTENT=1 RESCALE_UNDER_QK=1 BLOCK_N=160 SOFTMAX_WARP_SYNC=1"; do
    for c in 1 2; do timeout 120 bash -c "source .device/ncu_prof.sh; bench 'r$round 4,16,4096,128 $knobs CLUSTER_M=$c' 4,16,4096,128 $knobs CLUSTER_M=$c"; done
  done
done
gate g1 3,12,1500,1300,128 "" CLUSTER_M=2 PERSISTENT=1
