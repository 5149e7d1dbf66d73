#!/usr/bin/env bash
# With the listed search space (planning 0.2 s a generation instead of 15-29 s): fresh fp16
# searches of the 13 anchor shapes with shorter time limits than search.sh, then the fp16 table
# over them in one bench-attention process, then how long each run planned between generations
# (search.sh tars the databases into $OUT/work_fp16.tgz).
set -u
E=build-bundle/evo
mkdir -p runs/work
cat > runs/work/short_limits.txt <<'LIST'
1,8,512,64 - 14
1,8,512,64 causal 14
2,8,512,64 - 14
2,8,512,64 causal 14
2,8,2048,64 - 14
2,8,2048,64 causal 14
2,8,2048,128 - 16
2,8,2048,128 causal 16
8,16,1024,64 - 14
4,16,4096,128 - 70
4,16,4096,128 causal 40
4,16,4096,64 - 40
1,16,16384,128 - 80
LIST
DTYPE=fp16 LIST=runs/work/short_limits.txt bash .device/s14/search.sh | grep '^=='
timeout 200 python3 scripts/bench-attention.py --evo $E --template sdpa_hopper --no-search \
  --dtype fp16 --work runs/work --json $OUT/table_fp16.json > $OUT/table_fp16.txt 2>&1
echo "== table fp16 rc $?"; grep -v "^  " $OUT/table_fp16.txt | cut -c1-330
python3 - <<'PY'
import datetime, glob, sqlite3
def t(s): return datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
for db in sorted(glob.glob("runs/work/*.db")):
    c = sqlite3.connect(db)
    rows = c.execute("select generation, min(created_at), max(finished_at) from candidates group by generation order by generation").fetchall()
    gaps = [t(rows[i][1]) - t(rows[i - 1][2]) for i in range(1, len(rows)) if rows[i - 1][2]]
    n = c.execute("select count(*) from candidates where state='finished'").fetchone()[0]
    print(db, f"{n} finished, {len(rows)} generations, planning gaps (s):", " ".join(f"{g:.1f}" for g in gaps))
PY
