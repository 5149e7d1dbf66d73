#!/usr/bin/env bash
# Issue 16: decode and chunked-prefill shapes the project has never measured, fresh searches of
# both templates beside flash, cuDNN and FlexAttention in one process (as the decode table).
set -u
E=${EVO:-build-bundle/evo}
python3 scripts/bench-attention.py --evo $E --template sdpa_hopper sdpa_fp16 --budget 200 \
  --time-limit ${TL:-35s} --dtype ${DTYPE:-fp16} --shapes ${SHAPES:-4,32:8,1,16384,128 32,32:8,1,2048,128 2,64:8,4,32768,128 4,32:4,8,8192,128 1,32:8,1,65536,128}
