#!/usr/bin/env bash
# LAGGED_MAX on the GPU (the thirty-eighth session built it with no device time left): its GPU
# tests (lagged_tests.txt: the gates across settings, the exact path forced, three broken copies,
# the covering sample), then ncu and `evo bench` against LAGGED_MAX=0 at the long shapes, and the
# loop's SASS (sass_loop.py). Needs build-bundle/ from the commit that has the knob. PART=tests
# runs the tests only, PART=timings the rest; unset, both (untimed: give it the call's 600 s).
set -u
exec > >(tee -a $OUT/lagged.log) 2>&1
E=build-bundle/evo
start=$(date +%s)
if [ "${PART:-tests}" = tests ] || [ -z "${PART:-}" ]; then
  timeout 500 build-bundle/evo_tests -d yes -f .device/s38/lagged_tests.txt > $OUT/lagged_tests.log 2>&1
  echo "tests rc $?, $(( $(date +%s) - start )) s"
  grep -E "^All tests passed|^test cases|FAILED|failed| s: |measured|incorrect|skipped" $OUT/lagged_tests.log | cut -c1-220 | head -40
fi
[ "${PART:-}" = tests ] && exit 0
source .device/ncu_prof.sh
while read shape knobs; do
  for lag in 0 1; do prof "[L=$lag]" "" $shape PERSISTENT=1 RESCALE_UNDER_QK=1 LAGGED_MAX=$lag $knobs; done
done <<'L'
4,16,4096,128 BLOCK_N=128
4,16,4096,128 BLOCK_N=128 STREAM_K=1
4,16,4096,128 BLOCK_N=160 STREAM_K=1
1,16,16384,128 BLOCK_N=128 STREAM_K=1
4,16,4096,64 NUM_CONSUMERS=3 TMA_STORE=0
L
for round in 1 2; do
  for lag in 0 1; do bench "[r$round L=$lag]" 4,16,4096,128 PERSISTENT=1 RESCALE_UNDER_QK=1 STREAM_K=1 LAGGED_MAX=$lag; done
done
$E compile --template sdpa_hopper --arch sm_90a --shape 4,16,4096,128 --set PERSISTENT=1 \
  --set RESCALE_UNDER_QK=1 --set LAGGED_MAX=1 --cubin /tmp/lag.cubin > /dev/null
cuobjdump -sass /tmp/lag.cubin | gzip > $OUT/lagged128.sass.gz
python3 .device/s38/sass_loop.py $OUT/lagged128.sass.gz | sed -n '/BAR.ARV/,$p'
