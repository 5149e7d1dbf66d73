#!/usr/bin/env bash
# A fresh search at one long shape (fp16 unless BF16=1), as a user runs it, then ncu at locked
# clocks on each member of its elite: is the best kernel's tensor pipe 80 % active?
# Usage: s12c.sh SHAPE BUDGET TIME_LIMIT
set -u
source .device/ncu_prof.sh
shape=$1; budget=$2; limit=$3
name=$(echo $shape | tr , x)${BF16:+_bf16}
mkdir -p runs/b16
db=runs/b16/$name.db
$E run --template sdpa_hopper --shape $shape ${BF16:+--problem BF16=1} --elite 3 --budget $budget \
  --time-limit $limit --db $db > $OUT/run_$name.txt 2>&1
tail -12 $OUT/run_$name.txt
$E show elite --db $db 2>&1 | head -12
cp $db $OUT/
i=0
$E show elite --db $db --json | python3 -c "
import json, sys
for member in json.load(sys.stdin)['elite']:
    print(' '.join(f'{k}={v}' for k, v in sorted(member['genome'].items())))" |
while read knobs; do
  i=$((i + 1))
  PROBLEM=${BF16:+BF16=1} prof "[elite #$i]" "" $shape $knobs
done
