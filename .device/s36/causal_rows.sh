#!/usr/bin/env bash
# Issue 15, thirty-sixth session: fresh sdpa_hopper searches as users run them (starting points
# on, elite 3, budget 64, TL each) of causal shapes with CAUSAL_PAIRS in the space, beside flash,
# cuDNN and FlexAttention in one process: the anchor rows 4,16,4096,128, 2,8,2048,128 and
# 2,8,2048,64 causal and the unseen 2,16,4096,256 causal in fp16, then 4,16,4096,128 causal in
# bf16. Output: $OUT/causal_DTYPE.{log,json}, $OUT/causal_work.tgz.
set -u
E=build-bundle/evo
for D in fp16 bf16; do
  shapes="4,16,4096,128,causal 2,16,4096,256,causal 2,8,2048,128,causal 2,8,2048,64,causal"
  [ $D = bf16 ] && shapes="4,16,4096,128,causal"
  timeout 500 python3 scripts/bench-attention.py --evo $E --template sdpa_hopper --budget 64 \
    --time-limit ${TL:-45s} --dtype $D --work runs/causal --json $OUT/causal_$D.json \
    --shapes $shapes > $OUT/causal_$D.log 2>&1
  echo "== $D rc $?"; cut -c1-420 $OUT/causal_$D.log | grep -v "^  [0-9]"
done
tar czf $OUT/causal_work.tgz runs/causal/*.db
