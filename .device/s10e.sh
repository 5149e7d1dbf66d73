#!/usr/bin/env bash
# P in two register buffers (trace_variant.py VARIANT d) against the template, under ncu at locked
# clocks, interleaved: the softmax then runs under the last P V instead of after it.
set -u
source .device/ncu_prof.sh
source .device/trace_tile.sh
B=$ELITE
python3 .device/fixed_template.py /tmp/t_ref PINGPONG=1 > /dev/null
for extra in "TMA_STORE=0" "STREAM_K=0"; do
  tag=${extra/=/}
  VARIANT=dn LOOP_EVENTS=0 python3 .device/trace_variant.py /tmp/nt_d_$tag $B $extra > /dev/null
done
args=""; for s in $(with_knobs TMA_STORE=0); do args="$args --set $s"; done
$E --templates /tmp/nt_d_TMA_STORE0 compile --template sdpa_hopper --shape 4,16,4096,128 $args --cubin /tmp/d.cubin > /dev/null 2>&1
cuobjdump -sass /tmp/d.cubin | grep -oE "(DEPBAR.LE gsb0, 0x[01]|MUFU.EX2|HGMMA)" | uniq -c | tr '\n' ' ' | cut -c1-1500; echo
for extra in "TMA_STORE=0" "STREAM_K=0"; do
  tag=${extra/=/}
  for v in d ref d; do
    dir=/tmp/t_ref; [ $v = d ] && dir=/tmp/nt_d_$tag
    prof "$v" $dir 4,16,4096,128 $(with_knobs "$extra")
  done
done

prof d /tmp/nt_d_TMA_STORE0 1,16,16384,128 $(with_knobs TMA_STORE=0)
