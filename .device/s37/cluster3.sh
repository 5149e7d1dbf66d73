#!/usr/bin/env bash
# (kv_split/ is made by make_kv_split.sh.) CLUSTER_M=2 variant (template copy in kv_split/): CTA 0 multicasts the whole K tile, CTA 1 the
# whole V tile, instead of each half of both. Against the shipped template's CLUSTER_M=1.
set -u
exec > >(tee $OUT/cluster3.log) 2>&1
E=build-bundle/evo
b() { local label=$1; shift; echo "$label: $(timeout 120 $E "$@" < /dev/null 2>&1 | grep -E '^verdict|^timing|sm clock|^correctness|rror' | sed 's/  */ /g; s/17 repetitions.*averaged over the timed launches://' | cut -c1-120 | tr '\n' ';')"; }
for round in 1 2; do
  for knobs in "PERSISTENT=1 RESCALE_UNDER_QK=1" "PERSISTENT=0 RESCALE_UNDER_QK=1"; do
    sets=$(for k in $knobs; do echo -n " --set $k"; done)
    b "r$round shipped CLUSTER_M=1 $knobs" bench -t sdpa_hopper --shape 4,16,4096,128 $sets
    b "r$round kv_split CLUSTER_M=2 $knobs" --templates .device/s37/kv_split bench -t sdpa_hopper --shape 4,16,4096,128 $sets --set CLUSTER_M=2
  done
done
b "gate kv_split odd tiles" --templates .device/s37/kv_split bench -t sdpa_hopper --shape 3,12,1500,1300,128 --set CLUSTER_M=2 --set PERSISTENT=1
