#!/usr/bin/env bash
# Issue 15, thirty-ninth session: the four long anchor rows with LAGGED_MAX in the space (fresh
# searches, bench-attention with the peers, ncu on the 4,16,4096,128 pick; .device/s35/rows.sh),
# fp16 then bf16 in what is left of the call; then how many candidates and elites had
# LAGGED_MAX=1.
set -u
share() {
  for db in runs/work/*.db; do
    python3 - "$db" <<'PY'
import json, sqlite3, sys
con = sqlite3.connect(sys.argv[1])
rows = con.execute("select genome from candidates").fetchall()
n = len(rows); lag = sum(1 for (g,) in rows if json.loads(g).get("LAGGED_MAX") == 1)
print(f"{sys.argv[1]}: {n} candidates, {lag} with LAGGED_MAX=1")
PY
    build-bundle/evo show elite --db $db 2>&1 | sed -n 2,5p | cut -c1-300
  done
}
rm -rf runs/work
ROWS=long DTYPE=fp16 bash .device/s35/rows.sh > $OUT/long_fp16_console.txt 2>&1
echo "long fp16 rc $? at $SECONDS s"
share > $OUT/lagged_share_fp16.txt 2>&1
rm -rf runs/work
ROWS=long DTYPE=bf16 timeout $((575 - SECONDS)) bash .device/s35/rows.sh > $OUT/long_bf16_console.txt 2>&1
echo "long bf16 rc $? at $SECONDS s"
share > $OUT/lagged_share_bf16.txt 2>&1
