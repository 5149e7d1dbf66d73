#!/usr/bin/env bash
set -u
bash .device/sk5.sh > $OUT/sk5.txt 2>&1
python3 .device/determinism.py 2>&1 | tail -8
