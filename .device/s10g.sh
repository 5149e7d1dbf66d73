#!/usr/bin/env bash
# The next tile's first Q K^T issued beside this tile's last P V (tile_overlap_variant.py), against
# the template, under ncu at locked clocks, interleaved; STREAM_K=0 (the copy's condition).
set -u
source .device/ncu_prof.sh
source .device/trace_tile.sh
K=$(with_knobs "STREAM_K=0 ${EXTRA:-}")
python3 .device/fixed_template.py /tmp/t_ref PINGPONG=1 > /dev/null
python3 .device/tile_overlap_variant.py /tmp/to $K > /dev/null
for v in to ref to; do
  dir=/tmp/t_ref; [ $v = to ] && dir=/tmp/to
  prof "$v" $dir 4,16,4096,128 $K
done
prof to /tmp/to 1,16,16384,128 $K
