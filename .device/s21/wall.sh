#!/usr/bin/env bash
# Issue 17, twenty-first session: what compiling ahead saves in wall time on the H100. Each
# search runs without the compile cache, without starting points, budget 100, seeds 1 and 2:
# generations of 16 without and with compiles ahead, and generations of 4 with them. The summary
# gives the wall time, and the candidate and seconds at which the run first came within 2 % of its
# own best (the helper of .device/s20/wall.sh).
set -u
TASKS=${TASKS:-"sdpa_hopper,2,8,2048,2048,128 sdpa_fp16,2,8,512,512,64"}
eval "$(sed -n '/^summary() {/,/^}/p' .device/s20/wall.sh)"  # summary DB
for task in $TASKS; do
  t=${task%%,*}; shape=${task#*,}
  for seed in 1 2; do
    for cfg in "16 --no-compile-ahead" "16" "4"; do
      set -- $cfg
      name=${t}_${seed}_$1${2:+_noahead}
      db=$OUT/$name.db
      s=$(date +%s.%N)
      build-bundle/evo run -t "$t" --shape "$shape" --budget 100 --seed $seed --no-starting-points \
        --no-cache --db "$db" --new --no-retime --generation-size $cfg > "$OUT/$name.log" 2>&1
      rc=$?
      e=$(date +%s.%N)
      echo "$t $shape seed $seed generation $cfg: rc $rc, $(python3 -c "print(f'{$e - $s:.1f}')") s wall; $(summary "$db")"
    done
  done
done
