#!/usr/bin/env bash
# Forty-first session: the Q release by every lane (this tree) against lane 0 after __syncwarp
# (the change undone in a copy, .device/s41/release_variant.py), same knobs, alternating, `evo bench`;
# then racecheck on a small causal three-consumer problem (s41 call 2's 1,3,500,64 outran 200 s).
set -u
E=build-bundle/evo
python3 .device/s41/release_variant.py runs/ab_old lane0
bench() {  # name, global options, shape, knobs...
  local name=$1 global=$2 shape=$3; shift 3
  local args=""; for kv in "$@"; do args="$args --set $kv"; done
  $E $global bench --template sdpa_hopper --shape $shape $args --json < /dev/null > $OUT/b.json 2> $OUT/b.err
  python3 -c "
import json
def find(x):
    if isinstance(x, dict):
        if 'median_us' in x: return x
        for v in x.values():
            r = find(v)
            if r: return r
    if isinstance(x, list):
        for v in x:
            r = find(v)
            if r: return r
t = find(json.load(open('$OUT/b.json')))
print('$name $shape', t and {k: t.get(k) for k in ('median_us', 'p10_us', 'p90_us', 'sm_clock_mhz', 'mean_sm_clock_mhz', 'tflops')})
" 2>&1 | cut -c1-300
}
k1="NUM_CONSUMERS=2 BLOCK_N=160 STAGES=2 PERSISTENT=1 STREAM_K=1 PINGPONG=1 RESCALE_UNDER_QK=1 LAGGED_MAX=1"
k2="NUM_CONSUMERS=2 BLOCK_N=160 STAGES=2 PERSISTENT=1 PINGPONG=1 TMA_STORE=0 CLUSTER_M=2 LAGGED_MAX=1"
for r in 1 2 3; do
  bench new "" 4,16,4096,128 $k1; bench old "--templates runs/ab_old" 4,16,4096,128 $k1
done
for r in 1 2; do
  bench new "" 1,16,16384,128 $k2; bench old "--templates runs/ab_old" 1,16,16384,128 $k2
done
cp $OUT/b.json $OUT/last_bench.json
echo "ab: $SECONDS s"
UNTIL=$((SECONDS + 200)) bash .device/s41/sanitize.sh <<'L'
--shape 1,1,200,64 --causal|LAGGED_MAX=1 NUM_CONSUMERS=3 BLOCK_N=64 TMA_STORE=0
L
echo "done: $SECONDS s"
