#!/usr/bin/env bash
# Lazy rescaling (a warp skips O's rescale while its rows keep their maxima within 2^8) under ncu,
# against the template, with and without RESCALE_UNDER_QK (.device/sol_variants.py lazy).
set -u
source .device/ncu_prof.sh
python3 .device/sol_variants.py /tmp/sol
for v in ref lazy lazy ref; do prof $v /tmp/sol/$v 4,16,4096,128 PERSISTENT=1 STREAM_K=1 RESCALE_UNDER_QK=1; done
for v in ref lazy; do prof $v /tmp/sol/$v 4,16,4096,128 PERSISTENT=1 STREAM_K=1 PINGPONG=0; done
for v in ref lazy; do prof $v /tmp/sol/$v 1,16,16384,128 PERSISTENT=1 STREAM_K=1 RESCALE_UNDER_QK=1; done
