#!/usr/bin/env bash
# CLUSTER_M=2 with .cta-scope remote arrivals, over the long non-causal shapes, two rounds, with
# and without the cluster; kv_split/ (CTA 0 multicasts K, CTA 1 V) beside the halves.
# (kv_split/ is made by make_kv_split.sh.)
set -u
exec > >(tee $OUT/cluster5.log) 2>&1
E=build-bundle/evo
b() { local label=$1; shift; echo "$label: $(timeout 120 $E "$@" < /dev/null 2>&1 | grep -E '^verdict|^timing|sm clock|rror' | sed 's/  */ /g; s/17 repetitions.*averaged over the timed launches://; s/per call at the median;sm clock/,/; s/right after the timed launches//' | cut -c1-120 | tr '\n' ';')"; }
rows=(
  "4,16,4096,128|PERSISTENT=1 RESCALE_UNDER_QK=1 BLOCK_N=160 SOFTMAX_WARP_SYNC=1"
  "4,16,4096,128|PERSISTENT=1 RESCALE_UNDER_QK=1 STAGES=3 TMA_STORE=0"
  "1,16,16384,128|PERSISTENT=1 RESCALE_UNDER_QK=1 BLOCK_N=176 TMA_STORE=0"
  "4,16,4096,64|PERSISTENT=1 NUM_CONSUMERS=3 TMA_STORE=0"
  "2,16,4096,256|BLOCK_N=80 TMA_STORE=0"
  "2,8,2048,128|PERSISTENT=1 RESCALE_UNDER_QK=1"
)
for round in 1 2; do
  for r in "${rows[@]}"; do
    shape=${r%%|*}; sets=$(for k in ${r#*|}; do echo -n " --set $k"; done)
    b "r$round $shape ${r#*|} C=1" bench -t sdpa_hopper --shape $shape $sets
    b "r$round $shape ${r#*|} C=2" bench -t sdpa_hopper --shape $shape $sets --set CLUSTER_M=2
    [ $round = 1 ] && b "r$round $shape ${r#*|} C=2 kv_split" --templates .device/s37/kv_split bench -t sdpa_hopper --shape $shape $sets --set CLUSTER_M=2
  done
done
b "ref 4,16,4096,128 stream-K pick" bench -t sdpa_hopper --shape 4,16,4096,128 --set PERSISTENT=1 --set STREAM_K=1 --set RESCALE_UNDER_QK=1 --set BLOCK_N=160 --set SOFTMAX_WARP_SYNC=1
source .device/ncu_prof.sh
M=$M,lts__t_bytes.sum
for c in 1 2; do prof ncu "" 4,16,4096,128 PERSISTENT=1 RESCALE_UNDER_QK=1 BLOCK_N=160 SOFTMAX_WARP_SYNC=1 CLUSTER_M=$c; grep lts__t_bytes $OUT/ncu.txt; done
