# Issue 20's run on several GPUs, never made before (no multi-GPU machine was lent while it was
# open): the [gpus] tests and scripts/bench-gpus.py on two H200s of one host.
# SHAPES: bench-gpus.py's shapes (default: both of its defaults). Output under $OUT.
set -u
exec > >(tee $OUT/two_gpus.log) 2>&1
nvidia-smi -L
if [ -z "${SKIP_TESTS:-}" ]; then
  timeout 300 build-bundle/evo_tests "[gpus]" 2>&1 | tail -30
fi
timeout ${BENCH_S:-420} python3 scripts/bench-gpus.py --evo build-bundle/evo \
  --shapes ${SHAPES:-2,8,512,64 4,16,4096,128} --json $OUT/bench_gpus.json
echo "bench-gpus rc=$?"
