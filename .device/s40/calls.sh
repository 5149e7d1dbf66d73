#!/usr/bin/env bash
# Fortieth session (issue 15), three device calls over the bundle built with LAGGED_MAX's bound
# at 2^14 (was 256):
#   CALL=1: the first half of the [gpu] tests (.device/s39/gpu.sh PART=1), then what outlier keys
#           cost LAGGED_MAX beside the peers (.device/s39/next.sh PART=outliers);
#   CALL=2: the second half of the [gpu] tests, then compute-sanitizer racecheck and synccheck on
#           LAGGED_MAX (.device/s39/next.sh PART=sanitizer) in what is left of the call;
#   CALL=3: the nine short anchor rows in bf16 (fresh searches, bench-attention with the peers;
#           .device/s35/rows.sh).
set -u
case "${CALL:?}" in
  1)
    PART=1 bash .device/s39/gpu.sh
    PART=outliers timeout $((585 - SECONDS)) bash .device/s39/next.sh
    echo "call 1: $SECONDS s" ;;
  2)
    PART=2 bash .device/s39/gpu.sh
    PART=sanitizer timeout $((585 - SECONDS)) bash .device/s39/next.sh
    echo "call 2: $SECONDS s" ;;
  3)
    rm -rf runs/work
    ROWS=short DTYPE=bf16 timeout 585 bash .device/s35/rows.sh > $OUT/short_bf16_console.txt 2>&1
    echo "short bf16 rc $? at $SECONDS s"; grep -E "^== |^ *[0-9]" $OUT/short_bf16_console.txt | cut -c1-200
    echo "call 3: $SECONDS s" ;;
esac
