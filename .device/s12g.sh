#!/usr/bin/env bash
# s12c's candidates 17 to 26, several 1.5 to 5 times slower than the elite at SM clocks of 1905
# to 2080 MHz, timed again from their stored knobs (most are split-KV: SPLITS 2 to 32).
set -u
E=build-bundle/evo
S=4,16,4096,128
python3 - > /tmp/cands.txt <<'P'
import sqlite3, json
db = sqlite3.connect('runs/b16/4x16x4096x128.db')
for i, g, m in db.execute("select id, genome, median_us from candidates where id between 17 and 26 and median_us is not null"):
    print(i, round(m, 2), ' '.join(f'--set {k}={v}' for k, v in json.loads(g).items()))
P
while read id old args; do
  $E bench --template sdpa_hopper --shape $S $args > $OUT/b.txt 2>&1
  echo "candidate $id (searched: $old us): $(grep -E '^timing|sm clock' $OUT/b.txt | sed 's/  */ /g' | tr '\n' ';')"
done < /tmp/cands.txt
