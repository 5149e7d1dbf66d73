#!/usr/bin/env bash
# Where the cycles of a tile go in sdpa_hopper's persistent elite (PINGPONG, RESCALE_UNDER_QK):
# clock64() per event from trace_variant.py's copy, read back from an export by trace_read.py.
# EXTRA="K=V ...": other knob values; SHAPES: the shapes (default both long ones).
set -u
source .device/trace_tile.sh
K=$(with_knobs "${EXTRA:-}")
python3 .device/trace_variant.py /tmp/tr $K
for shape in ${SHAPES:-4,16,4096,128 1,16,16384,128}; do
  label=$(echo $shape ${EXTRA:-} | tr ',= ' 'x__')
  echo "== $shape ${EXTRA:-}"; trace_tile $label /tmp/tr $shape; echo rc $?
  tail -3 $OUT/trace_$label.txt
done
