# Issue 15, thirty-fifth session: the four long anchor rows (DTYPE=fp16|bf16) with the
# re-timing's stricter cycles (aed8220), on the lent H200: fresh sdpa_hopper searches as users run them (the anchor
# table's time limits, .device/s24/list.txt), then bench-attention --no-search over their
# databases with the peers in the same process, and ncu on the 4,16,4096,128 pick. Output:
# $OUT/long_rows_DTYPE.log, $OUT/table_DTYPE.{txt,json}, $OUT/work_DTYPE.tgz (the session's
# fp16 call wrote long_rows.log).
set -u
D=${DTYPE:-fp16}
exec > >(tee $OUT/long_rows_$D.log) 2>&1
source .device/ncu_prof.sh
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw,power.limit --format=csv,noheader
mkdir -p runs/work
grep -E "^(4,16,4096|1,16,16384)" .device/s24/list.txt > runs/work/long.txt
DTYPE=$D LIST=runs/work/long.txt bash .device/s14/search.sh 2>&1 | cut -c1-240
timeout 400 python3 scripts/bench-attention.py --evo $E --template sdpa_hopper --no-search \
  --dtype $D --work runs/work --shapes 4,16,4096,128 4,16,4096,128,causal 4,16,4096,64 \
  1,16,16384,128 --json $OUT/table_$D.json > $OUT/table_$D.txt 2>&1
echo "== table rc $?"; cut -c1-330 $OUT/table_$D.txt
knobs=$(python3 -c "
import json
for row in json.load(open('$OUT/table_$D.json')):
    if row['shape'] == '4,16,4096,128' and not row['causal']:
        print(' '.join(f'{k}={v}' for k, v in sorted(row['evo_genome'].items())))")
[ "$D" = bf16 ] && export PROBLEM=BF16=1
prof "[pick]" "" 4,16,4096,128 $knobs
tar czf $OUT/work_$D.tgz runs/work/*.db runs/work/run_*.txt
