#!/bin/bash
# (copied from /tmp/sass.sh; the cuobjdump step finds no cuobjdump here, and the comparison is
# .device/s45/text_sections.py over the cubins: the .text, .nv.info, .nv.shared and .nv.constant
# sections, without the line info that moves with any edit)
# usage: sass.sh EVO OUTDIR : SASS of configurations of the three cp.async-ring templates
E=$1; D=$2; mkdir -p $D
i=0
while read t args; do
  i=$((i+1))
  $E compile -t $t $args --arch sm_90 --no-cache --cubin $D/$i.cubin > $D/$i.txt 2>&1
  /usr/local/cuda/bin/cuobjdump -sass $D/$i.cubin 2>/dev/null | grep -E "^\s+/\*[0-9a-f]+\*/" > $D/$i.sass
  echo "$i $t $args $(wc -l < $D/$i.sass)"
done <<'LIST'
sdpa_fp16 --set STAGES=1
sdpa_fp16 --set STAGES=1 --set BLOCK_M=128 --set NUM_WARPS=8 --causal
sdpa_fp16 --set STAGES=2
sdpa_fp16 --set STAGES=1 --set WARP_SPECIALIZED=1
sdpa_fp16_wgmma --set STAGES=1
sdpa_fp16_wgmma --set STAGES=2 --causal
sdpa_fp8 --set STAGES=1 --set QK_FP8_MMA=1 --problem Q_FP8=1 --set BLOCK_M=128 --set NUM_WARPS=8 --set BLOCK_N=32
sdpa_fp8 --set STAGES=1 --set QK_FP8_MMA=1 --problem Q_FP8=1 --causal
sdpa_fp8 --set STAGES=1 --problem Q_FP8=1
sdpa_fp8 --set STAGES=1
sdpa_fp8 --set STAGES=3 --set QK_FP8_MMA=1 --problem Q_FP8=1
LIST
