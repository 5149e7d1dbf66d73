#!/usr/bin/env bash
# Fortieth session (written, not yet run): racecheck reported 12 hazards on STREAM_K's piece
# descriptors (the producer's st.shared, the consumers' ld.shared, ordered by the q_full and
# q_empty mbarriers; a consumer warp releases q_empty by __syncwarp, then lane 0's arrive). Is it
# LAGGED_MAX's (A: LAGGED_MAX=0), and does it go when every lane arrives (B: a copy made below)?
set -u
E=build-bundle/evo
# B: the copy by .device/s41/release_variant.py (written in the forty-first session, once the
# template itself released Q by every lane).
python3 .device/s41/release_variant.py runs/race_variant every_lane
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
