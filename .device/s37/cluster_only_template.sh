#!/usr/bin/env bash
# Writes DIR/hopper_cluster: a copy of sdpa_hopper whose CLUSTER_M can only be 2, so that any run
# of it measures and exports kernels launched in clusters. Usage: cluster_only_template.sh DIR
set -eu
cp -r kernel_templates/sdpa_hopper "$1/hopper_cluster"
python3 - "$1/hopper_cluster/manifest.json" <<'PY'
import json, sys
path = sys.argv[1]; m = json.load(open(path))
m["name"] = "hopper_cluster"
for k in m["knobs"]:
    if k["name"] == "CLUSTER_M": k["values"], k["default"] = [2], 2
json.dump(m, open(path, "w"), indent=2)
PY
