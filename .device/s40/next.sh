#!/usr/bin/env bash
# For the forty-first session (written in the fortieth, not yet run), issue 15:
#   PART=a: the lagged-maxima [gpu] tests again (their forced-path copies were refactored after
#           the fortieth session's run), the racecheck probe of STREAM_K's piece hand-over
#           (.device/s40/race.sh), and racecheck/synccheck on the two LAGGED_MAX settings the
#           fortieth session could not finish (a causal three-consumer one timed out at the
#           worker's 75 s deadline under racecheck; D=256 was not reached), with a long deadline;
#   PART=b: the nine short anchor rows in bf16 (fresh searches, bench-attention with the peers;
#           .device/s35/rows.sh), never run with LAGGED_MAX in the space.
set -u
E=build-bundle/evo
case "${PART:?}" in
  a)
    LIST=lagged bash .device/s40/gpu.sh
    timeout 220 bash .device/s40/race.sh
    while IFS='|' read problem knobs; do
      args=""; for kv in $knobs; do args="$args --set $kv"; done
      for tool in racecheck synccheck; do
        timeout $((580 - SECONDS)) compute-sanitizer --tool $tool $E bench --template sdpa_hopper \
          $problem $args --verify-only --deadline-ms 200000 < /dev/null > $OUT/san.txt 2>&1
        echo "$tool $problem $knobs: rc $? $(grep -E "SUMMARY|^verdict" $OUT/san.txt | tr '\n' ';' | cut -c1-240)"
        cat $OUT/san.txt >> $OUT/sanitizer_full.log
      done
    done <<'L'
--shape 1,2,300,600,256|LAGGED_MAX=1 NUM_CONSUMERS=1 PINGPONG=0 BLOCK_N=64 TMA_STORE=0
--shape 1,3,500,64 --causal|LAGGED_MAX=1 NUM_CONSUMERS=3 BLOCK_N=64 TMA_STORE=0
L
    echo "part a: $SECONDS s" ;;
  b)
    rm -rf runs/work
    ROWS=short DTYPE=bf16 timeout 585 bash .device/s35/rows.sh > $OUT/short_bf16_console.txt 2>&1
    echo "short bf16 rc $? at $SECONDS s"
    grep -E "^== |^ *[0-9]" $OUT/short_bf16_console.txt | cut -c1-200 ;;
esac
