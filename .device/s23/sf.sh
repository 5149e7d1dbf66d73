#!/usr/bin/env bash
# The softmax-fence copies (softmax_fence_variant.py) on the H100: the main loop's SASS of the
# template and of each fence, the gates, then ncu at locked clocks at 4,16,4096,128 beside the
# template, interleaved.
set -u
source .device/ncu_prof.sh
source .device/trace_tile.sh
mk() { local f=$1; shift; FENCE=$f python3 .device/s23/softmax_fence_variant.py /tmp/sf_$f "$@" > /dev/null; }
K=$(with_knobs "BLOCK_N=160")
args=""; for s in $K; do args="$args --set $s"; done
$E compile --template sdpa_hopper --shape 4,16,4096,128 $args --cubin /tmp/ref.cubin > /dev/null 2>&1
cuobjdump -sass /tmp/ref.cubin > $OUT/sass_ref.txt
for f in ${FENCES:-bar warp}; do
  mk $f $K
  $E --templates /tmp/sf_$f compile --template sdpa_hopper --shape 4,16,4096,128 $args --cubin /tmp/sf_$f.cubin > $OUT/compile_$f.txt 2>&1
  cuobjdump -sass /tmp/sf_$f.cubin > $OUT/sass_$f.txt
done
python3 .device/s23/sass_loop.py $OUT/sass_*.txt
g() { local f=$1 label=$2 shape=$3 prob=$4; shift 4; mk $f "$@"; local a=""; for s in "$@"; do a="$a --set $s"; done
  echo "gate $f $label $shape $prob: $($E --templates /tmp/sf_$f bench --template sdpa_hopper --shape $shape $prob $a 2>&1 | grep -E "^verdict|^timing|^correctness|^status|error|sm clock|^spills" | cut -c1-150 | tr '\n' ';')"; }
for f in ${FENCES:-bar warp}; do
  g $f elite 4,16,4096,128 "" $K
done
S=4,16,4096,128
for r in 1 2; do
  prof "[tmpl BN160 SK1]" "" $S $K
  for f in ${FENCES:-bar warp}; do mk $f $K; prof "[$f BN160 SK1]" /tmp/sf_$f $S $K; done
done
