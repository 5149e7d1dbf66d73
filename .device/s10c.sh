#!/usr/bin/env bash
# Where sdpa_hopper's warps stall, per SASS instruction: ncu's source counters (warp-state
# sampling) over one launch of the persistent elite at 4,16,4096,128, the hottest instructions
# printed with their stall reasons, and the loop's SASS around them.
set -u
source .device/trace_tile.sh
K=$ELITE
args=""; for s in $K; do args="$args --set $s"; done
timeout 300 ncu --target-processes all --section SourceCounters --section WarpStateStats -k regex:sdpa_hopper_fwd --launch-skip 30 -c 1 \
  -o /tmp/src --force-overwrite $E bench --template sdpa_hopper --shape 4,16,4096,128 $args > $OUT/ncu_run.txt 2>&1
echo "ncu rc $?"
ncu --import /tmp/src.ncu-rep --page source --print-source sass --csv > $OUT/source.csv 2> $OUT/source.err
echo "csv rc $? $(wc -l < $OUT/source.csv) lines"
ncu --import /tmp/src.ncu-rep --page details --section WarpStateStats > $OUT/warpstate.txt 2>&1
python3 - <<'PY'
import csv, os
out = os.environ["OUT"]
rows = list(csv.reader(open(f"{out}/source.csv")))
head = rows[0]; print(head[:40])
PY
gzip -k $OUT/source.csv
