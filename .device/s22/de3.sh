#!/usr/bin/env bash
# The deferred-epilogue copy with its first KV tile peeled out of the loop (PEEL=1), so that the
# release of the last tile's Q buffer leaves the loop: a gate, ncu at locked clocks beside the
# template, and the loop's SASS.
set -u
source .device/ncu_prof.sh
source .device/trace_tile.sh
K=$(with_knobs "BLOCK_N=160 STREAM_K=0")
PEEL=1 python3 .device/s22/deferred_epilogue_variant.py /tmp/de $K > /dev/null
args=""; for s in $K; do args="$args --set $s"; done
$E --templates /tmp/de compile --template sdpa_hopper --shape 4,16,4096,128 $args --cubin /tmp/de.cubin > /dev/null 2>&1
cuobjdump -sass /tmp/de.cubin | gzip > $OUT/sass_de_peel.txt.gz
echo "gate DE3 bf16 causal odd: $($E --templates /tmp/de bench --template sdpa_hopper --shape 3,5,1500,1300,128 --causal --problem BF16=1 $args 2>&1 | grep -E '^verdict|^correctness' | cut -c1-120 | tr '\n' ';')"
S=4,16,4096,128
for r in 1 2; do
  prof "[DE3  BN160 SK0]" /tmp/de $S $K
  prof "[tmpl BN160 SK0]" "" $S $K
done
prof "[DE3  BN160 SK0]" /tmp/de 1,16,16384,128 $K
