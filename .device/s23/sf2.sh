#!/usr/bin/env bash
# The __syncwarp fence (softmax_fence_variant.py FENCE=warp) on more configurations: the gates on
# odd problems, then ncu at locked clocks beside the template (interleaved), then evo bench.
set -u
source .device/ncu_prof.sh
source .device/trace_tile.sh
mk() { FENCE=warp python3 .device/s23/softmax_fence_variant.py /tmp/sf_warp "$@" > /dev/null; }
g() { local label=$1 shape=$2 prob=$3; shift 3; mk "$@"; local a=""; for s in "$@"; do a="$a --set $s"; done
  echo "gate warp $label $shape $prob: $($E --templates /tmp/sf_warp bench --template sdpa_hopper --shape $shape $prob $a 2>&1 | grep -E "^verdict|^timing|^correctness|^status|error|sm clock|^spills" | cut -c1-150 | tr '\n' ';')"; }
g "bf16 causal odd" 3,5,1500,1300,128 "--causal --problem BF16=1" $(with_knobs "BLOCK_N=128 STREAM_K=0")
g "odd kv" 2,8,700,1999,128 "" $(with_knobs "BLOCK_N=160 STREAM_K=0")
g "D64 causal" 2,8,1000,777,64 "--causal" $(with_knobs "BLOCK_N=128 STREAM_K=0 STAGES=3")
g "1 kv tile" 2,8,300,100,128 "" $(with_knobs "BLOCK_N=128 STREAM_K=0")
g "packed causal" 2,8,300,900,128 "--causal --problem H_kv=2" $(with_knobs "BLOCK_N=128 STREAM_K=0 PACK_GQA=1")
g "D256" 1,4,1000,5000,256 "" $(with_knobs "BLOCK_N=64 STREAM_K=0 TMA_STORE=0 NUM_CONSUMERS=1 PINGPONG=0")
g "splits" 2,32,3,5000,128 "--problem H_kv=8" $(with_knobs "BLOCK_N=128 STREAM_K=0 PERSISTENT=0 SPLITS=4 PACK_GQA=1 NUM_CONSUMERS=1 PINGPONG=0")
pair() {  # LABEL SHAPE KNOBS: the template, then the copy
  local label=$1 shape=$2; shift 2
  prof "[tmpl $label]" "" $shape "$@"
  mk "$@"; prof "[warp $label]" /tmp/sf_warp $shape "$@"
}
S=4,16,4096,128
pair "BN160 SK1" $S $(with_knobs "BLOCK_N=160")
pair "BN160 SK0" $S $(with_knobs "BLOCK_N=160 STREAM_K=0")
pair "BN128 SK1" $S $(with_knobs "BLOCK_N=128")
pair "BN128 SK0" $S $(with_knobs "BLOCK_N=128 STREAM_K=0")
pair "BN176 SK1 TS0" $S $(with_knobs "BLOCK_N=176 TMA_STORE=0")
PROBLEM=BF16=1 pair "bf16 BN160 SK1" $S $(with_knobs "BLOCK_N=160")
pair "BN160 SK1" 1,16,16384,128 $(with_knobs "BLOCK_N=160")
pair "D64 3c BN128 ST4 SK1 TS0" 4,16,4096,64 $(with_knobs "NUM_CONSUMERS=3 BLOCK_N=128 STAGES=4 TMA_STORE=0 RESCALE_UNDER_QK=0")
pair "BN160 SK1 again" $S $(with_knobs "BLOCK_N=160")
K=$(with_knobs "BLOCK_N=160")
for r in 1 2 3; do
  bench "bench tmpl BN160 SK1" $S $K
  mk $K; E="$E --templates /tmp/sf_warp" bench "bench warp BN160 SK1" $S $K
done
