#!/usr/bin/env bash
# Issue 15, thirty-sixth session: sdpa_hopper on prefill shapes the project has never measured
# (D=256, grouped heads, S_q != S_kv, long causal D=64), fresh searches as a user runs them
# (elite 3, budget 64, TL per shape) beside flash, cuDNN and FlexAttention in one process.
# SHAPES and DTYPE override the defaults. Output: $OUT/unseen_DTYPE.{log,json}.
set -u
E=build-bundle/evo
D=${DTYPE:-fp16}
exec > >(tee $OUT/unseen_$D.log) 2>&1
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw,power.limit --format=csv,noheader
timeout 580 python3 scripts/bench-attention.py --evo $E --template sdpa_hopper --budget 64 \
  --time-limit ${TL:-40s} --dtype $D --work runs/unseen --json $OUT/unseen_$D.json \
  --shapes ${SHAPES:-2,16,4096,256 2,16,4096,256,causal 4,32:8,2048,128 3,12,1500,1300,128,causal 2,16,8192,64,causal 16,16,640,128}
echo "== rc $?"
tar czf $OUT/unseen_work_$D.tgz runs/unseen/*.db 2>/dev/null
