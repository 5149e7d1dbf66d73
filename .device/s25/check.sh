#!/usr/bin/env bash
# Issue 15, twenty-fifth session: the elite chosen place by place, cycles deciding where the
# re-timing cannot tell time apart. Fresh fp16 searches of the four shapes that decide issue 15's
# targets, their re-timings round by round, the table with the peers, and ncu on the picks.
set -u
source .device/ncu_prof.sh
mkdir -p runs
cat > runs/list4.txt <<'EOF2'
8,16,1024,64 - 30
4,16,4096,128 - 60
4,16,4096,128 causal 50
1,16,16384,128 - 100
EOF2
DTYPE=fp16 LIST=runs/list4.txt bash .device/s14/search.sh 2>&1 | cut -c1-240
python3 .device/s25/retimings.py runs/work/8x16x1024x64.db runs/work/4x16x4096x128.db \
  runs/work/4x16x4096x128_causal.db runs/work/1x16x16384x128.db
timeout 200 python3 scripts/bench-attention.py --evo $E --template sdpa_hopper --no-search \
  --dtype fp16 --work runs/work --shapes 8,16,1024,64 4,16,4096,128 4,16,4096,128,causal 1,16,16384,128 \
  --json $OUT/table4_fp16.json > $OUT/table4_fp16.txt 2>&1
echo "== table fp16 rc $?"; grep -vE "^  [0-9]" $OUT/table4_fp16.txt | cut -c1-330
for shape in 4,16,4096,128 1,16,16384,128; do
  knobs=$(python3 -c "
import json
for row in json.load(open('$OUT/table4_fp16.json')):
    if row['shape'] == '$shape' and not row['causal']:
        print(' '.join(f'{k}={v}' for k, v in sorted(row['evo_genome'].items())))")
  prof "[pick]" "" $shape $knobs
done
