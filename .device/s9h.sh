#!/usr/bin/env bash
# Lazy rescaling (a warp skips O's rescale while its rows keep their maxima within 2^8) under ncu,
# against the template, with and without RESCALE_UNDER_QK (.device/sol_variants.py lazy).
set -u
E=build-bundle/evo
M=sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second
python3 .device/sol_variants.py /tmp/sol
prof() {  # variant, shape, settings...
  local v=$1 shape=$2; shift 2
  local args=""; for s in "$@"; do args="$args --set $s"; done
  timeout 150 ncu --target-processes all --metrics $M -k regex:sdpa_hopper_fwd --launch-skip 30 -c 1 \
    $E --templates /tmp/sol/$v bench --template sdpa_hopper --shape $shape $args > $OUT/ncu.txt 2>&1
  echo "$v $shape $*: $(grep -E "pct_of_peak|duration|per_second|verdict|correctness" $OUT/ncu.txt | sed 's/  */ /g' | cut -c1-100 | tr '\n' ';')"
}
for v in ref lazy lazy ref; do prof $v 4,16,4096,128 PERSISTENT=1 STREAM_K=1 RESCALE_UNDER_QK=1; done
for v in ref lazy; do prof $v 4,16,4096,128 PERSISTENT=1 STREAM_K=1 PINGPONG=0; done
for v in ref lazy; do prof $v 1,16,16384,128 PERSISTENT=1 STREAM_K=1 RESCALE_UNDER_QK=1; done
