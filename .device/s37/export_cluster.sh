#!/usr/bin/env bash
# Exports of a kernel launched in clusters, run on the GPU: a copy of sdpa_hopper whose CLUSTER_M
# can only be 2 (hopper_cluster), searched briefly, exported as the Python package (checked by
# scripts/export-check.py through both driver bindings: tuned, partial-tile and untuned shapes,
# CUDA graph, torch.compile), as the C++ library (its example compares every call with a
# reference) and as one kernel's launch.json (scripts/evo_launch.py). Output: $OUT/export.log.
set -u
exec > >(tee $OUT/export.log) 2>&1
E=$PWD/build-bundle/evo
T=$OUT/templates; W=$OUT/export; mkdir -p $T $W
cp -r kernel_templates/sdpa_hopper $T/hopper_cluster
python3 - $T/hopper_cluster/manifest.json <<'PY'
import json, sys
path = sys.argv[1]; m = json.load(open(path))
m["name"] = "hopper_cluster"
for k in m["knobs"]:
    if k["name"] == "CLUSTER_M": k["values"], k["default"] = [2], 2
json.dump(m, open(path, "w"), indent=2)
PY
cd $W
timeout 150 $E --templates $T run --template hopper_cluster --shape 1,16,2048,128 --budget 4 --db c.db < /dev/null 2>&1 | tail -4
$E --templates $T show elite --db c.db 2>&1 | head -8
timeout 60 $E --templates $T export --python py --cpp cpp --db c.db 2>&1 | tail -2
grep -o '"cluster": *\[[^]]*\]' py/evo_attention/table.json | sort | uniq -c
timeout 200 python3 $OLDPWD/scripts/export-check.py py/evo_attention --no-time 2>&1 | tail -15
(cmake -S cpp -B cpp/build -DCMAKE_BUILD_TYPE=Release > /dev/null && cmake --build cpp/build -j 16 > cmake.log 2>&1) || tail -20 cmake.log
timeout 120 cpp/build/evo_attention_example 2>&1 | tail -5
id=$($E --templates $T show elite --db c.db --json 2>/dev/null | python3 -c "import json,sys; d=json.load(sys.stdin); print((d[0] if isinstance(d,list) else d['elite'][0])['id'])" 2>&1)
echo "elite id: $id"
$E --templates $T export $id --out one --db c.db 2>&1 | tail -1
grep -o '"cluster": *\[[^]]*\]' one/launch.json | head -2
timeout 60 python3 - $OLDPWD/scripts one <<'PY'
import sys, torch
sys.path.insert(0, sys.argv[1])
from evo_launch import ExportedKernel
k = ExportedKernel(sys.argv[2])
q, kk, v = (torch.randn(1, 16, 2048, 128, device="cuda", dtype=torch.float16) for _ in range(3))
o = torch.empty_like(q)
launch = k.bind({"Q": q, "K": kk, "V": v, "O": o}); launch(); torch.cuda.synchronize()
ref = torch.nn.functional.scaled_dot_product_attention(q.float(), kk.float(), v.float())
print("evo_launch cluster", k._kernels if hasattr(k, "_kernels") else "", "max abs error", (o.float() - ref).abs().max().item())
PY
