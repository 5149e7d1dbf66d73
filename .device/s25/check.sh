#!/usr/bin/env bash
# Issue 15, twenty-fifth session (DTYPE=fp16|bf16, fp16 by default): the elite chosen place by place, cycles deciding where the
# re-timing cannot tell time apart. Fresh searches of the four shapes that decide issue 15's
# targets, their re-timings round by round, the table with the peers, and ncu on the picks.
set -u
D=${DTYPE:-fp16}; sfx=""; [ "$D" = bf16 ] && { sfx=_bf16; export PROBLEM=BF16=1; }
source .device/ncu_prof.sh
mkdir -p runs
cat > runs/list4.txt <<'EOF2'
8,16,1024,64 - 30
4,16,4096,128 - 60
4,16,4096,128 causal 50
1,16,16384,128 - 100
EOF2
DTYPE=$D LIST=runs/list4.txt bash .device/s14/search.sh 2>&1 | cut -c1-240
python3 .device/s25/retimings.py runs/work/8x16x1024x64$sfx.db runs/work/4x16x4096x128$sfx.db \
  runs/work/4x16x4096x128_causal$sfx.db runs/work/1x16x16384x128$sfx.db
timeout 200 python3 scripts/bench-attention.py --evo $E --template sdpa_hopper --no-search \
  --dtype $D --work runs/work --shapes 8,16,1024,64 4,16,4096,128 4,16,4096,128,causal 1,16,16384,128 \
  --json $OUT/table4_$D.json > $OUT/table4_$D.txt 2>&1
echo "== table $D rc $?"; grep -vE "^  [0-9]" $OUT/table4_$D.txt | cut -c1-330
for shape in 4,16,4096,128 1,16,16384,128; do
  knobs=$(python3 -c "
import json
for row in json.load(open('$OUT/table4_$D.json')):
    if row['shape'] == '$shape' and not row['causal']:
        print(' '.join(f'{k}={v}' for k, v in sorted(row['evo_genome'].items())))")
  prof "[pick]" "" $shape $knobs
done
