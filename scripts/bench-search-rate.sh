#!/usr/bin/env bash
# Benchmark: candidates per minute through all three gates, on the GPU that is here.
# A fresh database and an empty compile cache, so every candidate is compiled, checked and timed;
# the figures are the run's own (evo run counts candidates that reached the gates).
#   scripts/bench-search-rate.sh [EVO] [BUDGET] [extra evo run options...]
set -euo pipefail
evo=${1:-./build/evo}
budget=${2:-100}
shift $(($# < 2 ? $# : 2))
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

start=$(date +%s.%N)
# The search's rate: without the elite's re-timing after it, which the wall time would include.
"$evo" run --elite 3 --budget "$budget" --seed 1 --db "$work/evo.db" \
  --cache-dir "$work/cache" --no-retime "$@" 2>"$work/stderr" >"$work/stdout" || {
  cat "$work/stderr" >&2
  exit 1
}
end=$(date +%s.%N)

python3 - "$work/evo.db" "$start" "$end" "$(nproc)" <<'EOF'
import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
statuses = dict(db.execute("SELECT status, COUNT(*) FROM candidates WHERE state = 'finished' "
                           "GROUP BY status").fetchall())
wall = float(sys.argv[3]) - float(sys.argv[2])
counted = sum(n for status, n in statuses.items() if status != "invalid")
# Past the compile gate: everything the GPU worker ran (correctness, then timing).
on_gpu = sum(n for status, n in statuses.items()
             if status not in ("invalid", "compile_error", "resource_reject"))
print(f"search rate: {counted} candidates in {wall:.1f} s wall (process start to exit, "
      f"{sys.argv[4]} CPU cores): {60.0 * counted / wall:.1f} per minute; {on_gpu} of them "
      f"through all three gates: {60.0 * on_gpu / wall:.1f} per minute")
print("statuses: " + ", ".join(f"{s} {n}" for s, n in sorted(statuses.items())))
EOF
grep -E "stopped:" "$work/stderr" || true
grep -E "^ *[0-9]+ +[0-9]+ " "$work/stdout" | head -3 || true
