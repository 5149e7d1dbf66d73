#!/usr/bin/env bash
# P V with P from shared memory (p_smem_variant.py) against the template, under ncu at locked
# clocks, interleaved: with and without STREAM_K at 4,16,4096,128, at 1,16,16384,128, and
# without ping-pong. First the copy's SASS: where the wait for P V sits among the exponentials.
set -u
source .device/ncu_prof.sh
source .device/trace_tile.sh
python3 .device/fixed_template.py /tmp/t_ref PINGPONG=1 > /dev/null
mk() { python3 .device/p_smem_variant.py /tmp/ps "$@" > /dev/null; }
K=$(with_knobs "STREAM_K=0")
mk $K
args=""; for s in $K; do args="$args --set $s"; done
$E --templates /tmp/ps compile --template sdpa_hopper --shape 4,16,4096,128 $args --cubin /tmp/ps.cubin > $OUT/compile_ps.txt 2>&1
cuobjdump -sass /tmp/ps.cubin > $OUT/sass_ps.txt
grep -nE "DEPBAR|MUFU.EX2|HGMMA|BAR.SYNC|STS" $OUT/sass_ps.txt | awk '{print $1, $2, $3}' | uniq -c -f1 | awk '{printf "%s ", $0} END {print ""}' | cut -c1-2500
for v in ps ref ps; do d=/tmp/ps; [ $v = ref ] && d=/tmp/t_ref; prof $v $d 4,16,4096,128 $K; done
K=$(with_knobs "STREAM_K=1"); mk $K
for v in ps ref; do d=/tmp/ps; [ $v = ref ] && d=/tmp/t_ref; prof $v $d 4,16,4096,128 $K; done
for v in ps ref; do d=/tmp/ps; [ $v = ref ] && d=/tmp/t_ref; prof $v $d 1,16,16384,128 $K; done
K=$(with_knobs "PINGPONG=0 RESCALE_UNDER_QK=0"); mk $K
for v in ps ref; do d=/tmp/ps; [ $v = ref ] && d=/tmp/t_ref; prof $v $d 4,16,4096,128 $K; done
