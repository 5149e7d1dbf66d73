#!/usr/bin/env bash
# Issue 15, thirty-sixth session: persistent causal tiles heaviest-first within sections of heads
# whose K and V fit L2_SECTION_MB MiB (0: across all heads, the template as committed), as a
# template copy (.device/s36/l2). evo bench at the GPU's own clocks in two rounds, then ncu with
# DRAM bytes. Run .device/s36/make_l2_copy.sh here first. Output: $OUT/l2.log.
set -u
exec > >(tee $OUT/l2.log) 2>&1
E=build-bundle/evo
T=".device/s36/l2"
source .device/s36/causal_cases.sh
for round in 1 2; do
  for c in "${cases[@]}"; do
    shape=${c%%|*}; knobs=${c#*|}
    for v in "PERSISTENT=0 L2_SECTION_MB=0" "PERSISTENT=1 L2_SECTION_MB=0" "PERSISTENT=1 L2_SECTION_MB=16" "PERSISTENT=1 L2_SECTION_MB=32" "PERSISTENT=1 L2_SECTION_MB=48"; do
      echo "r$round $shape causal $v: $($E --templates $T bench --template sdpa_hopper --shape $shape --causal $(opts $knobs $v) < /dev/null 2>&1 | grep -E '^verdict|^timing|sm clock|^correctness|error' | sed 's/  */ /g' | cut -c1-110 | tr '\n' ';')"
    done
  done
done
for c in "${cases[@]}"; do
  shape=${c%%|*}; knobs=${c#*|}
  for v in "PERSISTENT=0 L2_SECTION_MB=0" "PERSISTENT=1 L2_SECTION_MB=0" "PERSISTENT=1 L2_SECTION_MB=32"; do
    timeout 150 ncu --metrics $M -k regex:sdpa_hopper_fwd --launch-skip 30 -c 1 $E --templates $T bench --template sdpa_hopper \
      --shape $shape --causal $(opts $knobs $v) < /dev/null > $OUT/ncu.txt 2>&1
    echo "ncu $shape causal $v: $(grep -E 'pct_of_peak|duration|per_second|dram__bytes|hit_rate' $OUT/ncu.txt | sed 's/  */ /g' | tr '\n' ';')"
  done
done
