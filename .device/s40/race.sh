#!/usr/bin/env bash
# Fortieth session (written, not yet run): racecheck reported 12 hazards on STREAM_K's piece
# descriptors (the producer's st.shared, the consumers' ld.shared, ordered by the q_full and
# q_empty mbarriers; a consumer warp releases q_empty by __syncwarp, then lane 0's arrive). Is it
# LAGGED_MAX's (A: LAGGED_MAX=0), and does it go when every lane arrives (B: a copy made below)?
set -u
E=build-bundle/evo
variant=runs/race_variant/sdpa_hopper
rm -rf runs/race_variant; mkdir -p $variant
cp kernel_templates/sdpa_hopper/{manifest.json,starting_points.json} $variant/
python3 - kernel_templates/sdpa_hopper/sdpa_hopper.cu $variant/sdpa_hopper.cu <<'PY'
import sys
src = open(sys.argv[1]).read()
for old, new in [
    ("  __syncwarp();\n  if (lane == 0) evo::mbar_arrive(bar);", "  __syncwarp();\n  evo::mbar_arrive(bar);"),
    ("mbar_init(smem.q_empty(), hopper::kConsumerWarps);", "mbar_init(smem.q_empty(), hopper::kConsumerWarps * 32);"),
    ("mbar_init(smem.k_empty(s), hopper::kStageReleasers);", "mbar_init(smem.k_empty(s), hopper::kStageReleasers * 32);"),
    ("mbar_init(smem.v_empty(s), hopper::kStageReleasers);", "mbar_init(smem.v_empty(s), hopper::kStageReleasers * 32);")]:
    assert src.count(old) == 1, old
    src = src.replace(old, new)
open(sys.argv[2], "w").write(src)
PY
run() {
  local name=$1 global=$2 knob=$3
  timeout 100 compute-sanitizer --tool racecheck $E $global bench --template sdpa_hopper \
    --shape 1,2,700,128 --problem BF16=1 --set BLOCK_N=160 --set STREAM_K=1 --set PERSISTENT=1 \
    --set $knob --verify-only < /dev/null > $OUT/race_$name.txt 2>&1
  echo "$name: rc $? $(grep -E 'RACECHECK SUMMARY|^verdict|^template' $OUT/race_$name.txt | tr '\n' ';' | cut -c1-300)"
}
run A_lagged0 "" LAGGED_MAX=0
run B_all_lanes "--templates runs/race_variant" LAGGED_MAX=1
echo "race: $SECONDS s"
