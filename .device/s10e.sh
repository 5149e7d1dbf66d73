#!/usr/bin/env bash
# P in two register buffers (trace_variant.py VARIANT d) against the template, under ncu at locked
# clocks, interleaved: the softmax then runs under the last P V instead of after it.
set -u
source .device/ncu_prof.sh
B="NUM_CONSUMERS=2 BLOCK_N=128 STAGES=2 FAST_EXP=1 PINGPONG=1 INTRA_OVERLAP=1 RESCALE_UNDER_QK=1 PERSISTENT=1 STREAM_K=1 TMA_STORE=1 PRODUCER_REGS=24 SPLITS=1 PACK_GQA=0 LAST_CTA_COMBINES=0"
python3 .device/fixed_template.py /tmp/t_ref PINGPONG=1 > /dev/null
for extra in "TMA_STORE=0" "STREAM_K=0"; do
  tag=${extra/=/}
  VARIANT=dn LOOP_EVENTS=0 python3 .device/trace_variant.py /tmp/nt_d_$tag $B $extra > /dev/null
done
# KNOBS EXTRA: B with EXTRA's values in place of its own.
knobs() { local out=""; for kv in $B; do k=${kv%%=*}; for e in $1; do [ "${e%%=*}" = "$k" ] && kv=$e; done; out="$out $kv"; done; echo $out; }
args=""; for s in $(knobs TMA_STORE=0); do args="$args --set $s"; done
$E --templates /tmp/nt_d_TMA_STORE0 compile --template sdpa_hopper --shape 4,16,4096,128 $args --cubin /tmp/d.cubin > /dev/null 2>&1
cuobjdump -sass /tmp/d.cubin | grep -oE "(DEPBAR.LE gsb0, 0x[01]|MUFU.EX2|HGMMA)" | uniq -c | tr '\n' ' ' | cut -c1-1500; echo
for extra in "TMA_STORE=0" "STREAM_K=0"; do
  tag=${extra/=/}
  for v in d ref d; do
    dir=/tmp/t_ref; [ $v = d ] && dir=/tmp/nt_d_$tag
    prof "$v" $dir 4,16,4096,128 $(knobs "$extra")
  done
done

prof d /tmp/nt_d_TMA_STORE0 1,16,16384,128 $(knobs TMA_STORE=0)
