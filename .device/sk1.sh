#!/usr/bin/env bash
# Stream-K: the GPU tests, then evo bench with and without it at the two long shapes.
set -u
T=build-bundle/evo_tests; E=build-bundle/evo
( $T "sdpa_hopper passes the gates with stream-K tails" ; $T "broken stream-K merges of sdpa_hopper are rejected" ) > $OUT/tests.log 2>&1
grep -E "passed|failed|FAILED|stream-K|S=|with expansion|REQUIRE|CHECK|status" $OUT/tests.log | head -40
bench() { # shape, settings...
  local shape=$1; shift; local args=""; for kv in "$@"; do args="$args --set $kv"; done
  $E bench --template sdpa_hopper --shape $shape $args --json > $OUT/b.json 2>$OUT/b.err
  python3 - "$shape" "$*" <<'PY'
import json,sys
try: d=json.load(open(sys.argv[0] and '/dev/stdin' if False else __import__('os').environ['OUT']+'/b.json'))
except Exception as e: print(sys.argv[1],sys.argv[2],'ERR',open(__import__('os').environ['OUT']+'/b.err').read()[-300:]); sys.exit()
def find(o,k):
    if isinstance(o,dict):
        for a,b in o.items():
            if a==k: return b
            r=find(b,k)
            if r is not None: return r
    if isinstance(o,list):
        for b in o:
            r=find(b,k)
            if r is not None: return r
us=find(d,'median_us'); st=find(d,'status')
B,H,S,D=[int(x) for x in sys.argv[1].split(',')]
print(sys.argv[1],sys.argv[2],st,us,'TF',round(4*B*H*S*S*D/us/1e6,1) if us else None)
PY
}
for shape in 4,16,4096,128 1,16,16384,128; do
  for rep in 1 2; do
    bench $shape PERSISTENT=1
    bench $shape PERSISTENT=1 STREAM_K=1
    bench $shape PERSISTENT=1 BLOCK_N=192 PINGPONG=0 TMA_STORE=0
    bench $shape PERSISTENT=1 BLOCK_N=192 PINGPONG=0 TMA_STORE=0 STREAM_K=1
    bench $shape PERSISTENT=1 BLOCK_N=160 TMA_STORE=0
    bench $shape PERSISTENT=1 BLOCK_N=160 TMA_STORE=0 STREAM_K=1
  done
done
