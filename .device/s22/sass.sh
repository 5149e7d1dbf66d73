#!/usr/bin/env bash
# The SASS of the template and of the deferred-epilogue copy (BLOCK_N=160 STREAM_K=0), for a
# side-by-side reading of their main loops.
set -u
source .device/trace_tile.sh
K=$(with_knobs "BLOCK_N=160 STREAM_K=0")
python3 .device/s22/deferred_epilogue_variant.py /tmp/de $K > /dev/null
args=""; for s in $K; do args="$args --set $s"; done
$E --templates /tmp/de compile --template sdpa_hopper --shape 4,16,4096,128 $args --cubin /tmp/de.cubin > /dev/null 2>&1
$E compile --template sdpa_hopper --shape 4,16,4096,128 $args --cubin /tmp/ref.cubin > /dev/null 2>&1
cuobjdump -sass /tmp/de.cubin > $OUT/sass_de.txt
cuobjdump -sass /tmp/ref.cubin > $OUT/sass_ref.txt
wc -l $OUT/sass_*.txt
