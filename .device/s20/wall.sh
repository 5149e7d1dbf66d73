#!/usr/bin/env bash
# Issue 17, twentieth session: what a search's generation size costs in wall time on the H100.
# Each search runs without the compile cache (every candidate compiled), without starting points,
# budget 100; the summary gives the run's wall time, the candidate (by position) and the seconds
# after the run's first candidate at which it first came within 2 % of its own best median.
set -u
summary() {
  python3 - "$1" <<'PY'
import sqlite3, sys, datetime
rows = sqlite3.connect(sys.argv[1]).execute(
    "SELECT created_at, finished_at, status, median_us FROM candidates WHERE state = 'finished' ORDER BY id").fetchall()
t = lambda s: datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
start = t(rows[0][0])
best = min(r[3] for r in rows if r[2] == "measured" and r[3] is not None)
n = next(i + 1 for i, r in enumerate(rows) if r[2] == "measured" and r[3] is not None and r[3] <= best * 1.02)
hit = next(r for r in rows if r[2] == "measured" and r[3] is not None and r[3] <= best * 1.02)
print(f"candidates {len(rows)}, best {best:.2f} us, within 2 % at candidate {n} after {t(hit[1]) - start:.1f} s, last finished after {t(rows[-1][1]) - start:.1f} s")
PY
}
for task in "sdpa_hopper 2,8,2048,2048,128" "sdpa_fp16 2,8,512,512,64"; do
  set -- $task
  for seed in 1 2; do
    for g in 16 4; do
      db=$OUT/${1}_${seed}_${g}.db
      s=$(date +%s.%N)
      build-bundle/evo run -t "$1" --shape "$2" --budget 100 --seed $seed --no-starting-points \
        --no-cache --db "$db" --new --generation-size $g > "$OUT/${1}_${seed}_${g}.log" 2>&1
      rc=$?
      e=$(date +%s.%N)
      echo "$1 $2 seed $seed generation $g: rc $rc, $(python3 -c "print(f'{$e - $s:.1f}')") s wall; $(summary "$db")"
    done
  done
done
