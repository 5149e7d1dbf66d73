# Issue 15: at 4,16,4096,128 fp16, the 160-key kernel with SOFTMAX_WARP_SYNC (80.48 % of the
# tensor pipe on the H100) against the twenty-seventh session's 128-key pick: ncu once each, then
# `evo bench` at the GPU's own clocks in ROUNDS interleaved rounds (order alternating), to see
# whether the busier kernel is slower in time at the power limit, or the two only trade places.
set -u
exec > >(tee $OUT/pick_rounds.log) 2>&1
source .device/ncu_prof.sh
source .device/s34/knobs.sh
prof "[160 sws ncu]" "" 4,16,4096,128 $W160
prof "[pick ncu]" "" 4,16,4096,128 $S27_PICK
for round in $(seq 1 ${ROUNDS:-8}); do
  if [ $((round % 2)) = 1 ]; then
    bench "[r$round pick]" 4,16,4096,128 $S27_PICK; bench "[r$round 160 sws]" 4,16,4096,128 $W160
  else
    bench "[r$round 160 sws]" 4,16,4096,128 $W160; bench "[r$round pick]" 4,16,4096,128 $S27_PICK
  fi
done
