#!/usr/bin/env bash
# Wall time at the GPU's own clocks: the template and the __syncwarp copy exported with the same
# knobs and timed as bench-attention times (graph_time.py), interleaved, with clock and power.
set -u
source .device/trace_tile.sh
export_copy() {  # FENCE SHAPE KNOBS...: OUT/exp_FENCE_TAG
  local f=$1 shape=$2 tag=$3; shift 3
  FENCE=$f python3 .device/s23/softmax_fence_variant.py /tmp/sf3_$f "$@" > /dev/null
  rm -rf /tmp/sf3_$f.db* /tmp/exp_${f}_$tag
  $E --templates /tmp/sf3_$f run --template sdpa_hopper --shape $shape --budget 1 --db /tmp/sf3_$f.db --no-retime > /tmp/run_$f.txt 2>&1
  local id=$($E --templates /tmp/sf3_$f show elite --db /tmp/sf3_$f.db --json | python3 -c "import json,sys;print(json.load(sys.stdin)['elite'][0]['id'])")
  $E --templates /tmp/sf3_$f export $id --db /tmp/sf3_$f.db --out /tmp/exp_${f}_$tag > /dev/null 2>&1 || cat /tmp/run_$f.txt
}
S=4,16,4096,128
for f in none warp; do export_copy $f $S sk1 $(with_knobs "BLOCK_N=160"); done
for f in none warp; do export_copy $f $S sk0 $(with_knobs "BLOCK_N=160 STREAM_K=0"); done
python3 .device/s23/graph_time.py $S 4 tmpl_sk1=/tmp/exp_none_sk1 warp_sk1=/tmp/exp_warp_sk1 tmpl_sk0=/tmp/exp_none_sk0 warp_sk0=/tmp/exp_warp_sk0
echo "sustained 2 s:"
SUSTAIN_MS=2000 python3 .device/s23/graph_time.py $S 2 tmpl_sk1=/tmp/exp_none_sk1 warp_sk1=/tmp/exp_warp_sk1
