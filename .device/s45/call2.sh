#!/usr/bin/env bash
# Forty-fifth session, second call: the sdpa_fp16 sweep continued, the sdpa_fp8 causal e4m3-Q
# space swept again with the one-stage barrier (190df99), and racecheck on one such configuration
# at a task without masking, with the bundle before the fix (evo_old) and after.
set -u
mkdir -p $OUT
WHICH=m SWEEP_S=200 bash .device/s45/sweeps.sh
rm -f .device/s45/holdout_fp8_2x16x4096x128_causal_qfp8.jsonl  # swept afresh with the fix
WHICH=f SWEEP_S=230 bash .device/s45/sweeps.sh
for e in build-bundle/evo_old build-bundle/evo; do
  for shape in "1,2,256,128" "1,2,256,128 --causal"; do
    timeout 60 compute-sanitizer --tool racecheck $e bench -t sdpa_fp8 --shape $shape --problem Q_FP8=1 \
      --set BLOCK_M=128 --set BLOCK_N=32 --set NUM_WARPS=8 --set STAGES=1 --set QK_FP8_MMA=1 \
      --verify-only --no-cache --deadline-ms 50000 < /dev/null > $OUT/race.txt 2>&1
    echo "racecheck $e $shape: rc $? $(grep -E "RACECHECK SUMMARY|ERROR SUMMARY|verdict|status" $OUT/race.txt | tr '\n' ';' | cut -c1-300)"
    cat $OUT/race.txt >> $OUT/racecheck_full.log
  done
done
