#!/usr/bin/env bash
# A fresh search at 4,16,4096,128 fp16 with SOFTMAX_WARP_SYNC in the space, as a user runs it
# (starting points on, the elite re-timed side by side), then ncu at locked clocks on each member
# of its elite and on cuDNN's kernel.
set -u
source .device/ncu_prof.sh
shape=4,16,4096,128; db=/tmp/s23_4x16x4096x128.db
rm -f $db*
$E run --template sdpa_hopper --shape $shape --elite 3 --budget ${BUDGET:-64} --time-limit ${LIMIT:-100s} \
  --db $db > $OUT/run.txt 2>&1
tail -12 $OUT/run.txt
$E show elite --db $db 2>&1 | head -12
cp $db $OUT/
i=0
$E show elite --db $db --json | python3 -c "
import json, sys
for member in json.load(sys.stdin)['elite']:
    print(' '.join(f'{k}={v}' for k, v in sorted(member['genome'].items())))" |
while read knobs; do
  i=$((i + 1))
  prof "[elite #$i]" "" $shape $knobs
done
timeout 150 ncu --target-processes all --metrics $M -k regex:cudnn --launch-skip 1 -c 1 \
  python3 scripts/attention-once.py --peer cudnn --shape $shape > $OUT/ncu_cudnn.txt 2>&1
echo "[cuDNN] $(grep -E "pct_of_peak|duration|per_second" $OUT/ncu_cudnn.txt | sed 's/  */ /g' | tr '\n' ';')"
