#!/usr/bin/env bash
# Issue 16: at 8,32:8,16,8192,128 one query tile per (batch, KV head) gives 64 CTAs. Do two
# consumer warpgroups on alternate KV tiles of that tile (split_consumers_variant.py) stream
# faster than the template's one consumer? evo bench, interleaved in two rounds.
set -u
E=build-bundle/evo
P="--template sdpa_hopper --problem H_kv=8"
base="FAST_EXP=1 PINGPONG=0 RESCALE_UNDER_QK=0 STREAM_K=0 PRODUCER_REGS=24 PACK_GQA=1 LAST_CTA_COMBINES=0"
one() {  # LABEL TEMPLATES SHAPE KNOBS...
  local label=$1 dir=$2 shape=$3; shift 3
  local args=""; for s in "$@"; do args="$args --set $s"; done
  local t=""; [ -n "$dir" ] && t="--templates $dir"
  echo "$label $shape: $($E $t bench $P --shape $shape $args 2>&1 | grep -E "^verdict|^timing|^correctness|^status|error|sm clock" | cut -c1-120 | tr '\n' ';')"
}
S=${SHAPE:-8,32,16,8192,128}
for round in 1 2; do
  one "template 1c BN64 ST4 SP1 IO1 TS1" "" $S NUM_CONSUMERS=1 BLOCK_N=64 STAGES=4 PERSISTENT=0 SPLITS=1 INTRA_OVERLAP=1 TMA_STORE=1 $base
  one "template 1c BN128 ST1 SP2 P1 TS0" "" $S NUM_CONSUMERS=1 BLOCK_N=128 STAGES=1 PERSISTENT=1 SPLITS=2 INTRA_OVERLAP=0 TMA_STORE=0 $base
  for cfg in "SPLITS=1 BLOCK_N=64 STAGES=2" "SPLITS=1 BLOCK_N=64 STAGES=4" "SPLITS=1 BLOCK_N=128 STAGES=2" "SPLITS=2 BLOCK_N=64 STAGES=4" "SPLITS=2 BLOCK_N=64 STAGES=2"; do
    K="NUM_CONSUMERS=2 INTRA_OVERLAP=0 TMA_STORE=0 PERSISTENT=0 $base $cfg"
    python3 .device/split_consumers_variant.py /tmp/sc $K > /dev/null || { echo "variant failed: $cfg"; continue; }
    one "split [$cfg]" /tmp/sc $S $K
  done
done
