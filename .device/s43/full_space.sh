#!/usr/bin/env bash
# Issue 17, forty-third session: the search on sdpa_hopper's whole space (no --fix: the pool
# ranks it, as no recording can) at the task of holdout_hopper_bf16_2x16x4096x128, whose
# recorded subspace's best is 425.82 us. Three seeds without starting points, one with them.
set -u
E=build-bundle/evo
mkdir -p $OUT
$E sweep --template sdpa_hopper --shape 2,16,4096,128 --problem BF16=1 --count sm_90 </dev/null
for s in ${SEEDS:-1 2 3}; do
  start=$(date +%s)
  $E run --template sdpa_hopper --shape 2,16,4096,128 --problem BF16=1 --no-starting-points \
    --budget 100 --seed $s --db $OUT/full_$s.db --new </dev/null > $OUT/full_$s.txt 2>&1
  echo "== seed $s: rc $?, $(( $(date +%s) - start )) s"
  tail -12 $OUT/full_$s.txt | cut -c1-240
done
start=$(date +%s)
$E run --template sdpa_hopper --shape 2,16,4096,128 --problem BF16=1 --budget 100 --seed 1 \
  --db $OUT/full_sp1.db --new </dev/null > $OUT/full_sp1.txt 2>&1
echo "== with starting points, seed 1: rc $?, $(( $(date +%s) - start )) s"
tail -12 $OUT/full_sp1.txt | cut -c1-240
