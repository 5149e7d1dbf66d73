# Issue 20's run on several GPUs, never made before (no multi-GPU machine was lent while it was
# open): the [gpus] tests and scripts/bench-gpus.py on two H200s of one host. Carry
# build-bundle/evo, evo_tests and evo_fake_worker (the [gpus] tests start fake workers too).
# SKIP_TESTS=1 leaves the tests out; SHAPES: bench-gpus.py's shapes (default: both of its
# defaults); BENCH_ARGS: more of its options. The session's calls, in order:
#   SHAPES=2,8,512,64 BENCH_S=380 (tests without the fake worker carried: 15 failed for it)
#   SHAPES=4,16,4096,128 BENCH_S=380 (tests with it: all passed)
#   SKIP_TESTS=1 SHAPES=2,8,512,64 BENCH_S=560 BENCH_ARGS="--warm-budget 512"
#   SKIP_TESTS=1 SHAPES=1,16,16384,128 BENCH_ARGS="--budget 32 --warm-budget 64"
# Output under $OUT.
set -u
exec > >(tee $OUT/two_gpus.log) 2>&1
nvidia-smi -L
if [ -z "${SKIP_TESTS:-}" ]; then
  timeout 300 build-bundle/evo_tests "[gpus]" -r compact > $OUT/gpus_tests.txt 2>&1
  echo "tests rc=$?"; tail -3 $OUT/gpus_tests.txt
fi
timeout ${BENCH_S:-420} python3 scripts/bench-gpus.py --evo build-bundle/evo \
  --shapes ${SHAPES:-2,8,512,64 4,16,4096,128} ${BENCH_ARGS:-} --json $OUT/bench_gpus.json
echo "bench-gpus rc=$?"
