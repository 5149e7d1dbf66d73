#!/usr/bin/env bash
# Fortieth session (issue 15), device calls:
#   CALL=1 (bundle of 009d82e, LAGGED_MAX's bound at 2^14): the first half of the [gpu] tests
#           (.device/s39/gpu.sh PART=1), then what outlier keys cost LAGGED_MAX beside the peers
#           (.device/s39/next.sh PART=outliers);
#   CALL=2 (bundle with the rescale): the lagged-maxima tests, then the second half of the [gpu]
#           tests (.device/s40/gpu.sh);
#   CALL=3: compute-sanitizer racecheck and synccheck on LAGGED_MAX, then the outlier keys again
#           (.device/s39/next.sh PART=sanitizer, PART=outliers);
#   CALL=4: the nine short anchor rows in bf16 (fresh searches, bench-attention with the peers;
#           .device/s35/rows.sh).
set -u
case "${CALL:?}" in
  1)
    PART=1 bash .device/s39/gpu.sh
    PART=outliers timeout $((585 - SECONDS)) bash .device/s39/next.sh
    echo "call 1: $SECONDS s" ;;
  2)
    LIST=lagged bash .device/s40/gpu.sh
    LIST=part2 bash .device/s40/gpu.sh
    echo "call 2: $SECONDS s" ;;
  3)
    PART=sanitizer timeout 240 bash .device/s39/next.sh
    PART=outliers timeout $((585 - SECONDS)) bash .device/s39/next.sh
    echo "call 3: $SECONDS s" ;;
  4)
    rm -rf runs/work
    ROWS=short DTYPE=bf16 timeout 585 bash .device/s35/rows.sh > $OUT/short_bf16_console.txt 2>&1
    echo "short bf16 rc $? at $SECONDS s"; grep -E "^== |^ *[0-9]" $OUT/short_bf16_console.txt | cut -c1-200
    echo "call 4: $SECONDS s" ;;
esac
