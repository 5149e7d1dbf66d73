#!/usr/bin/env bash
# sdpa_hopper's tile epilogue, two changes tried as copies (trace_variant.py VARIANT a, b, ab):
# the clock64 trace of each (no events inside the loop), then each under ncu at locked clocks.
set -u
source .device/ncu_prof.sh
K="NUM_CONSUMERS=2 BLOCK_N=128 STAGES=2 FAST_EXP=1 PINGPONG=1 INTRA_OVERLAP=1 RESCALE_UNDER_QK=1 PERSISTENT=1 STREAM_K=1 TMA_STORE=1 PRODUCER_REGS=24 SPLITS=1 PACK_GQA=0 LAST_CTA_COMBINES=0"
shape=${SHAPE:-4,16,4096,128}
IFS=, read b h s d <<< "$shape"
for v in ref a b ab; do
  VARIANT=${v/ref/} LOOP_EVENTS=0 python3 .device/trace_variant.py /tmp/tr_$v $K > /dev/null
  VARIANT=${v/ref/}n LOOP_EVENTS=0 python3 .device/trace_variant.py /tmp/nt_$v $K > /dev/null
  rm -rf /tmp/t.db* /tmp/exp
  $E --templates /tmp/tr_$v run --template sdpa_hopper --shape $shape --budget 1 --db /tmp/t.db --no-retime > $OUT/run_$v.txt 2>&1
  id=$(python3 -c "import sqlite3;print(sqlite3.connect('/tmp/t.db').execute(\"select id from candidates where status='measured'\").fetchone()[0])")
  $E --templates /tmp/tr_$v export $id --db /tmp/t.db --out /tmp/exp > $OUT/export_$v.txt 2>&1
  python3 .device/trace_read.py /tmp/exp $b $h $s $d > $OUT/trace_$v.txt 2>&1
  echo "== $v"; tail -2 $OUT/trace_$v.txt
done
for v in ref a b ab ref; do prof $v /tmp/nt_$v $shape $K; done
