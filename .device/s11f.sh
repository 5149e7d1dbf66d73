#!/usr/bin/env bash
# Issue 16: can 64 CTAs keep up with the HBM rate at 1,32:8,1,32768,128 when a CTA's two
# consumer warpgroups take alternate KV tiles (split_consumers_variant.py)? evo bench of the copy
# at SPLITS=8 and 16 beside the template's best one-consumer configurations; the copy's gates
# on odd shapes too.
set -u
E=build-bundle/evo
P="--template sdpa_hopper --problem H_kv=8"
base="FAST_EXP=1 PINGPONG=0 RESCALE_UNDER_QK=0 STREAM_K=0 TMA_STORE=0 PRODUCER_REGS=24 PACK_GQA=1 LAST_CTA_COMBINES=0"
one() {  # LABEL TEMPLATES SHAPE KNOBS...
  local label=$1 dir=$2 shape=$3; shift 3
  local args=""; for s in "$@"; do args="$args --set $s"; done
  local t=""; [ -n "$dir" ] && t="--templates $dir"
  echo "$label $shape: $($E $t bench $P --shape $shape $args 2>&1 | grep -E "^verdict|^timing|^correctness|^status|error" | cut -c1-110 | tr '\n' ';')"
}
for cfg in "SPLITS=8 BLOCK_N=64 STAGES=2 PERSISTENT=0" "SPLITS=8 BLOCK_N=128 STAGES=2 PERSISTENT=0" \
           "SPLITS=8 BLOCK_N=64 STAGES=4 PERSISTENT=0" "SPLITS=16 BLOCK_N=64 STAGES=2 PERSISTENT=0" \
           "SPLITS=16 BLOCK_N=128 STAGES=2 PERSISTENT=0" "SPLITS=8 BLOCK_N=64 STAGES=2 PERSISTENT=1"; do
  K="NUM_CONSUMERS=2 INTRA_OVERLAP=0 $base $cfg"
  python3 .device/split_consumers_variant.py /tmp/sc $K > /dev/null
  one "split [$cfg]" /tmp/sc 1,32,1,32768,128 $K
done
one "template 1 consumer SPLITS=16 BLOCK_N=64 STAGES=2 PERSISTENT=1 INTRA_OVERLAP=1" "" 1,32,1,32768,128 NUM_CONSUMERS=1 SPLITS=16 BLOCK_N=64 STAGES=2 PERSISTENT=1 INTRA_OVERLAP=1 $base
one "template 1 consumer SPLITS=8 BLOCK_N=64 STAGES=2 PERSISTENT=0 INTRA_OVERLAP=1" "" 1,32,1,32768,128 NUM_CONSUMERS=1 SPLITS=8 BLOCK_N=64 STAGES=2 PERSISTENT=0 INTRA_OVERLAP=1 $base
K="NUM_CONSUMERS=2 INTRA_OVERLAP=0 PERSISTENT=0 $base SPLITS=8 BLOCK_N=64 STAGES=2"
python3 .device/split_consumers_variant.py /tmp/sc $K > /dev/null
one "split odd" /tmp/sc 2,32,3,5000,128 $K
one "split odd" /tmp/sc 1,32,1,1000,128 $K
