#!/usr/bin/env bash
# Issue 16: KV_INTERLEAVE on grouped-head shapes the project has not measured (few CTAs, long KV
# ranges), beside one-consumer configurations: evo bench, one round.
set -u
E=${EVO:-build-bundle/evo}
one() {  # LABEL SHAPE PROBLEM-ARGS KNOBS...
  local label=$1 shape=$2 prob=$3; shift 3
  local args=""; for s in "$@"; do args="$args --set $s"; done
  echo "$label | $shape $prob | $($E ${CMD:-bench} --template sdpa_hopper --shape $shape $prob $args 2>&1 | grep -E "^timing|^correctness|error|sm clock|^status|^spills" | sed -E 's/correctness passed over ([0-9]+) checks: max abs error ([0-9.e-]+).*/ok \2/; s/timing      median ([0-9.]+) us.*/\1 us/; s/sm clock    ([0-9]+) MHz.*/\1 MHz/' | tr '\n' ' ')"
}
P="PINGPONG=0 STREAM_K=0 LAST_CTA_COMBINES=0 PACK_GQA=1 FAST_EXP=1"
for case in "2,32,64,8192,128|--problem H_kv=8" "4,64,8,16384,128|--problem H_kv=8" "8,32,16,8192,128|--problem H_kv=8 --problem BF16=1" "8,32,16,8192,64|--problem H_kv=8" "2,16,32,16384,128|--problem H_kv=2"; do
  S=${case%%|*}; PR=${case#*|}
  one "1c BN64 ST4 IO1 TS1" $S "$PR" $P NUM_CONSUMERS=1 BLOCK_N=64 STAGES=4 INTRA_OVERLAP=1 TMA_STORE=1
  one "1c BN128 ST1 SP2 P1" $S "$PR" $P NUM_CONSUMERS=1 BLOCK_N=128 STAGES=1 SPLITS=2 PERSISTENT=1 INTRA_OVERLAP=0 TMA_STORE=0
  one "KVI 2c BN128 ST2 IO0" $S "$PR" $P KV_INTERLEAVE=1 NUM_CONSUMERS=2 BLOCK_N=128 STAGES=2 INTRA_OVERLAP=0 TMA_STORE=0
  one "KVI 3c BN64 ST3 IO0 TS1" $S "$PR" $P KV_INTERLEAVE=1 NUM_CONSUMERS=3 BLOCK_N=64 STAGES=3 INTRA_OVERLAP=0 TMA_STORE=1
done
