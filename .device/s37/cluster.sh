#!/usr/bin/env bash
# Issue 15, thirty-seventh session: CLUSTER_M=2 (two CTAs share each K/V tile by TMA multicast).
# First the gates (evo bench checks every correctness problem of the manifest, odd lengths among
# them) on more shapes, dtypes and grouped heads; then evo bench at the GPU's clocks, with and
# without the cluster, in two rounds; then ncu (tensor pipe, L2 and DRAM bytes) on one pair.
# Output: $OUT/cluster.log.
set -u
exec > >(tee $OUT/cluster.log) 2>&1
source .device/ncu_prof.sh
# gate checks: shapes with odd query-tile counts, bf16, grouped heads packed or not
gate g1 3,12,1500,1300,128 "" CLUSTER_M=2 PERSISTENT=1
gate g2 3,12,1500,1300,128 "" CLUSTER_M=2 PERSISTENT=0
gate g3 2,8,2048,64 "--problem BF16=1" CLUSTER_M=2 PERSISTENT=1 NUM_CONSUMERS=3
gate g4 2,32,1000,777,128 "--problem H_kv=8" CLUSTER_M=2 PERSISTENT=1 PACK_GQA=1
gate g5 2,32,1000,777,128 "--problem H_kv=8" CLUSTER_M=2 PERSISTENT=0
gate g6 2,16,1024,256 "" CLUSTER_M=2 BLOCK_N=80 TMA_STORE=0
rows=(
  "4,16,4096,128|PERSISTENT=1 RESCALE_UNDER_QK=1"
  "4,16,4096,128|PERSISTENT=1 RESCALE_UNDER_QK=1 BLOCK_N=160 SOFTMAX_WARP_SYNC=1"
  "4,16,4096,128|PERSISTENT=0 RESCALE_UNDER_QK=1"
  "1,16,16384,128|PERSISTENT=1 RESCALE_UNDER_QK=1"
  "1,16,16384,128|PERSISTENT=1 RESCALE_UNDER_QK=1 BLOCK_N=192 TMA_STORE=0"
  "2,8,2048,128|PERSISTENT=1 RESCALE_UNDER_QK=1"
  "4,16,4096,64|PERSISTENT=1 NUM_CONSUMERS=3 TMA_STORE=0"
  "2,16,4096,256|BLOCK_N=80 TMA_STORE=0"
)
refs=(
  "4,16,4096,128|PERSISTENT=1 STREAM_K=1 RESCALE_UNDER_QK=1 BLOCK_N=160 SOFTMAX_WARP_SYNC=1"
  "1,16,16384,128|PERSISTENT=1 STREAM_K=1 RESCALE_UNDER_QK=1 BLOCK_N=192 TMA_STORE=0"
)
for round in 1 2; do
  for r in "${rows[@]}"; do
    shape=${r%%|*}; knobs=${r#*|}
    for c in 1 2; do timeout 120 bash -c "source .device/ncu_prof.sh; bench 'r$round $shape $knobs CLUSTER_M=$c' $shape $knobs CLUSTER_M=$c"; done
  done
  for r in "${refs[@]}"; do
    shape=${r%%|*}; knobs=${r#*|}
    timeout 120 bash -c "source .device/ncu_prof.sh; bench 'r$round ref $shape $knobs' $shape $knobs"
  done
done
M=$M,lts__t_bytes.sum,dram__bytes_read.sum
for c in 1 2; do
  prof "ncu" "" 4,16,4096,128 PERSISTENT=1 RESCALE_UNDER_QK=1 BLOCK_N=160 SOFTMAX_WARP_SYNC=1 CLUSTER_M=$c
  grep -E "lts__t_bytes|dram__bytes" $OUT/ncu.txt | sed 's/  */ /g'
done
