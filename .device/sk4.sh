#!/usr/bin/env bash
# ncu, both normalizations of the tensor pipe, at 4,16,4096,128; then bench-attention bf16 on the long shapes.
set -u
E=build-bundle/evo
M=sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second
i=0
for cfg in "BLOCK_N=128 PINGPONG=0 STREAM_K=1" "BLOCK_N=128 PINGPONG=0" "BLOCK_N=192 PINGPONG=0 TMA_STORE=0 STREAM_K=1" "BLOCK_N=192 PINGPONG=0 TMA_STORE=0"; do
  i=$((i+1)); args="--set PERSISTENT=1"; for kv in $cfg; do args="$args --set $kv"; done
  timeout 150 ncu --target-processes all --clock-control none --metrics $M -k regex:sdpa_hopper_fwd --launch-skip 30 -c 2 \
    $E bench --template sdpa_hopper --shape 4,16,4096,128 $args > $OUT/ncu_$i.txt 2>&1
  echo "== ncu $cfg"; grep -E "sdpa_hopper_fwd \(|pct_of_peak|duration|per_second" $OUT/ncu_$i.txt | sed 's/  */ /g'
done
timeout 120 ncu --clock-control none --metrics $M -k regex:cudnn --launch-skip 1 -c 1 python3 scripts/attention-once.py --peer cudnn --shape 4,16,4096,128 > $OUT/ncu_cudnn.txt 2>&1
echo "== ncu cudnn"; grep -E "pct_of_peak|duration|per_second" $OUT/ncu_cudnn.txt | sed 's/  */ /g'
timeout 400 python3 scripts/bench-attention.py --evo $E --template sdpa_hopper --shapes 4,16,4096,128 1,16,16384,128 \
  --budget 40 --dtype bf16 --work /tmp/work --json $OUT/ba.json > $OUT/ba.txt 2>&1
tail -5 $OUT/ba.txt
for db in /tmp/work/*.db; do $E show elite --db $db 2>&1 | head -7; done > $OUT/elite.txt; cat $OUT/elite.txt
