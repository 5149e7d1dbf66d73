#!/usr/bin/env bash
# On one machine: evo bench (the search's own gate) and graph_time.py (bench-attention's way) of
# the template and the __syncwarp copy, BLOCK_N=160 STREAM_K=1, interleaved in both orders.
set -u
source .device/ncu_prof.sh
source .device/trace_tile.sh
source .device/s23/export_copy.sh
S=4,16,4096,128
K=$(with_knobs "BLOCK_N=160")
FENCE=warp python3 .device/s23/softmax_fence_variant.py /tmp/sf_warp $K > /dev/null
for f in none warp; do export_copy $f $S sk1 $K; done
eb() { bench "bench tmpl" $S $K; E="$E --templates /tmp/sf_warp" bench "bench warp" $S $K; }
be() { E="$E --templates /tmp/sf_warp" bench "bench warp" $S $K; bench "bench tmpl" $S $K; }
eb; be; eb
python3 .device/s23/graph_time.py $S 3 tmpl=/tmp/exp_none_sk1 warp=/tmp/exp_warp_sk1
be; eb; be
python3 .device/s23/graph_time.py $S 3 warp=/tmp/exp_warp_sk1 tmpl=/tmp/exp_none_sk1
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,temperature.gpu --format=csv
