#!/usr/bin/env bash
# Issue 15: sol4.py's fenced softmax copies: their SASS (cubins compiled here) and ncu at
# 4,16,4096,128 fp16, BLOCK_N=128 PERSISTENT=1 RESCALE_UNDER_QK=1, against the template.
set -u
exec > >(tee $OUT/sol4.log) 2>&1
for c in .device/s38/{wsync,membar,sleep}*.cubin; do cuobjdump -sass $c > $OUT/$(basename $c .cubin).sass; done
source .device/ncu_prof.sh
python3 .device/s38/sol4.py /tmp/sol4
for v in ref wsyncmax wsyncboth membarmax membarboth sleepmax sleepboth ref; do
  prof "[$v]" /tmp/sol4/$v 4,16,4096,128 PERSISTENT=1 RESCALE_UNDER_QK=1
done
