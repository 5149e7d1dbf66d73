#!/usr/bin/env bash
# Fresh sdpa_hopper searches of the 13 anchor shapes, as a user runs them (starting points on,
# elite 3, re-timed at the end), in one dtype: DTYPE=fp16|bf16. Databases and run logs go to
# runs/work (tarred into $OUT/work_DTYPE.tgz) under bench-attention's names, so that
# `bench-attention.py --no-search --work` reads them.
# Long shapes get more time: a candidate there costs seconds. LIST=FILE gives other lines of
# "SHAPE causal|- TIME_LIMIT_S"; without it, the list below.
set -u
E=build-bundle/evo
dtype=${DTYPE:-fp16}
suffix=""; problem=""
[ "$dtype" = bf16 ] && { suffix=_bf16; problem="--problem BF16=1"; }
mkdir -p runs/work
if [ -z "${LIST:-}" ]; then
  LIST=runs/work/list.txt
  cat > $LIST <<'EOF2'
1,8,512,64 - 16
1,8,512,64 causal 16
2,8,512,64 - 16
2,8,512,64 causal 16
2,8,2048,64 - 18
2,8,2048,64 causal 18
2,8,2048,128 - 20
2,8,2048,128 causal 20
8,16,1024,64 - 18
4,16,4096,128 - 90
4,16,4096,128 causal 50
4,16,4096,64 - 50
1,16,16384,128 - 100
EOF2
fi
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
while read shape causal limit; do
  flag=""; tag=""; [ "$causal" = causal ] && { flag=--causal; tag=_causal; }
  name=$(echo $shape | tr , x)$tag$suffix
  start=$(date +%s)
  timeout $((limit + 60)) $E run --template sdpa_hopper --shape $shape $flag $problem --elite 3 \
    --budget 64 --time-limit ${limit}s --db runs/work/$name.db < /dev/null > runs/work/run_$name.txt 2>&1
  rc=$?
  echo "== $name ($(( $(date +%s) - start )) s, rc $rc): $(grep -E 'stopped|re-timing 1' runs/work/run_$name.txt | tr '\n' ' ')"
  $E show elite --db runs/work/$name.db 2>&1 | sed -n 2,5p
done < "$LIST"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
tar czf $OUT/work_$dtype.tgz -C runs work
