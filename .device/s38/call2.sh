#!/usr/bin/env bash
# Thirty-eighth session, second call: the long rows in bf16, then the nine short rows in fp16
# (both through .device/s35/rows.sh: fresh searches, then bench-attention with the peers).
set -u
rm -rf runs/work; DTYPE=bf16 bash .device/s38/long_rows.sh > $OUT/long_bf16_console.txt 2>&1
echo "long bf16 rc $? at $SECONDS s"
rm -f runs/work/*.db runs/work/run_*.txt
ROWS=short DTYPE=${SHORT_DTYPE:-fp16} timeout $((570 - SECONDS)) bash .device/s35/rows.sh > $OUT/short_console.txt 2>&1
echo "short rc $? at $SECONDS s"
