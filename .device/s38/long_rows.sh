#!/usr/bin/env bash
# Issue 15, thirty-eighth session: the four long anchor rows with fresh searches as users run
# them, now that the space holds CLUSTER_M (the thirty-seventh session left this undone), in
# DTYPE=fp16|bf16; the thirty-fifth session's rows.sh (searches, bench-attention --no-search with
# the peers in the same process, ncu on the 4,16,4096,128 pick), then how many of each search's
# candidates and elites had CLUSTER_M=2.
set -u
D=${DTYPE:-fp16}
ROWS=long DTYPE=$D bash .device/s35/rows.sh
for db in runs/work/*.db; do
  python3 - "$db" <<'PY'
import json, sqlite3, sys
con = sqlite3.connect(sys.argv[1])
rows = con.execute("select genome from candidates").fetchall() if con.execute(
    "select count(*) from sqlite_master where name='candidates'").fetchone()[0] else []
n = len(rows); c2 = sum(1 for (g,) in rows if json.loads(g).get("CLUSTER_M") == 2)
print(f"{sys.argv[1]}: {n} candidates, {c2} with CLUSTER_M=2")
PY
  build-bundle/evo show elite --db $db 2>&1 | sed -n 2,5p | cut -c1-260
done 2>&1 | tee $OUT/cluster_share_$D.txt
