#!/bin/bash
# usage: NAME=... EVO=path [env vars] bash .device/s44/all.sh  -> .device/s44/out/$NAME.{txt,json}
cd /work/main
nice -n 5 scripts/search-bench.py --evo ${EVO:-build/evo} --methods evo --seeds ${SEEDS:-20} --first-seed ${FIRST:-1} --jobs 2 \
  --json .device/s44/out/$NAME.json ${RECS:-tests/data/*.jsonl .device/holdout/*.jsonl.gz} > .device/s44/out/$NAME.txt 2>&1
echo done >> .device/s44/out/$NAME.txt
