#!/usr/bin/env bash
# Rebuilds the template copy that .device/s36/l2.sh measures (sections of heads sized to L2, tried
# and not kept): 4ec3a38's sdpa_hopper with l2_sections_{cu,manifest}.diff applied, in
# .device/s36/l2/sdpa_hopper: run it here before the device call (the device copy has no git), and
# delete the folder after.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=.device/s36/l2/sdpa_hopper
mkdir -p $dir
for f in sdpa_hopper.cu manifest.json starting_points.json; do
  git show 4ec3a38:kernel_templates/sdpa_hopper/$f > $dir/$f
done
patch -s -d $dir -p1 < .device/s36/l2_sections_cu.diff
patch -s -d $dir -p1 < .device/s36/l2_sections_manifest.diff
