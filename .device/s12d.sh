#!/usr/bin/env bash
# Real clocks: `evo bench` of 160-key kernels with and without RESCALE_UNDER_QK, and the 128-key
# elite, in rounds back to back. Does the kernel that keeps the tensor pipe busier get a lower
# SM clock under sustained load?
set -u
source .device/trace_tile.sh
S=${S:-4,16,4096,128}
bench() { local label=$1; shift; local args=""; for kv in $(with_knobs "$*"); do args="$args --set $kv"; done
  $E bench --template sdpa_hopper --shape $S $args ${PROBLEM:+--problem $PROBLEM} > $OUT/b.txt 2>&1
  echo "$label: $(grep -E '^median|^timing|sm clock' $OUT/b.txt | sed 's/  */ /g' | tr '\n' ';')"; }
for r in 1 2 3; do
  bench "r$r 160 ruq0" STREAM_K=0 BLOCK_N=160 RESCALE_UNDER_QK=0
  bench "r$r 160 ruq1" STREAM_K=0 BLOCK_N=160 RESCALE_UNDER_QK=1
  bench "r$r 128 ruq1" STREAM_K=0 BLOCK_N=128 RESCALE_UNDER_QK=1
  bench "r$r 128 ruq0" STREAM_K=0 BLOCK_N=128 RESCALE_UNDER_QK=0
  bench "r$r 160 ruq1 sk1" STREAM_K=1 BLOCK_N=160 RESCALE_UNDER_QK=1
done
