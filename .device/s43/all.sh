#!/bin/bash
# usage: NAME=... [env vars] bash .device/s43/all.sh  -> .device/s43/out/$NAME.{txt,json}
cd /work/main
nice -n 5 scripts/search-bench.py --evo build/evo --methods evo --seeds ${SEEDS:-20} --first-seed ${FIRST:-1} --jobs 2 \
  --json .device/s43/out/$NAME.json tests/data/*.jsonl .device/holdout/*.jsonl.gz > .device/s43/out/$NAME.txt 2>&1
echo done >> .device/s43/out/$NAME.txt
