#!/usr/bin/env bash
# The cubins sol2.sh, sol4.sh and sol5.sh disassemble on the device, compiled here (NVRTC needs no
# GPU) from the copies their .py scripts make: `bash .device/s38/make_cubins.sh` from the
# repository root, then the device script. BLOCK_N=128 PERSISTENT=1 RESCALE_UNDER_QK=1 at
# 4,16,4096,128 fp16, as the scripts time them.
set -eu
E=${E:-build/evo}
k="--template sdpa_hopper --arch sm_90a --shape 4,16,4096,128 --set PERSISTENT=1 --set RESCALE_UNDER_QK=1 --no-cache"
python3 .device/s38/sol2.py /tmp/sol2; python3 .device/s38/sol4.py /tmp/sol4; python3 .device/s38/sol5.py /tmp/sol5
for v in ref nosum nomax; do for w in 0 1; do
  $E --templates /tmp/sol2/$v compile $k --set SOFTMAX_WARP_SYNC=$w --cubin .device/s38/${v}_sws$w.cubin > /dev/null
done; done
for v in wsyncmax wsyncboth membarmax membarboth sleepmax sleepboth; do
  $E --templates /tmp/sol4/$v compile $k --cubin .device/s38/$v.cubin > /dev/null
done
for v in stale noshfl; do $E --templates /tmp/sol5/$v compile $k --cubin .device/s38/sol5_$v.cubin > /dev/null; done
