#!/usr/bin/env bash
# Where the cycles of a tile go in sdpa_hopper's persistent elite (PINGPONG, RESCALE_UNDER_QK):
# clock64() per event from trace_variant.py's copy, read back from an export by trace_read.py.
set -u
E=build-bundle/evo
K="NUM_CONSUMERS=2 BLOCK_N=128 STAGES=2 FAST_EXP=1 PINGPONG=1 INTRA_OVERLAP=1 RESCALE_UNDER_QK=1 PERSISTENT=1 STREAM_K=1 TMA_STORE=1 PRODUCER_REGS=24 SPLITS=1 PACK_GQA=0 LAST_CTA_COMBINES=0"
python3 .device/trace_variant.py /tmp/tr $K $(echo ${EXTRA:-} | tr = _)
for shape in ${SHAPES:-4,16,4096,128 1,16,16384,128}; do
  tag=$(echo $shape | tr , x)
  rm -rf /tmp/t.db* /tmp/exp
  $E --templates /tmp/tr run --template sdpa_hopper --shape $shape --budget 1 --db /tmp/t.db --no-retime > $OUT/run_${tag}$(echo ${EXTRA:-} | tr = _).txt 2>&1
  id=$(python3 -c "import sqlite3;print(sqlite3.connect('/tmp/t.db').execute(\"select id from candidates where status='measured'\").fetchone()[0])")
  $E --templates /tmp/tr export $id --db /tmp/t.db --out /tmp/exp > $OUT/export_${tag}$(echo ${EXTRA:-} | tr = _).txt 2>&1
  IFS=, read b h s d <<< "$shape"
  echo "== $shape"; python3 .device/trace_read.py /tmp/exp $b $h $s $d > $OUT/trace_${tag}$(echo ${EXTRA:-} | tr = _).txt 2>&1; echo rc $?
  tail -3 $OUT/trace_${tag}$(echo ${EXTRA:-} | tr = _).txt
done
