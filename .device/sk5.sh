#!/usr/bin/env bash
# An export of stream-K kernels (scratch sized by NUM_SMS) called from PyTorch: a search over a copy of
# sdpa_hopper whose STREAM_K and PERSISTENT are fixed at 1, its Python package, export-check.py.
set -u
E=build-bundle/evo
rm -rf /tmp/sk.db* /tmp/pkg
python3 .device/fixed_template.py /tmp/sk_only STREAM_K=1 PERSISTENT=1 SPLITS=1 LAST_CTA_COMBINES=0
for s in 2,8,1000,1000,128 1,4,3000,3000,64; do
  $E --templates /tmp/sk_only run --template sdpa_hopper --shape $s --budget 6 --db /tmp/sk.db --no-retime > $OUT/run_$(echo $s | tr , x).txt 2>&1
  tail -3 $OUT/run_$(echo $s | tr , x).txt
done
python3 .device/cands.py /tmp/sk.db | head -12
$E --templates /tmp/sk_only export --db /tmp/sk.db --python /tmp/pkg > $OUT/export.txt 2>&1; tail -3 $OUT/export.txt
grep -rn "NUM_SMS" /tmp/pkg | head -5
python3 scripts/export-check.py /tmp/pkg/evo_attention > $OUT/check.txt 2>&1; echo "export-check rc $?"; tail -25 $OUT/check.txt
