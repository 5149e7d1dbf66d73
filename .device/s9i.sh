#!/usr/bin/env bash
# Warp stall reasons of sdpa_hopper (RESCALE_UNDER_QK=1, ping-pong, STREAM_K) at both long shapes:
# what the 4 times as many tiles per key at 4,16,4096,128 add.
set -u
E=build-bundle/evo
for shape in 4,16,4096,128 1,16,16384,128; do
  timeout 200 ncu --target-processes all --section WarpStateStats --section SchedulerStats -k regex:sdpa_hopper_fwd --launch-skip 30 -c 1 \
    $E bench --template sdpa_hopper --shape $shape --set PERSISTENT=1 --set STREAM_K=1 --set RESCALE_UNDER_QK=1 > $OUT/stall_$shape.txt 2>&1
  echo "== $shape"; grep -E "Stall|Warp Cycles|Issue|Eligible|Active Warps|No Eligible|Duration" $OUT/stall_$shape.txt | sed 's/  */ /g' | head -40
done
