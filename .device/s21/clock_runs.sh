#!/bin/bash
# Session 21: the simulated wall time (--clock) of generations of 16 and 4, with and without
# compiles ahead, seeds 1-20, every recording of tests/data and .device/holdout.
cd /work/main
R="tests/data/*.jsonl .device/holdout/*.jsonl"
run() { local name=$1; shift; scripts/search-bench.py --evo /tmp/evo_s21 --methods evo --seeds 20 --jobs 2 --clock --json .device/s21/$name.json "$@" $R > .device/s21/$name.txt 2>&1; }
run g16_noahead "--evo-args=--no-compile-ahead"
run g16_ahead
run g4_ahead "--evo-args=--generation-size 4"
run g4_noahead "--evo-args=--generation-size 4 --no-compile-ahead"
