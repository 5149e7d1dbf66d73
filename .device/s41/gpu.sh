#!/usr/bin/env bash
# [gpu] tests by list: LIST=hopper|rest1 (.device/s41/gpu_LIST.txt) or the fortieth session's
# part1|part2|lagged, under LIMIT seconds (default 580), into $OUT/gpu_LIST.log.
f=.device/s41/gpu_${LIST:?}.txt; [ -f $f ] || f=.device/s40/gpu_${LIST}.txt
exec bash .device/gpu_tests.sh $f ${LIMIT:-580}
