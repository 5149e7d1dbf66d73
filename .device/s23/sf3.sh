#!/usr/bin/env bash
# Wall time at the GPU's own clocks: the template and the __syncwarp copy exported with the same
# knobs and timed as bench-attention times (graph_time.py), interleaved, with clock and power.
set -u
source .device/trace_tile.sh
source .device/s23/export_copy.sh
S=4,16,4096,128
for f in none warp; do export_copy $f $S sk1 $(with_knobs "BLOCK_N=160"); done
for f in none warp; do export_copy $f $S sk0 $(with_knobs "BLOCK_N=160 STREAM_K=0"); done
python3 .device/s23/graph_time.py $S 4 tmpl_sk1=/tmp/exp_none_sk1 warp_sk1=/tmp/exp_warp_sk1 tmpl_sk0=/tmp/exp_none_sk0 warp_sk0=/tmp/exp_warp_sk0
echo "sustained 2 s:"
SUSTAIN_MS=2000 python3 .device/s23/graph_time.py $S 2 tmpl_sk1=/tmp/exp_none_sk1 warp_sk1=/tmp/exp_warp_sk1
