#!/bin/bash
# Issue 17, forty-third session: the recordings whose within-2 % set changes when configurations
# are judged by the mean of their timings, replayed again (evo and random, then TPE).
cd /work/main
R="tests/data/sdpa_fp16_h100_1x16x4096x128.jsonl tests/data/sdpa_hopper_h100_2x8x2048x128.jsonl
 .device/holdout/holdout_fp16_16x32x1x4096x128.jsonl.gz .device/holdout/holdout_fp8_8x16x1024x64_qfp8.jsonl.gz
 .device/holdout/holdout_hopper_2x32kv8x1x16384x128.jsonl.gz .device/holdout/holdout_hopper_4x16x4096x64.jsonl.gz
 .device/holdout/holdout_hopper_bf16_2x16x2048x128_causal.jsonl.gz .device/holdout/holdout_hopper_bf16_2x16x4096x128.jsonl.gz"
nice -n 5 scripts/search-bench.py --evo build/evo --methods evo random --seeds 20 --jobs 2 \
  --json .device/s43/out/judged_evo_random.json $R > .device/s43/out/judged_evo_random.txt 2>&1
echo done >> .device/s43/out/judged_evo_random.txt
nice -n 5 /usr/bin/python3 scripts/search-bench.py --methods tpe --seeds 20 --jobs 2 \
  --json .device/s43/out/judged_tpe.json $R > .device/s43/out/judged_tpe.txt 2>&1
echo done >> .device/s43/out/judged_tpe.txt
