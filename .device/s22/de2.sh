#!/usr/bin/env bash
# The deferred-epilogue copy with its tile code written twice, one per Q buffer (a constant
# buffer address in each): gates, then ncu at locked clocks beside the template, interleaved.
set -u
source .device/ncu_prof.sh
source .device/trace_tile.sh
mk() { python3 .device/s22/deferred_epilogue_variant.py /tmp/de "$@" > /dev/null; }
g() { local label=$1 shape=$2 prob=$3; shift 3; mk "$@"; local a=""; for s in "$@"; do a="$a --set $s"; done
  echo "$label $shape $prob: $($E --templates /tmp/de bench --template sdpa_hopper --shape $shape $prob $a 2>&1 | grep -E "^verdict|^timing|^correctness|^status|error|sm clock|^spills" | cut -c1-150 | tr '\n' ';')"; }
K=$(with_knobs "BLOCK_N=160 STREAM_K=0")
g "gate DE2 bf16 causal odd" 3,5,1500,1300,128 "--causal --problem BF16=1" $(with_knobs "BLOCK_N=128 STREAM_K=0")
g "gate DE2 1 kv tile" 2,8,300,100,128 "" $(with_knobs "BLOCK_N=128 STREAM_K=0")
g "gate DE2 BN160" 4,16,4096,128 "" $K
S=4,16,4096,128
for r in 1 2; do
  prof "[DE2  BN160 SK0]" /tmp/de $S $K
  prof "[tmpl BN160 SK0]" "" $S $K
done
prof "[DE2  BN160 SK0]" /tmp/de 1,16,16384,128 $K
