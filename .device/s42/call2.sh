#!/usr/bin/env bash
# Forty-second session, second device call: --time-on-outliers. Its [gpu] test (and the lagged
# maxima's broken copies, whose gates share the seeds' code), then evo bench of the LAGGED_MAX
# pick and of a LAGGED_MAX=0 configuration at 4,16,4096,128, plain and on outlier inputs,
# alternating, then a search timed on outlier inputs.
set -u
bash .device/gpu_tests.sh .device/s42/gpu_outliers.txt 240
lagged="BLOCK_N=160 STREAM_K=1 PERSISTENT=1 RESCALE_UNDER_QK=1 LAGGED_MAX=1"
exact="BLOCK_N=160 STREAM_K=1 PERSISTENT=1 RESCALE_UNDER_QK=1 LAGGED_MAX=0"
for round in 1 2; do
  for knobs in "$lagged" "$exact"; do
    for flag in "" "--time-on-outliers"; do
      sets=(); for k in $knobs; do sets+=(--set "$k"); done
      us=$(timeout 120 build-bundle/evo bench -t sdpa_hopper --shape 4,16,4096,128 "${sets[@]}" $flag \
             --json < /dev/null 2> $OUT/bench_err.txt | python3 -c "import sys,json; v=json.load(sys.stdin)['gpus'][0]; t=v.get('timing') or {}; print(v['status'], t.get('median_us'), 'us,', v['correctness']['checks'], 'checks, recheck', t.get('recheck_passed'))" 2>&1 | tail -1)
      echo "round $round: $knobs ${flag:-(plain)}: $us"
    done
  done
done
db=$OUT/outliers.db
timeout 200 build-bundle/evo run -t sdpa_hopper --shape 4,16,4096,128 --budget 48 --seed 7 \
  --time-on-outliers --db $db < /dev/null > $OUT/outlier_run.txt 2>&1
echo "outlier run: rc $?"
grep -E "run 1:|stopped|re-tim" $OUT/outlier_run.txt | cut -c1-260
build-bundle/evo show elite --db $db | cut -c1-330
