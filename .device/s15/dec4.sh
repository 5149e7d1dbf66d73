#!/usr/bin/env bash
# Issue 16: KV_INTERLEAVE's own knobs at 8,32:8,16,8192,128 (fp16), evo bench, two rounds.
set -u
E=${EVO:-build-bundle/evo}
one() {  # LABEL KNOBS...
  local label=$1; shift
  local args=""; for s in "$@"; do args="$args --set $s"; done
  echo "$label | $($E ${CMD:-bench} --template sdpa_hopper --shape 8,32,16,8192,128 --problem H_kv=8 $args 2>&1 | grep -E "^timing|^correctness|error|^status|^spills|sm clock" | sed -E 's/correctness passed over ([0-9]+) checks: max abs error ([0-9.e-]+).*/ok/; s/timing      median ([0-9.]+) us.*/\1 us/; s/sm clock    ([0-9]+) MHz.*/\1 MHz/; s/status      compiled//; s/spills      0 bytes stored, 0 bytes loaded; stack frame 0 bytes//' | tr '\n' ' ')"
}
P="KV_INTERLEAVE=1 PINGPONG=0 STREAM_K=0 LAST_CTA_COMBINES=0 PACK_GQA=1 FAST_EXP=1 INTRA_OVERLAP=0"
for round in 1 2; do
  for c in "2 64 2" "2 64 4" "2 80 2" "2 80 4" "2 96 2" "2 112 2" "2 128 2" "2 144 2" "2 160 2" "3 64 3" "3 80 3"; do
    set -- $c
    for ts in 0 1; do
      one "C$1 BN$2 ST$3 TS$ts" $P NUM_CONSUMERS=$1 BLOCK_N=$2 STAGES=$3 TMA_STORE=$ts
    done
  done
  one "C2 BN128 ST2 TS0 PR56" $P NUM_CONSUMERS=2 BLOCK_N=128 STAGES=2 TMA_STORE=0 PRODUCER_REGS=56
  one "C2 BN128 ST2 TS0 P1" $P NUM_CONSUMERS=2 BLOCK_N=128 STAGES=2 TMA_STORE=0 PERSISTENT=1
done
