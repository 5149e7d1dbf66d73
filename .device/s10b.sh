#!/usr/bin/env bash
# sdpa_hopper's tile epilogue, two changes tried as copies (trace_variant.py VARIANT a, b, ab):
# the clock64 trace of each (no events inside the loop), then each under ncu at locked clocks.
set -u
source .device/ncu_prof.sh
source .device/trace_tile.sh
K=$ELITE
shape=${SHAPE:-4,16,4096,128}
for v in ref a b ab; do
  VARIANT=${v/ref/} LOOP_EVENTS=0 python3 .device/trace_variant.py /tmp/tr_$v $K > /dev/null
  VARIANT=${v/ref/}n LOOP_EVENTS=0 python3 .device/trace_variant.py /tmp/nt_$v $K > /dev/null
  trace_tile $v /tmp/tr_$v $shape
  echo "== $v"; tail -2 $OUT/trace_$v.txt
done
for v in ref a b ab ref; do prof $v /tmp/nt_$v $shape $K; done
