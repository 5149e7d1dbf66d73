#!/usr/bin/env bash
# Issue 15: sol5.py's copies (stale reference, no shuffles) under ncu at 4,16,4096,128 fp16,
# BLOCK_N=128 PERSISTENT=1 RESCALE_UNDER_QK=1, and their SASS.
set -u
exec > >(tee $OUT/sol5.log) 2>&1
for c in .device/s38/sol5_*.cubin; do cuobjdump -sass $c > $OUT/$(basename $c .cubin).sass; done
source .device/ncu_prof.sh
python3 .device/s38/sol5.py /tmp/sol5
prof "[ref]" "" 4,16,4096,128 PERSISTENT=1 RESCALE_UNDER_QK=1
for v in stale noshfl; do prof "[$v]" /tmp/sol5/$v 4,16,4096,128 PERSISTENT=1 RESCALE_UNDER_QK=1; done
prof "[stale 160 sk]" /tmp/sol5/stale 4,16,4096,128 PERSISTENT=1 RESCALE_UNDER_QK=1 BLOCK_N=160 STREAM_K=1
