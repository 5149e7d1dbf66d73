# Issue 20 follow-up: where a short search's wall time goes on one GPU and on two. The same
# search (sdpa_fp16 2,8,512,64, seed 1, 64 candidates) after a warm-up that fills a compile
# cache, once per GPU list, each from its own copy of the cache; the databases come back for
# their candidates' timestamps, and the runs' stderr with -v.
set -u
W=/tmp/tl; rm -rf $W; mkdir -p $W
E=build-bundle/evo
S="--template sdpa_fp16 --shape ${SHAPE:-2,8,512,64} --seed 1"
$E run --new --json --db $W/warm.db --budget 128 --gpus 0,1 $S --cache-dir $W/cache > /dev/null 2>&1
for g in 0 0,1; do
  n=$(echo $g | tr , _)
  rm -rf $W/c$n; cp -r $W/cache $W/c$n
  /usr/bin/time -f "gpus $g: %e s wall, %U s user" $E -v run --new --json --db $OUT/run_$n.db --budget 64 --gpus $g $S \
    --cache-dir $W/c$n > $OUT/run_$n.json 2> $OUT/run_$n.err
  tail -1 $OUT/run_$n.err
done
nproc
