#!/usr/bin/env bash
# Issue 17, thirty-first session: the checkpoint at half a generation in wall time on the GPU.
# The engines named in BINS (name=path; by default before = EVO_BASE, the bundle of 48e1730, and
# after = build-bundle/evo), each search
# without the compile cache and starting points, budget 100, seeds 1 and 2; the summary gives
# the wall time, and the candidate and seconds at which the run first came within 2 % of its own
# best (the helper of .device/s20/wall.sh).
set -u
TASKS=${TASKS:-"sdpa_hopper,2,8,2048,2048,128 sdpa_fp16,2,8,512,512,64"}
eval "$(sed -n '/^summary() {/,/^}/p' .device/s20/wall.sh)"  # summary DB
for task in $TASKS; do
  t=${task%%,*}; shape=${task#*,}
  for seed in 1 2; do
    for entry in ${BINS:-before=$EVO_BASE after=build-bundle/evo}; do
      which=${entry%%=*}; bin=${entry#*=}
      name=${t}_${seed}_$which
      db=$OUT/$name.db
      s=$(date +%s.%N)
      $bin run -t "$t" --shape "$shape" --budget 100 --seed $seed --no-starting-points \
        --no-cache --db "$db" --new --no-retime > "$OUT/$name.log" 2>&1
      rc=$?
      e=$(date +%s.%N)
      echo "$t $shape seed $seed $which: rc $rc, $(python3 -c "print(f'{$e - $s:.1f}')") s wall; $(summary "$db")"
      rm -f "$db"
    done
  done
done
