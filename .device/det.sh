#!/usr/bin/env bash
# Which STREAM_K settings give different bits from call to call at 2,8,1400,1400,128.
set -u
E=build-bundle/evo
common="PERSISTENT=1 SPLITS=1 LAST_CTA_COMBINES=0 BLOCK_N=128 NUM_CONSUMERS=2"
python3 .device/fixed_template.py /tmp/det_a $common STREAM_K=0
python3 .device/fixed_template.py /tmp/det_b $common STREAM_K=1 TMA_STORE=0
python3 .device/fixed_template.py /tmp/det_c $common STREAM_K=1 PINGPONG=0 INTRA_OVERLAP=0
for v in a b c; do
  rm -rf /tmp/d.db* /tmp/pkg
  $E --templates /tmp/det_$v run --template sdpa_hopper --shape 2,8,1400,1400,128 --budget 3 --db /tmp/d.db --no-retime > $OUT/run_$v.txt 2>&1
  $E --templates /tmp/det_$v show elite --db /tmp/d.db 2>&1 | grep "^   1 " | sed 's/  */ /g' | cut -c1-300
  $E --templates /tmp/det_$v export --db /tmp/d.db --python /tmp/pkg > /dev/null 2>&1
  python3 .device/determinism.py 1400 2>&1 | tail -2
done
