#!/usr/bin/env bash
# [gpu] tests by list: LIST=part1|part2|lagged (.device/s40/gpu_LIST.txt; part1 and part2 are all
# of them, each under one device command's limit), into $OUT/gpu_LIST.log.
exec bash .device/gpu_tests.sh .device/s40/gpu_${LIST:?}.txt
