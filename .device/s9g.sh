#!/usr/bin/env bash
# What a tile's start costs at 4,16,4096,128: the template against a copy that loads Q for its
# first tile only (.device/sol_variants.py noqload), and against one without O's rescale, under ncu.
set -u
E=build-bundle/evo
M=sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second
python3 .device/sol_variants.py /tmp/sol
prof() {  # variant, shape, settings...
  local v=$1 shape=$2; shift 2
  local args=""; for s in "$@"; do args="$args --set $s"; done
  timeout 150 ncu --target-processes all --metrics $M -k regex:sdpa_hopper_fwd --launch-skip 30 -c 1 \
    $E --templates /tmp/sol/$v bench --template sdpa_hopper --shape $shape $args > $OUT/ncu.txt 2>&1
  echo "$v $shape $*: $(grep -E "pct_of_peak|duration|per_second" $OUT/ncu.txt | sed 's/  */ /g' | tr '\n' ';')"
}
for v in ref noqload norescale noqload ref; do
  prof $v 4,16,4096,128 PERSISTENT=1 STREAM_K=1 RESCALE_UNDER_QK=1
done
prof ref 1,16,16384,128 PERSISTENT=1 STREAM_K=1 RESCALE_UNDER_QK=1
prof noqload 1,16,16384,128 PERSISTENT=1 STREAM_K=1 RESCALE_UNDER_QK=1
