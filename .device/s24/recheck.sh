#!/usr/bin/env bash
# After the ranking went back to time (cycles only choosing extra contenders): fresh searches of
# the four shapes where ranking by cycles had cost time, fp16 and bf16, then their tables with
# the peers, and ncu on the fp16 pick at 4,16,4096,128.
set -u
source .device/ncu_prof.sh
cat > runs/list4.txt <<'EOF2'
8,16,1024,64 - 30
4,16,4096,128 - 60
4,16,4096,128 causal 50
1,16,16384,128 - 100
EOF2
mkdir -p runs
for dtype in fp16 bf16; do
  DTYPE=$dtype LIST=runs/list4.txt bash .device/s14/search.sh 2>&1 | grep -E "^==|^   [123] " | cut -c1-200
done
for dtype in fp16 bf16; do
  timeout 200 python3 scripts/bench-attention.py --evo $E --template sdpa_hopper --no-search \
    --dtype $dtype --work runs/work --shapes 8,16,1024,64 4,16,4096,128 4,16,4096,128,causal 1,16,16384,128 \
    --json $OUT/table4_$dtype.json > $OUT/table4_$dtype.txt 2>&1
  echo "== table $dtype rc $?"; grep -vE "^  [0-9]" $OUT/table4_$dtype.txt | cut -c1-330
done
knobs=$(python3 -c "
import json
for row in json.load(open('$OUT/table4_fp16.json')):
    if row['shape'] == '4,16,4096,128' and not row['causal']:
        print(' '.join(f'{k}={v}' for k, v in sorted(row['evo_genome'].items())))")
prof "[table's fp16 best]" "" 4,16,4096,128 $knobs
