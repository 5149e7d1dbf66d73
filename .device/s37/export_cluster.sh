#!/usr/bin/env bash
# Exports of a kernel launched in clusters, run on the GPU: a copy of sdpa_hopper whose CLUSTER_M
# can only be 2 (hopper_cluster), searched briefly, exported as the Python package (checked by
# scripts/export-check.py through both driver bindings: tuned, partial-tile and untuned shapes,
# CUDA graph, torch.compile), as the C++ library (its example compares every call with a
# reference). Output: $OUT/export.log.
set -u
exec > >(tee $OUT/export.log) 2>&1
E=$PWD/build-bundle/evo
T=$OUT/templates; W=$OUT/export; mkdir -p $T $W
bash .device/s37/cluster_only_template.sh $T
cd $W
timeout 150 $E --templates $T run --template hopper_cluster --shape 1,16,2048,128 --budget 4 --db c.db < /dev/null 2>&1 | tail -4
$E --templates $T show elite --db c.db 2>&1 | head -8
timeout 60 $E --templates $T export --python py --cpp cpp --db c.db 2>&1 | tail -2
grep -o '"cluster": *\[[^]]*\]' py/evo_attention/table.json | sort | uniq -c
timeout 200 python3 $OLDPWD/scripts/export-check.py py/evo_attention --no-time 2>&1 | tail -15
(cmake -S cpp -B cpp/build -DCMAKE_BUILD_TYPE=Release > /dev/null && cmake --build cpp/build -j 16 > cmake.log 2>&1) || tail -20 cmake.log
timeout 120 cpp/build/evo_attention_example 2>&1 | tail -5
# One kernel's launch.json through scripts/evo_launch.py: evo_launch_cluster.sh (the snippet first
# here built the ExportedKernel before any tensor, so before PyTorch had made a CUDA context, and
# cuModuleLoadData failed with CUDA_ERROR_NOT_INITIALIZED: out/export.log).
