#!/usr/bin/env bash
# Issue 15, thirty-sixth session: CAUSAL_PAIRS. The sdpa_hopper GPU tests (the new pairs cases and
# broken copies among them), then evo bench at the GPU's own clocks in two rounds of the causal
# shapes where the persistent walk lost to one CTA per tile (l2.sh), then ncu with DRAM bytes.
# Output: $OUT/pairs.log, $OUT/gpu_tests.txt.
set -u
exec > >(tee $OUT/pairs.log) 2>&1
E=build-bundle/evo
for t in "sdpa_hopper passes the gates with causal pairs" "broken causal pairs of sdpa_hopper are rejected" \
         "sdpa_hopper passes the gates with stream-K tails"; do
  start=$(date +%s)
  timeout 250 build-bundle/evo_tests "$t" >> $OUT/gpu_tests.txt 2>&1
  echo "== $t: rc $? ($(( $(date +%s) - start )) s) $(tail -2 $OUT/gpu_tests.txt | tr '\n' ' ')"
done
grep -E "measured|incorrect \(" $OUT/gpu_tests.txt | cut -c1-200 | head -20
source .device/s36/causal_cases.sh
variants=("PERSISTENT=0" "PERSISTENT=1" "PERSISTENT=1 CAUSAL_PAIRS=1" "PERSISTENT=1 CAUSAL_PAIRS=1 STREAM_K=1")
for round in 1 2; do
  for c in "${cases[@]}"; do
    shape=${c%%|*}; knobs=${c#*|}
    for v in "${variants[@]}"; do
      echo "r$round $shape causal $v: $($E bench --template sdpa_hopper --shape $shape --causal $(opts $knobs $v) < /dev/null 2>&1 | grep -E '^verdict|^timing|sm clock|^correctness|error' | sed 's/  */ /g' | cut -c1-100 | tr '\n' ';')"
    done
  done
done
for c in "${cases[@]}"; do
  shape=${c%%|*}; knobs=${c#*|}
  for v in "PERSISTENT=0" "PERSISTENT=1 CAUSAL_PAIRS=1" "PERSISTENT=1 CAUSAL_PAIRS=1 STREAM_K=1"; do
    timeout 150 ncu --metrics $M -k regex:sdpa_hopper_fwd --launch-skip 30 -c 1 $E bench --template sdpa_hopper \
      --shape $shape --causal $(opts $knobs $v) < /dev/null > $OUT/ncu.txt 2>&1
    echo "ncu $shape causal $v: $(grep -E 'pct_of_peak|duration|per_second|dram__bytes|hit_rate' $OUT/ncu.txt | sed 's/  */ /g' | tr '\n' ';')"
  done
done
