#!/usr/bin/env bash
# What a tile's start costs at 4,16,4096,128: the template against a copy that loads Q for its
# first tile only (.device/sol_variants.py noqload), and against one without O's rescale, under ncu.
set -u
source .device/ncu_prof.sh
python3 .device/sol_variants.py /tmp/sol
for v in ref noqload norescale noqload ref; do
  prof $v /tmp/sol/$v 4,16,4096,128 PERSISTENT=1 STREAM_K=1 RESCALE_UNDER_QK=1
done
prof ref /tmp/sol/ref 1,16,16384,128 PERSISTENT=1 STREAM_K=1 RESCALE_UNDER_QK=1
prof noqload /tmp/sol/noqload 1,16,16384,128 PERSISTENT=1 STREAM_K=1 RESCALE_UNDER_QK=1
