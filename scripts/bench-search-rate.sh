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
"$evo" run --elite 3 --budget "$budget" --seed 1 --db "$work/evo.db" \
  --cache-dir "$work/cache" "$@" 2>"$work/stderr" >"$work/stdout" || {
  cat "$work/stderr" >&2
  exit 1
}
end=$(date +%s.%N)

"$evo" show runs --db "$work/evo.db" --json >"$work/runs.json"
python3 - "$work/runs.json" "$start" "$end" "$(nproc)" <<'EOF'
import json, sys
runs = json.load(open(sys.argv[1]))
run = runs[0] if isinstance(runs, list) else runs["runs"][0]
wall = float(sys.argv[3]) - float(sys.argv[2])
done = run["evaluated"]
print(f"search rate: {done} candidates through the gates in {wall:.1f} s wall "
      f"(process start to exit, {sys.argv[4]} CPU cores): {60.0 * done / wall:.1f} per minute")
EOF
grep -E "stopped:" "$work/stderr" || true
grep -E "^ *[0-9]+ +[0-9]+ " "$work/stdout" | head -3 || true
