#!/usr/bin/env bash
# Thirty-first session, second device call: compiling ahead around the first eight candidates of a
# generation (after8) against the first four (after4, as committed) and the engine before.
set -u
mkdir -p /tmp/wall
BINS="before=build-bundle/evo_base after4=build-bundle/evo_c4 after8=build-bundle/evo" \
  OUT=/tmp/wall bash .device/s31/wall.sh 2>&1 | tee $OUT/wall_centres.txt
