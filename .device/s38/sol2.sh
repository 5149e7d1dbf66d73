#!/usr/bin/env bash
# Issue 15: sol2.py's copies under ncu at 4,16,4096,128 fp16 (BLOCK_N=128 PERSISTENT=1
# RESCALE_UNDER_QK=1, SOFTMAX_WARP_SYNC 0 and 1), and the SASS of their cubins (make_cubins.sh, run here;
# `evo compile --cubin`, .device/s38/*.cubin).
set -u
exec > >(tee $OUT/sol2.log) 2>&1
for c in .device/s38/*_sws*.cubin; do cuobjdump -sass $c > $OUT/$(basename $c .cubin).sass; done
source .device/ncu_prof.sh
python3 .device/s38/sol2.py /tmp/sol2
for v in ref nosum nomax mmaonly; do
  for sws in 0 1; do prof "[$v sws=$sws]" /tmp/sol2/$v 4,16,4096,128 PERSISTENT=1 RESCALE_UNDER_QK=1 SOFTMAX_WARP_SYNC=$sws; done
done
