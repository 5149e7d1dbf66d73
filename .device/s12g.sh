#!/usr/bin/env bash
# s12c's candidates 17 to 26, several 1.5 to 5 times slower than the elite at SM clocks of 1905
# to 2080 MHz, timed again from their stored knobs (most are split-KV: SPLITS 2 to 32).
set -u
source .device/ncu_prof.sh
S=4,16,4096,128
DB=runs/b16/4x16x4096x128.db
for id in $(seq 17 26); do
  # The candidate's knobs and its median as `evo show candidate` has them; none if it was not timed.
  read old knobs < <($E show candidate $id --db $DB --json | python3 -c "
import json, sys
c = json.load(sys.stdin)
median = c['outcome'].get('gpu', {}).get('timing', {}).get('median_us')
if median is not None:
    print(round(median, 2), ' '.join(f'{k}={v}' for k, v in c['genome'].items()))")
  [ -n "${old:-}" ] && bench "candidate $id (searched: $old us)" $S $knobs
done
