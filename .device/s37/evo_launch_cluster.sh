#!/usr/bin/env bash
# scripts/evo_launch.py on one exported kernel launched in clusters (hopper_cluster, as in
# export_cluster.sh): the tensors, and with them PyTorch's context, first. Output: $OUT/launch.log.
set -u
exec > >(tee $OUT/launch.log) 2>&1
E=$PWD/build-bundle/evo; S=$PWD/scripts
T=$OUT/templates; W=$OUT/export; mkdir -p $T $W
bash .device/s37/cluster_only_template.sh $T
cd $W
timeout 60 $E --templates $T run --template hopper_cluster --shape 1,16,2045,2043,128 --budget 1 --db c.db < /dev/null 2>&1 | tail -2
$E --templates $T export 1 --out one --db c.db 2>&1 | tail -1
python3 -c "import json; l=json.load(open('one/launch.json')); print('launch.json cluster', l['cluster'], 'grid', l['grid'], 'status', l['status'])"
timeout 60 python3 - $S one <<'PY'
import sys, torch
sys.path.insert(0, sys.argv[1])
q, k, v = (torch.randn(1, 16, 2045, 128, device="cuda", dtype=torch.float16) for _ in range(3))
k, v = k[:, :, :2043].contiguous(), v[:, :, :2043].contiguous()
o = torch.full_like(q, float("nan"))
from evo_launch import ExportedKernel
kernel = ExportedKernel(sys.argv[2])
launch = kernel.bind({"Q": q, "K": k, "V": v, "O": o}); launch(); torch.cuda.synchronize()
ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float())
print("evo_launch.py, clusters", [kk.cluster for kk in kernel._kernels.values()],
      "max abs error", (o.float() - ref).abs().max().item())
PY
