#!/usr/bin/env bash
# The rescale of O under Q K_j^T (new) against between the MMAs (old), under ncu at base clocks,
# and the new one through the gates on other problems. .device/tmp_old was a copy of
# kernel_templates/sdpa_hopper at 48c328a (without starting_points.json), written before the run.
set -u
source .device/ncu_prof.sh
rm -rf /tmp/new && mkdir -p /tmp/new && cp -r kernel_templates/sdpa_hopper /tmp/new/ && rm /tmp/new/sdpa_hopper/starting_points.json
for cfg in "PINGPONG=0" "PINGPONG=1"; do
  for v in old new new old; do
    d=/tmp/new; [ $v = old ] && d=.device/tmp_old
    prof $v $d 4,16,4096,128 PERSISTENT=1 STREAM_K=1 $cfg
  done
done
for v in old new; do
  d=/tmp/new; [ $v = old ] && d=.device/tmp_old
  prof $v $d 1,16,16384,128 PERSISTENT=1 STREAM_K=1 PINGPONG=0 BLOCK_N=192 TMA_STORE=0
done
bench() {
  local r=$($E --templates /tmp/new bench --template sdpa_hopper "$@" 2>&1)
  echo "gates $*: $(echo "$r" | grep -E '^verdict|^status|^correct|^timing' | cut -c1-90 | tr '\n' ';')"
}
bench --shape 2,8,2048,128 --causal --problem BF16=1 -s PERSISTENT=1
bench --shape 4,16,4096,64 -s NUM_CONSUMERS=3 -s PERSISTENT=1 -s TMA_STORE=0
bench --shape 1,16,1,4096,128 -s SPLITS=8 -s NUM_CONSUMERS=1 -s BLOCK_N=128
bench --shape 2,8,1400,1400,128 -s PERSISTENT=1 -s STREAM_K=1
bench --shape 2,8,1000,1000,256 -s NUM_CONSUMERS=1 -s BLOCK_N=64
bench --shape 1,32,1,8192,128 --problem H_kv=8 -s PACK_GQA=1 -s NUM_CONSUMERS=1 -s SPLITS=4 -s BLOCK_N=64
