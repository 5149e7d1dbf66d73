#!/usr/bin/env bash
# Issue 15, twenty-sixth session: the full 13-row anchor table in one dtype (DTYPE=fp16|bf16),
# as the twenty-fifth session left it to do: fresh sdpa_hopper searches as a user runs them
# (elite 3, re-timed side by side, cycles breaking ties the re-timing cannot tell apart), then
# bench-attention --no-search over their databases with the peers in the same process; with
# fp16 also ncu on the pick at 4,16,4096,128 beside cuDNN's kernel.
set -u
D=${DTYPE:-fp16}
source .device/ncu_prof.sh
nvidia-smi --query-gpu=name,serial,clocks.sm,temperature.gpu,power.draw,power.limit --format=csv,noheader
DTYPE=$D LIST=.device/s24/list.txt bash .device/s14/search.sh 2>&1 | cut -c1-240
timeout 300 python3 scripts/bench-attention.py --evo $E --template sdpa_hopper --no-search \
  --dtype $D --work runs/work --json $OUT/table_$D.json > $OUT/table_$D.txt 2>&1
echo "== table $D rc $?"; cut -c1-330 $OUT/table_$D.txt
if [ "$D" = fp16 ] && [ -z "${NO_NCU:-}" ]; then
  knobs=$(python3 -c "
import json
for row in json.load(open('$OUT/table_$D.json')):
    if row['shape'] == '4,16,4096,128' and not row['causal']:
        print(' '.join(f'{k}={v}' for k, v in sorted(row['evo_genome'].items())))")
  prof "[pick]" "" 4,16,4096,128 $knobs
  timeout 120 ncu --metrics $M -k regex:cudnn --launch-skip 1 -c 1 python3 scripts/attention-once.py \
    --peer cudnn --shape 4,16,4096,128 > $OUT/ncu_cudnn.txt 2>&1
  echo "[cuDNN] $(grep -E 'pct_of_peak|duration|per_second' $OUT/ncu_cudnn.txt | sed 's/  */ /g' | tr '\n' ';')"
fi
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader
