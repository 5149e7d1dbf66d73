#!/bin/bash
# usage: NAME=... [SEEDS=20 FIRST=1 RECS=...] [env switches] bash .device/s45/screen.sh -> .device/s45/out/$NAME.{txt,json}
cd /work/main
nice -n 5 scripts/search-bench.py --evo ${EVO:-build/evo} --methods evo --seeds ${SEEDS:-20} --first-seed ${FIRST:-1} --jobs ${JOBS:-2} \
  --json .device/s45/out/$NAME.json ${RECS:-tests/data/*.jsonl .device/holdout/*.jsonl.gz} > .device/s45/out/$NAME.txt 2>&1
echo done >> .device/s45/out/$NAME.txt
