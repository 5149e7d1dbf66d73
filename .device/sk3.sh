#!/usr/bin/env bash
# Stream-K after the register trims: GPU tests, ncu at 4,16,4096,128, bench-attention at 4096.
set -u
T=build-bundle/evo_tests; E=build-bundle/evo
( $T "sdpa_hopper passes the gates with stream-K tails" ; $T "broken stream-K merges of sdpa_hopper are rejected" ) > $OUT/tests.log 2>&1
grep -E "passed|failed|FAILED|stream-K|S=" $OUT/tests.log | head -20
M=sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second
i=0
for cfg in "BLOCK_N=192 PINGPONG=0 TMA_STORE=0 STREAM_K=1" "BLOCK_N=160 STREAM_K=1" "BLOCK_N=128 STREAM_K=1" "BLOCK_N=192 PINGPONG=0 TMA_STORE=0"; do
  i=$((i+1)); args="--set PERSISTENT=1"; for kv in $cfg; do args="$args --set $kv"; done
  timeout 150 ncu --target-processes all --clock-control none --metrics $M -k regex:sdpa_hopper_fwd --launch-skip 30 -c 2 \
    $E bench --template sdpa_hopper --shape 4,16,4096,128 $args > $OUT/ncu_$i.txt 2>&1
  echo "== ncu $cfg"; grep -E "sdpa_hopper_fwd|pct_of_peak|duration|per_second" $OUT/ncu_$i.txt | sed 's/  */ /g'
done
mkdir -p $OUT/work
timeout 400 python3 scripts/bench-attention.py --evo $E --template sdpa_hopper --shapes 4,16,4096,128 \
  --budget 40 --dtype fp16 --work /tmp/work --json $OUT/ba.json > $OUT/ba.txt 2>&1
tail -5 $OUT/ba.txt
$E show elite --db /tmp/work/4x16x4096x128.db > $OUT/elite.txt 2>&1; cat $OUT/elite.txt | head -12
python3 .device/cands.py /tmp/work/4x16x4096x128.db > $OUT/cands.txt 2>&1; head -25 $OUT/cands.txt
