#!/usr/bin/env bash
# The fp16 and bf16 tables over the databases of search.sh (brought back into
# .device/s14/work), each one bench-attention process with the peers; then ncu of the fp16 best
# at 4,16,4096,128 (locked clocks) beside cuDNN's kernel, and the elites' ptxas figures.
set -u
source .device/ncu_prof.sh
mkdir -p runs/work && cp .device/s14/work/*.db runs/work/
for dtype in ${DTYPES:-fp16 bf16}; do
  timeout 280 python3 scripts/bench-attention.py --evo $E --template sdpa_hopper --no-search \
    --dtype $dtype --work runs/work --json $OUT/table_$dtype.json > $OUT/table_$dtype.txt 2>&1
  echo "== table $dtype rc $?"; cat $OUT/table_$dtype.txt | cut -c1-400
done
knobs=$(python3 -c "
import json
for row in json.load(open('$OUT/table_fp16.json')):
    if row['shape'] == '4,16,4096,128' and not row['causal']:
        print(' '.join(f'{k}={v}' for k, v in sorted(row['evo_genome'].items())))")
prof "[table's fp16 best]" "" 4,16,4096,128 $knobs
timeout 120 ncu --metrics $M -k regex:cudnn --launch-skip 1 -c 1 python3 scripts/attention-once.py \
  --peer cudnn --shape 4,16,4096,128 > $OUT/ncu_cudnn.txt 2>&1
echo "[cuDNN] $(grep -E 'pct_of_peak|duration|per_second' $OUT/ncu_cudnn.txt | sed 's/  */ /g' | tr '\n' ';')"
