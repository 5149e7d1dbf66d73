#!/usr/bin/env bash
# Speed of light of sdpa_hopper's softmax under ncu at base clocks (steady figures, unlike the
# timed runs of s9c.sh): the template against copies without exponentials or without the rescale.
set -u
E=build-bundle/evo
M=sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,sm__issue_active.avg.pct_of_peak_sustained_active
python3 .device/sol_variants.py /tmp/sol
for cfg in "BLOCK_N=128 PINGPONG=0" "BLOCK_N=128 PINGPONG=1"; do
  args="--set PERSISTENT=1 --set STREAM_K=1"; for s in $cfg; do args="$args --set $s"; done
  for v in ref noexp norescale; do
    timeout 150 ncu --target-processes all --metrics $M -k regex:sdpa_hopper_fwd --launch-skip 30 -c 1 \
      $E --templates /tmp/sol/$v bench --template sdpa_hopper --shape 4,16,4096,128 $args > $OUT/ncu_${v}_$(echo $cfg | tr ' =' '__').txt 2>&1
    echo "== $cfg $v: $(grep -E "pct_of_peak|duration|per_second" $OUT/ncu_${v}_$(echo $cfg | tr ' =' '__').txt | sed 's/  */ /g' | tr '\n' ';')"
  done
done
