#!/usr/bin/env bash
# Stream-K: ncu tensor-pipe at 4,16,4096,128 beside cuDNN, then bench-attention fp16 on the long shapes.
set -u
E=build-bundle/evo
M=sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second
i=0
for cfg in "BLOCK_N=192 PINGPONG=0 TMA_STORE=0 STREAM_K=1" "BLOCK_N=128 STREAM_K=1" "BLOCK_N=160 TMA_STORE=0 STREAM_K=1" "BLOCK_N=192 PINGPONG=0 TMA_STORE=0"; do
  i=$((i+1)); args="--set PERSISTENT=1"; for kv in $cfg; do args="$args --set $kv"; done
  timeout 150 ncu --target-processes all --clock-control none --metrics $M -k regex:sdpa_hopper_fwd --launch-skip 3 -c 2 \
    $E bench --template sdpa_hopper --shape 4,16,4096,128 $args > $OUT/ncu_$i.txt 2>&1
  echo "== ncu $cfg"; grep -E "pct_of_peak|duration|per_second" $OUT/ncu_$i.txt
done
timeout 120 ncu --clock-control none --metrics $M -k regex:cudnn --launch-skip 1 -c 1 python3 scripts/attention-once.py --peer cudnn --shape 4,16,4096,128 > $OUT/ncu_cudnn.txt 2>&1
echo "== ncu cudnn"; grep -E "cudnn|pct_of_peak|duration|per_second" $OUT/ncu_cudnn.txt | head
timeout 420 python3 scripts/bench-attention.py --evo $E --template sdpa_hopper --shapes 4,16,4096,128 1,16,16384,128 \
  --budget 40 --dtype fp16 --work $OUT/work --json $OUT/ba.json > $OUT/ba.txt 2>&1
tail -12 $OUT/ba.txt
