#!/usr/bin/env bash
# P from shared memory in two tiles per warpgroup (p_smem_variant.py, DOUBLE=1: the next P stored
# while P V reads the other, before the wait for it), TMA_STORE=0 (the O tile's room), against
# the template with and without TMA_STORE, under ncu at locked clocks, interleaved.
set -u
source .device/ncu_prof.sh
source .device/trace_tile.sh
python3 .device/fixed_template.py /tmp/t_ref PINGPONG=1 > /dev/null
mk() { DOUBLE=1 python3 .device/p_smem_variant.py /tmp/ps "$@" > /dev/null; }
K=$(with_knobs "STREAM_K=0 TMA_STORE=0"); mk $K
args=""; for s in $K; do args="$args --set $s"; done
$E --templates /tmp/ps compile --template sdpa_hopper --shape 4,16,4096,128 $args --cubin /tmp/ps.cubin > $OUT/compile_ps.txt 2>&1
cuobjdump -sass /tmp/ps.cubin > $OUT/sass_ps2.txt
grep -nE "DEPBAR|BAR.SYNC|HGMMA.*gsb0" $OUT/sass_ps2.txt | awk '{print $1, $2, $3, $4}' | tr '\n' ';'; echo
echo "MUFU lines: $(grep -nE "MUFU.EX2" $OUT/sass_ps2.txt | cut -d: -f1 | tr '\n' ' ' | cut -c1-600)"
for v in ps ref ps; do d=/tmp/ps; [ $v = ref ] && d=/tmp/t_ref; prof $v $d 4,16,4096,128 $K; done
prof ref_tma /tmp/t_ref 4,16,4096,128 $(with_knobs "STREAM_K=0")
K=$(with_knobs "STREAM_K=1 TMA_STORE=0"); mk $K
for v in ps ref; do d=/tmp/ps; [ $v = ref ] && d=/tmp/t_ref; prof $v $d 4,16,4096,128 $K; done
for v in ps ref; do d=/tmp/ps; [ $v = ref ] && d=/tmp/t_ref; prof $v $d 1,16,16384,128 $K; done
K=$(with_knobs "PINGPONG=0 RESCALE_UNDER_QK=0 TMA_STORE=0"); mk $K
for v in ps ref; do d=/tmp/ps; [ $v = ref ] && d=/tmp/t_ref; prof $v $d 4,16,4096,128 $K; done
