#!/usr/bin/env bash
# Forty-first session, issue 15. The Q tile's release (q_empty) now has every consumer lane
# arrive, for racecheck (s40: 12 hazards on STREAM_K's piece descriptors with __syncwarp and
# lane 0's arrive).
#   PART=a: racecheck/synccheck on the s40 STREAM_K setting, then every sdpa_hopper [gpu] test.
#   PART=b: the nine short anchor rows in bf16 (never run with LAGGED_MAX in the space), then
#           racecheck/synccheck on D=256 and a causal three-consumer setting.
set -u
case "${PART:?}" in
  a)
    UNTIL=200 bash .device/s41/sanitize.sh <<'L'
--shape 1,2,700,128 --problem BF16=1|BLOCK_N=160 STREAM_K=1 PERSISTENT=1 LAGGED_MAX=1
--shape 1,2,700,128|BLOCK_N=128 STREAM_K=1 PERSISTENT=1 LAGGED_MAX=0 NUM_CONSUMERS=2
L
    LIMIT=$((585 - SECONDS)) LIST=hopper bash .device/s41/gpu.sh
    echo "part a: $SECONDS s" ;;
  b)
    rm -rf runs/work
    ROWS=short DTYPE=bf16 E=build-bundle/evo timeout 400 bash .device/s35/rows.sh > $OUT/short_bf16_console.txt 2>&1
    echo "short bf16 rc $? at $SECONDS s"
    grep -E "^== |^ *[0-9]" $OUT/short_bf16_console.txt | cut -c1-200
    UNTIL=585 bash .device/s41/sanitize.sh <<'L'
--shape 1,2,300,600,256|LAGGED_MAX=1 NUM_CONSUMERS=1 PINGPONG=0 BLOCK_N=64 TMA_STORE=0
--shape 1,3,500,64 --causal|LAGGED_MAX=1 NUM_CONSUMERS=3 BLOCK_N=64 TMA_STORE=0
L
    echo "part b: $SECONDS s" ;;
esac
