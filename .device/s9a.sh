#!/usr/bin/env bash
# The determinism check of the gates on STREAM_K and its neighbours at 2,8,1400,1400,128, and a map
# of where the outputs of the nondeterministic one differ between calls.
set -u
E=build-bundle/evo
S=2,8,1400,1400,128
for set in "PERSISTENT=1 STREAM_K=1" "PERSISTENT=1 STREAM_K=1 INTRA_OVERLAP=0" "PERSISTENT=1 STREAM_K=1 PINGPONG=0" \
    "PERSISTENT=1 STREAM_K=1 TMA_STORE=0" "PERSISTENT=1 STREAM_K=0" "PERSISTENT=1 STREAM_K=1 STAGES=3" \
    "PERSISTENT=1 STREAM_K=1 FAST_EXP=0"; do
  args=""; for s in $set; do args="$args -s $s"; done
  echo "== bench $set"
  $E bench --template sdpa_hopper --shape $S $args > $OUT/bench_$(echo $set | tr ' =' '__').txt 2>&1
  grep -iE "status|incorrect|determin|median|measured" $OUT/bench_$(echo $set | tr ' =' '__').txt | head -5
done
python3 .device/fixed_template.py /tmp/dm PERSISTENT=1 STREAM_K=1 REST=default deterministic=false
rm -rf /tmp/dm.db* /tmp/pkg
$E --templates /tmp/dm run --template sdpa_hopper --shape $S --budget 1 --db /tmp/dm.db --no-retime > $OUT/run_dm.txt 2>&1
tail -2 $OUT/run_dm.txt
$E --templates /tmp/dm export --db /tmp/dm.db --python /tmp/pkg > $OUT/export_dm.txt 2>&1 || tail -3 $OUT/export_dm.txt
python3 .device/det_map.py /tmp/pkg 2 8 1400 1400 128 2>&1 | tail -60
echo "== stream-K gate test"
build-bundle/evo_tests "sdpa_hopper passes the gates with stream-K tails" > $OUT/sk_test.txt 2>&1
grep -E "passed|failed|FAILED|determin|measured" $OUT/sk_test.txt | head -20
echo "== two_kernels determinism cases"
build-bundle/evo_tests "the gates reject a call that reads scratch nobody wrote*" > $OUT/two.txt 2>&1
grep -E "passed|failed|FAILED" $OUT/two.txt | head
