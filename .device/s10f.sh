#!/usr/bin/env bash
# P in two register buffers (trace_variant.py VARIANT d) without ping-pong, where nothing but the
# warpgroup's own P V can hide its softmax: the copy against the template under ncu, interleaved.
set -u
source .device/ncu_prof.sh
source .device/trace_tile.sh
B=$(with_knobs PINGPONG=0)
python3 .device/fixed_template.py /tmp/t_ref PINGPONG=0 > /dev/null
VARIANT=dn LOOP_EVENTS=0 python3 .device/trace_variant.py /tmp/nt_d0 $B > /dev/null
for v in d ref d ref; do
  dir=/tmp/t_ref; [ $v = d ] && dir=/tmp/nt_d0
  prof "$v" $dir 4,16,4096,128 $B
done
prof d /tmp/nt_d0 1,16,16384,128 $B
prof ref /tmp/t_ref 1,16,16384,128 $B
