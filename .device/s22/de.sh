#!/usr/bin/env bash
# The deferred-epilogue copy (deferred_epilogue_variant.py) on the H100: its SASS waits, the gates
# on odd shapes, then ncu at locked clocks (tensor pipe) at 4,16,4096,128 beside the template,
# interleaved, then evo bench timings.
set -u
source .device/ncu_prof.sh
source .device/trace_tile.sh
mk() { python3 .device/s22/deferred_epilogue_variant.py /tmp/de "$@" > /dev/null; }
K=$(with_knobs "BLOCK_N=160 STREAM_K=0")
mk $K
args=""; for s in $K; do args="$args --set $s"; done
$E --templates /tmp/de compile --template sdpa_hopper --shape 4,16,4096,128 $args --cubin /tmp/de.cubin > $OUT/compile_de.txt 2>&1
cuobjdump -sass /tmp/de.cubin > /tmp/sass_de.txt
echo "HGMMA $(grep -c HGMMA /tmp/sass_de.txt) DEPBAR $(grep -c 'WARPGROUP.DEPBAR' /tmp/sass_de.txt) ARRIVES $(grep -c 'WARPGROUP.ARRIVE' /tmp/sass_de.txt)"
# The gates: every knob but the shape's own fixed as named (one configuration per copy).
g() { local label=$1 shape=$2 prob=$3; shift 3; mk "$@"; local a=""; for s in "$@"; do a="$a --set $s"; done
  echo "$label $shape $prob: $($E --templates /tmp/de bench --template sdpa_hopper --shape $shape $prob $a 2>&1 | grep -E "^verdict|^timing|^correctness|^status|error|sm clock|^spills" | cut -c1-150 | tr '\n' ';')"; }
g "gate DE BN160" 4,16,4096,128 "" $K
g "gate DE bf16 causal odd" 3,5,1500,1300,128 "--causal --problem BF16=1" $(with_knobs "BLOCK_N=128 STREAM_K=0")
g "gate DE odd kv" 2,8,700,1999,128 "" $(with_knobs "BLOCK_N=160 STREAM_K=0")
g "gate DE D64" 2,8,1000,777,64 "--causal" $(with_knobs "BLOCK_N=128 STREAM_K=0 STAGES=3")
g "gate DE 1 kv tile" 2,8,300,100,128 "" $(with_knobs "BLOCK_N=128 STREAM_K=0")
S=4,16,4096,128
mk $K
for r in 1 2; do
  prof "[tmpl BN160 SK1]" "" $S $(with_knobs "BLOCK_N=160")
  prof "[DE   BN160 SK0]" /tmp/de $S $K
  prof "[tmpl BN160 SK0]" "" $S $K
done
mk $(with_knobs "BLOCK_N=128 STREAM_K=0")
prof "[DE   BN128 SK0]" /tmp/de $S $(with_knobs "BLOCK_N=128 STREAM_K=0")
prof "[tmpl BN128 SK0]" "" $S $(with_knobs "BLOCK_N=128 STREAM_K=0")
mk $K
prof "[DE   BN160 SK0]" /tmp/de 1,16,16384,128 $K
prof "[tmpl BN160 SK1]" "" 1,16,16384,128 $(with_knobs "BLOCK_N=160")
for r in 1 2; do
  echo "bench tmpl SK1: $($E bench --template sdpa_hopper --shape $S $(bench_options $(with_knobs "BLOCK_N=160")) 2>&1 | grep -E '^timing|sm clock' | tr '\n' ';')"
  echo "bench DE SK0: $($E --templates /tmp/de bench --template sdpa_hopper --shape $S $(bench_options $K) 2>&1 | grep -E '^timing|sm clock' | tr '\n' ';')"
  echo "bench tmpl SK0: $($E bench --template sdpa_hopper --shape $S $(bench_options $K) 2>&1 | grep -E '^timing|sm clock' | tr '\n' ';')"
done
