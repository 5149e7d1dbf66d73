#!/usr/bin/env bash
# After the ordered merge: the stream-K GPU tests, the exported package's check, and fp16 bench-attention at 4096.
set -u
T=build-bundle/evo_tests
( $T "sdpa_hopper passes the gates with stream-K tails" ; $T "broken stream-K merges of sdpa_hopper are rejected" ) > $OUT/tests.log 2>&1
grep -E "All tests|failed|FAILED|stream-K:|S=" $OUT/tests.log | head -12
bash .device/sk5.sh 2>&1 | tail -18
timeout 300 python3 scripts/bench-attention.py --evo build-bundle/evo --template sdpa_hopper --shapes 4,16,4096,128 \
  --budget 40 --dtype fp16 --work /tmp/work6 > $OUT/ba.txt 2>&1
tail -3 $OUT/ba.txt | head -2 | cut -c1-330
