#!/usr/bin/env bash
# A sweep timed on outlier inputs names the flag in its recording's header; its replay says so.
set -u
rec=$OUT/outliers.jsonl
timeout 200 build-bundle/evo sweep -t sdpa_hopper --shape 1,4,512,64 --limit 3 --time-on-outliers \
  --out $rec < /dev/null > $OUT/sweep.txt 2>&1
echo "sweep: rc $?"; tail -2 $OUT/sweep.txt | cut -c1-200
head -1 $rec | python3 -c "import sys,json; h=json.loads(sys.stdin.readline()); print(h['recorded_by']); print(h.get('evaluator'), h.get('identity', {}).get('evaluator') if isinstance(h.get('identity'), dict) else '')"
build-bundle/evo run --replay $rec --db $OUT/r.db --budget 3 < /dev/null 2>&1 | grep -E "replaying|stopped" | cut -c1-300
