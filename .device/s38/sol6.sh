#!/usr/bin/env bash
# Issue 15: sol6.py's membarafter against the template and sol4.py's membarboth, under ncu at
# 4,16,4096,128 fp16, BLOCK_N=128 PERSISTENT=1 RESCALE_UNDER_QK=1.
set -u
exec > >(tee $OUT/sol6.log) 2>&1
source .device/ncu_prof.sh
python3 .device/s38/sol4.py /tmp/sol4; python3 .device/s38/sol6.py /tmp/sol6
prof "[ref]" "" 4,16,4096,128 PERSISTENT=1 RESCALE_UNDER_QK=1
prof "[membarafter]" /tmp/sol6/membarafter 4,16,4096,128 PERSISTENT=1 RESCALE_UNDER_QK=1
prof "[membarboth]" /tmp/sol4/membarboth 4,16,4096,128 PERSISTENT=1 RESCALE_UNDER_QK=1
