# Issue 15, thirty-fourth session: does the lent H200 read the tensor pipe as the H100 did?
# ncu with its locked clocks (as on the H100) on the twenty-seventh session's fp16 pick at
# 4,16,4096,128, on three neighbours the twelfth and twenty-third sessions measured there, and
# on cuDNN's kernel; then `evo bench` of two of them at the GPU's own clocks.
# Output: $OUT/h200_ncu$TAG.log (the session's call: TAG=_exact).
set -u
exec > >(tee $OUT/h200_ncu${TAG:-}.log) 2>&1
nvidia-smi -L; nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
source .device/ncu_prof.sh
source .device/s34/knobs.sh
# The 160-key and STREAM_K=0 kernels as the H100 runs had them (before SOFTMAX_WARP_SYNC existed).
N160="$HOPPER_BASE BLOCK_N=160 SOFTMAX_WARP_SYNC=0 STREAM_K=1"
N160S0="$HOPPER_BASE BLOCK_N=160 SOFTMAX_WARP_SYNC=0 STREAM_K=0"
N128S0="$HOPPER_BASE BLOCK_N=128 SOFTMAX_WARP_SYNC=0 STREAM_K=0"
for round in 1 2; do
  prof "[pick r$round]" "" 4,16,4096,128 $S27_PICK
  prof "[160 sk1 r$round]" "" 4,16,4096,128 $N160
  prof "[160 sk0 r$round]" "" 4,16,4096,128 $N160S0
  prof "[128 sk0 r$round]" "" 4,16,4096,128 $N128S0
done
timeout 120 ncu --metrics $M -k regex:cudnn --launch-skip 1 -c 1 python3 scripts/attention-once.py \
  --peer cudnn --shape 4,16,4096,128 > $OUT/ncu_cudnn.txt 2>&1
echo "[cuDNN] rc=$? $(grep -E 'pct_of_peak|duration|per_second' $OUT/ncu_cudnn.txt | sed 's/  */ /g' | tr '\n' ';')"
# Two of them at the GPU's own clocks, as evo bench times them.
for round in 1 2; do
  bench "[pick bench r$round]" 4,16,4096,128 $S27_PICK
  bench "[160 sk1 bench r$round]" 4,16,4096,128 $N160
done
