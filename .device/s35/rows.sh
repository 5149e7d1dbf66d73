# Issue 15, thirty-fifth session: sdpa_hopper's anchor rows with the re-timing's stricter cycles
# (aed8220), on the lent H200. ROWS=long (default: the four rows from 4,16,4096 on) or short (the
# other nine); DTYPE=fp16 (default) or bf16. Fresh searches as users run them
# (.device/s14/search.sh with .device/s24/list.txt's time limits), then bench-attention
# --no-search over their databases with the peers in the same process; for the long rows, ncu on
# the 4,16,4096,128 pick. Output: $OUT/ROWS_rows_DTYPE.log, $OUT/table[_short]_DTYPE.{txt,json},
# $OUT/work[_short]_DTYPE.tgz. The session's three calls (long fp16, long bf16, short fp16) ran
# this as two scripts, whose logs are named long_rows.log, long_rows_bf16.log and short_rows.log.
set -u
rows=${ROWS:-long}
D=${DTYPE:-fp16}
tag=""; [ "$rows" = short ] && tag=_short
exec > >(tee $OUT/${rows}_rows_$D.log) 2>&1
source .device/ncu_prof.sh
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw,power.limit --format=csv,noheader
mkdir -p runs/work
long_shapes="^(4,16,4096|1,16,16384)"
if [ "$rows" = long ]; then grep -E "$long_shapes" .device/s24/list.txt
else grep -vE "$long_shapes" .device/s24/list.txt; fi > runs/work/rows.txt
DTYPE=$D LIST=runs/work/rows.txt bash .device/s14/search.sh 2>&1 | cut -c1-240
# bench-attention's names for the list's lines ("SHAPE causal|- LIMIT").
shapes=$(awk '{print $1 ($2 == "causal" ? ",causal" : "")}' runs/work/rows.txt)
timeout 400 python3 scripts/bench-attention.py --evo $E --template sdpa_hopper --no-search \
  --dtype $D --work runs/work --shapes $shapes --json $OUT/table${tag}_$D.json \
  > $OUT/table${tag}_$D.txt 2>&1
echo "== table rc $?"; cut -c1-330 $OUT/table${tag}_$D.txt
if [ "$rows" = long ]; then
  knobs=$(python3 -c "
import json
for row in json.load(open('$OUT/table_$D.json')):
    if row['shape'] == '4,16,4096,128' and not row['causal']:
        print(' '.join(f'{k}={v}' for k, v in sorted(row['evo_genome'].items())))")
  [ "$D" = bf16 ] && export PROBLEM=BF16=1
  prof "[pick]" "" 4,16,4096,128 $knobs
fi
tar czf $OUT/work${tag}_$D.tgz runs/work/*.db runs/work/run_*.txt
