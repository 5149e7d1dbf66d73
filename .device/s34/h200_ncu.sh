# Issue 15, thirty-fourth session: does the lent H200 read the tensor pipe as the H100 did?
# ncu on the twenty-seventh session's fp16 pick at 4,16,4096,128, on its BLOCK_N=160 neighbour
# and on cuDNN's kernel, with ncu's locked clocks (as on the H100) and, where that is refused,
# with the GPU's own. Output: $OUT/h200_ncu.log.
set -u
exec > >(tee $OUT/h200_ncu${TAG:-}.log) 2>&1
nvidia-smi -L; nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
source .device/ncu_prof.sh
# Every knob set as the H100 runs had them: the twenty-seventh session's pick (its ncu line), and
# the twelfth session's 160-key kernels (RESCALE_UNDER_QK=1, before SOFTMAX_WARP_SYNC existed).
# (The first call of this session left RESCALE_UNDER_QK at its default, 0: not the same kernels.)
COMMON="FAST_EXP=1 INTRA_OVERLAP=1 KV_INTERLEAVE=0 LAST_CTA_COMBINES=0 NUM_CONSUMERS=2 PACK_GQA=0 PERSISTENT=1 PINGPONG=1 PRODUCER_REGS=24 RESCALE_UNDER_QK=1 SPLITS=1 STAGES=2 TMA_STORE=1"
PICK="$COMMON BLOCK_N=128 SOFTMAX_WARP_SYNC=1 STREAM_K=1"
N160="$COMMON BLOCK_N=160 SOFTMAX_WARP_SYNC=0 STREAM_K=1"
N160S0="$COMMON BLOCK_N=160 SOFTMAX_WARP_SYNC=0 STREAM_K=0"
N128S0="$COMMON BLOCK_N=128 SOFTMAX_WARP_SYNC=0 STREAM_K=0"
# The first call shows whether ncu reads counters here at all.
timeout 150 ncu --metrics $M -k regex:sdpa_hopper_fwd --launch-skip 30 -c 1 \
  $E bench --template sdpa_hopper --shape 4,16,4096,128 $(bench_options $PICK) < /dev/null > $OUT/ncu_first.txt 2>&1
echo "first ncu call: rc=$?"; grep -E "ERR|error|pct_of_peak|duration|per_second" $OUT/ncu_first.txt | head -8
for round in 1 2; do
  prof "[pick r$round]" "" 4,16,4096,128 $PICK
  prof "[160 sk1 r$round]" "" 4,16,4096,128 $N160
  prof "[160 sk0 r$round]" "" 4,16,4096,128 $N160S0
  prof "[128 sk0 r$round]" "" 4,16,4096,128 $N128S0
done
timeout 120 ncu --metrics $M -k regex:cudnn --launch-skip 1 -c 1 python3 scripts/attention-once.py \
  --peer cudnn --shape 4,16,4096,128 > $OUT/ncu_cudnn.txt 2>&1
echo "[cuDNN] rc=$? $(grep -E 'pct_of_peak|duration|per_second' $OUT/ncu_cudnn.txt | sed 's/  */ /g' | tr '\n' ';')"
# The same three at the GPU's own clocks, as evo bench times them.
for round in 1 2; do
  bench "[pick bench r$round]" 4,16,4096,128 $PICK
  bench "[160 sk1 bench r$round]" 4,16,4096,128 $N160
done
