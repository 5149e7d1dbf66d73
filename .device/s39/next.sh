#!/usr/bin/env bash
# For the fortieth session (written in the thirty-ninth, not yet run): LAGGED_MAX under
# compute-sanitizer, and what outlier keys cost it beside the peers. PART=sanitizer: racecheck and
# synccheck on `evo bench --verify-only` of LAGGED_MAX settings on small problems (the gates'
# outlier seeds send warps down the exact path); PART=outliers: fresh fp16 searches of
# 4,16,4096,128 and 1,16,16384,128, then bench-attention --no-search on plain inputs and with
# --outlier-keys 32:12, the peers in the same process. Logs under $OUT.
set -u
E=build-bundle/evo
if [ "${PART:-sanitizer}" = sanitizer ]; then
  while IFS='|' read problem knobs; do
    args=""; for kv in $knobs; do args="$args --set $kv"; done
    for tool in racecheck synccheck; do
      timeout 240 compute-sanitizer --tool $tool --target-processes all $E bench \
        --template sdpa_hopper $problem $args --verify-only < /dev/null > $OUT/san.txt 2>&1
      echo "$tool $problem $knobs: rc $? $(grep -E "ERROR SUMMARY|^verdict|^correctness" $OUT/san.txt | tr '\n' ';' | cut -c1-200)"
      cat $OUT/san.txt >> $OUT/sanitizer_full.log
    done
  done <<'L' | tee $OUT/sanitizer.log
--shape 1,2,700,128|LAGGED_MAX=1 PERSISTENT=1 RESCALE_UNDER_QK=1
--shape 1,2,700,128 --problem BF16=1|LAGGED_MAX=1 BLOCK_N=160 STREAM_K=1 PERSISTENT=1
--shape 1,3,500,64 --causal|LAGGED_MAX=1 NUM_CONSUMERS=3 BLOCK_N=64 TMA_STORE=0
--shape 1,2,300,600,256|LAGGED_MAX=1 NUM_CONSUMERS=1 PINGPONG=0 BLOCK_N=64 TMA_STORE=0
L
  exit 0
fi
rm -rf runs/work; mkdir -p runs/work
grep -E "^(4,16,4096,128 -|1,16,16384,128)" .device/s24/list.txt > runs/work/rows.txt
DTYPE=fp16 LIST=runs/work/rows.txt bash .device/s14/search.sh 2>&1 | cut -c1-240
for keys in "" "--outlier-keys 32:12"; do
  name=plain; [ -n "$keys" ] && name=outliers
  timeout 200 python3 scripts/bench-attention.py --evo $E --template sdpa_hopper --no-search \
    --work runs/work --shapes 4,16,4096,128 1,16,16384,128 $keys \
    --json $OUT/outliers_$name.json > $OUT/outliers_$name.txt 2>&1
  echo "== $name rc $?"; cut -c1-330 $OUT/outliers_$name.txt
done
