#!/usr/bin/env bash
# Thirty-first session, first device call: the wall-time comparison, then [gpu] part 1.
set -u
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
mkdir -p /tmp/wall
EVO_BASE=build-bundle/evo_base OUT=/tmp/wall bash .device/s31/wall.sh 2>&1 | tee $OUT/wall.txt
tar czf $OUT/wall_logs.tgz -C /tmp/wall .
PART=1 bash .device/final_gpu.sh 2>&1 | tee $OUT/gpu_part1_summary.txt
