#!/usr/bin/env bash
# compute-sanitizer racecheck and synccheck on `evo bench --verify-only` (the gates' checks) of
# the sdpa_hopper settings read from stdin as "PROBLEM ARGS|KNOBS", each tool run until $UNTIL
# seconds into the call at most. Full output appended to $OUT/sanitizer_full.log.
set -u
E=build-bundle/evo
while IFS='|' read problem knobs; do
  args=""; for kv in $knobs; do args="$args --set $kv"; done
  for tool in racecheck synccheck; do
    left=$(( ${UNTIL:?} - SECONDS )); [ $left -lt 30 ] && { echo "skipped $tool $problem $knobs"; continue; }
    timeout $left compute-sanitizer --tool $tool $E bench --template sdpa_hopper \
      $problem $args --verify-only --deadline-ms 200000 < /dev/null > $OUT/san.txt 2>&1
    echo "$tool $problem $knobs: rc $? $(grep -E "SUMMARY|^verdict" $OUT/san.txt | tr '\n' ';' | cut -c1-240) ($SECONDS s)"
    cat $OUT/san.txt >> $OUT/sanitizer_full.log
  done
done
