#!/usr/bin/env bash
# PRODUCER_REGS 24, 40 and 56 with TMA_STORE=0 (SPLITS=1), back to back, and the SASS of 24 and
# 56. (Written for s12c's candidate 20, 2433.79 us; that one has SPLITS=4 LAST_CTA_COMBINES=1,
# which this script leaves at the elite's SPLITS=1: s12g times the candidates themselves.)
set -u
source .device/ncu_prof.sh
source .device/trace_tile.sh
S=4,16,4096,128
run() { local label=$1; shift; bench "$label" $S $(with_knobs "$*"); }
K="STREAM_K=0 RESCALE_UNDER_QK=0 TMA_STORE=0"
for r in 1 2; do
  for pr in 24 40 56; do run "r$r PR=$pr TMA_STORE=0" $K PRODUCER_REGS=$pr; done
  run "r$r PR=56 TMA_STORE=1" STREAM_K=0 RESCALE_UNDER_QK=0 PRODUCER_REGS=56
done
for pr in 24 56; do
  $E compile --template sdpa_hopper --shape $S $(bench_options $(with_knobs "$K PRODUCER_REGS=$pr")) --no-cache \
    --cubin /tmp/pr$pr.cubin > /dev/null 2>&1
  cuobjdump -sass /tmp/pr$pr.cubin > $OUT/pr$pr.sass
  echo "PR=$pr: $(wc -l < $OUT/pr$pr.sass) lines, HGMMA $(grep -c HGMMA $OUT/pr$pr.sass), WARPGROUP.DEPBAR $(grep -c 'WARPGROUP.DEPBAR' $OUT/pr$pr.sass), WARPGROUP.ARRIVE $(grep -c 'WARPGROUP.ARRIVE' $OUT/pr$pr.sass), NANOSLEEP $(grep -c NANOSLEEP $OUT/pr$pr.sass), SETMAXREG $(grep -c SETMAXREG $OUT/pr$pr.sass)"
done
