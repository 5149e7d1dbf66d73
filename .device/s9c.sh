#!/usr/bin/env bash
# Speed of light of sdpa_hopper's softmax at 4,16,4096,128 fp16: the template against copies
# without the exponentials or without the rescaling of O (.device/sol_variants.py), interleaved.
set -u
E=build-bundle/evo
python3 .device/sol_variants.py /tmp/sol
for cfg in "BLOCK_N=128 PINGPONG=0" "BLOCK_N=128 PINGPONG=1"; do
  args="-s PERSISTENT=1 -s STREAM_K=1"; for s in $cfg; do args="$args -s $s"; done
  for v in ref noexp norescale norescale noexp ref; do
    r=$($E --templates /tmp/sol/$v bench --template sdpa_hopper --shape 4,16,4096,128 $args 2>&1)
    echo "$cfg $v: $(echo "$r" | grep -E '^timing' | cut -c13-60) | $(echo "$r" | grep -E '^throughput' | cut -c13-40) | $(echo "$r" | grep -iE 'MHz' | head -1 | cut -c1-60)"
  done
done
