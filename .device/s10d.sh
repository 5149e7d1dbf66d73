#!/usr/bin/env bash
# Does ptxas still hoist the wait for the last P V above the softmax when the next P is packed
# into registers of its own (trace_variant.py VARIANT p)? The SASS order of that wait and the
# exponentials, then ncu at locked clocks, template and copy interleaved, at both long shapes.
set -u
source .device/ncu_prof.sh
source .device/trace_tile.sh
K=$(with_knobs "${EXTRA:-}")
args=""; for s in $K; do args="$args --set $s"; done
for v in ref p; do
  VARIANT=${v/ref/}n LOOP_EVENTS=0 python3 .device/trace_variant.py /tmp/nt_$v $K > /dev/null
  $E --templates /tmp/nt_$v compile --template sdpa_hopper --shape 4,16,4096,128 $args --cubin /tmp/$v.cubin > $OUT/compile_$v.txt 2>&1
  cuobjdump -sass /tmp/$v.cubin > $OUT/sass_$v.txt
  echo "$v: $(grep -E 'registers|spills' $OUT/compile_$v.txt | tr -s ' ' | tr '\n' ' ')"
  grep -nE "DEPBAR|MUFU.EX2|HGMMA" $OUT/sass_$v.txt | awk '{print $1, $2, $3}' | uniq -c -f1 | awk '{printf "%s ", $0} END {print ""}' | cut -c1-1500
done
for shape in 4,16,4096,128 1,16,16384,128; do
  for v in ref p p ref; do prof $v /tmp/nt_$v $shape $K; done
done
