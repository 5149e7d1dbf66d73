#!/usr/bin/env bash
# Issue 15, twenty-seventh session: the twenty-second session's deferred-epilogue copy
# (.device/s22/deferred_epilogue_variant.py) at D = 64, where a query tile has few KV tiles and
# its edges weigh most: the gates on odd D = 64 problems, then `evo bench` beside the template,
# interleaved, and ncu at 8,16,1024,64.
set -u
source .device/ncu_prof.sh
nvidia-smi --query-gpu=name,serial,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
# The 8,16,1024,64 elite of the twenty-sixth session's fp16 table.
K="BLOCK_N=128 FAST_EXP=1 INTRA_OVERLAP=1 KV_INTERLEAVE=0 LAST_CTA_COMBINES=0 NUM_CONSUMERS=2 PACK_GQA=0 PERSISTENT=1 PINGPONG=1 PRODUCER_REGS=40 RESCALE_UNDER_QK=1 SOFTMAX_WARP_SYNC=0 SPLITS=1 STAGES=2 STREAM_K=0 TMA_STORE=1"
mk() { PEEL=${PEEL:-0} python3 .device/s22/deferred_epilogue_variant.py /tmp/de "$@" > /dev/null; }
sets() { local a=""; for s in "$@"; do a="$a --set $s"; done; echo $a; }
g() { local label=$1 shape=$2 prob=$3; shift 3; mk "$@"
  echo "$label $shape $prob: $($E --templates /tmp/de bench --template sdpa_hopper --shape $shape $prob $(sets "$@") 2>&1 | grep -E "^verdict|^timing|^correctness|^status|error|sm clock|^spills" | cut -c1-120 | tr '\n' ';')"; }
g "gate DE D64 causal odd" 2,8,1000,777,64 "--causal" $K
g "gate DE D64 bf16 odd" 3,5,1500,1300,64 "--problem BF16=1" $K
g "gate DE D64 one kv tile" 2,8,300,100,64 "" $K
g "gate DE D64 stages3" 8,16,1024,64 "" ${K/STAGES=2/STAGES=3}
t() { local label=$1 dir=$2 shape=$3; shift 3; local tp=""; [ -n "$dir" ] && tp="--templates $dir"
  echo "$label $shape: $($E $tp bench --template sdpa_hopper --shape $shape $(sets "$@") 2>&1 | grep -E '^timing|sm clock' | sed 's/  */ /g' | cut -c1-80 | tr '\n' ';')"; }
for shape in 8,16,1024,64 2,8,2048,64 4,16,4096,64 2,8,512,64; do
  for peel in 0 1; do
    PEEL=$peel mk $K
    for r in 1 2; do
      t "tmpl" "" $shape $K
      t "DE peel$peel" /tmp/de $shape $K
    done
  done
done
for b in 3; do
  K3=${K/STAGES=2/STAGES=3}; mk $K3
  t "tmpl ST3" "" 8,16,1024,64 $K3; t "DE ST3" /tmp/de 8,16,1024,64 $K3; t "tmpl ST3" "" 8,16,1024,64 $K3; t "DE ST3" /tmp/de 8,16,1024,64 $K3
done
mk $K
prof "[tmpl]" "" 8,16,1024,64 $K
prof "[DE]" /tmp/de 8,16,1024,64 $K
