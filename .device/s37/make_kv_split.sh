#!/usr/bin/env bash
# Rebuilds .device/s37/kv_split/sdpa_hopper, the copy of sdpa_hopper in which CTA 0 of a cluster
# multicasts the whole K tile and CTA 1 the whole V tile (cluster3.sh, cluster5.sh), from the
# template of e678fad and the two patches beside this script.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.."
rm -rf "$here/kv_split" && mkdir -p "$here/kv_split"
git archive e678fad kernel_templates/sdpa_hopper | tar -x -C "$here/kv_split" --strip-components=1
patch -s -d "$here/kv_split/sdpa_hopper" -p1 < "$here/kv_split_cu.diff"
patch -s -d "$here/kv_split/sdpa_hopper" -p1 < "$here/kv_split_manifest.diff"
