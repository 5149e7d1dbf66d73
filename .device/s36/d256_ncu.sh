#!/usr/bin/env bash
# Issue 15, thirty-sixth session: sdpa_hopper at D=256 (2,16,4096,256 fp16, where the unseen-shape
# run read 1.01x cuDNN) under ncu at its locked clocks, beside cuDNN's kernel; then the pick's
# warp states and pipes. Output: $OUT/d256_ncu.log, $OUT/d256_detail.txt.
set -u
exec > >(tee $OUT/d256_ncu.log) 2>&1
source .device/ncu_prof.sh
source .device/s34/knobs.sh
SH=${SH:-2,16,4096,256}
B256="$(echo $HOPPER_BASE | sed 's/TMA_STORE=1/TMA_STORE=0/') BLOCK_N=80"
prof "[pick sk0]" "" $SH $B256 SOFTMAX_WARP_SYNC=1 STREAM_K=0
prof "[sws0 sk0]" "" $SH $B256 SOFTMAX_WARP_SYNC=0 STREAM_K=0
prof "[sws0 sk1]" "" $SH $B256 SOFTMAX_WARP_SYNC=0 STREAM_K=1
prof "[np pp0 ru0]" "" $SH $(echo $B256 | sed 's/PERSISTENT=1/PERSISTENT=0/; s/PINGPONG=1/PINGPONG=0/; s/RESCALE_UNDER_QK=1/RESCALE_UNDER_QK=0/') SOFTMAX_WARP_SYNC=0 STREAM_K=0
prof "[BN64 sk0]" "" $SH $(echo $B256 | sed 's/BLOCK_N=80/BLOCK_N=64/') SOFTMAX_WARP_SYNC=0 STREAM_K=0
timeout 120 ncu --metrics $M -k regex:cudnn --launch-skip 1 -c 1 python3 scripts/attention-once.py \
  --peer cudnn --shape $SH > $OUT/ncu_cudnn.txt 2>&1
echo "[cuDNN] rc=$? $(grep -E 'pct_of_peak|duration|per_second' $OUT/ncu_cudnn.txt | sed 's/  */ /g' | tr '\n' ';')"
grep -E "^ *cudnn|Kernel|void|sm90" $OUT/ncu_cudnn.txt | head -3
timeout 200 ncu --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis \
  --section LaunchStats --section Occupancy -k regex:sdpa_hopper_fwd --launch-skip 30 -c 1 \
  $E bench --template sdpa_hopper --shape $SH $(bench_options $B256 SOFTMAX_WARP_SYNC=0 STREAM_K=0) \
  < /dev/null > $OUT/d256_detail.txt 2>&1
echo "detail rc=$?"
grep -E "Stall|Warp Cycles|Issued|Eligible|Active Warps|Pipe|Utilization|Registers" $OUT/d256_detail.txt | head -40
