#!/bin/bash
# Issue 17 (sixteenth session): the six recordings, seeds 1 to 40, medians per 20 seeds.
# usage: share_variant.sh NAME [env assignments...]; runs all six recordings, seeds 1-40
name=$1; shift
cd /work/main
env "$@" nice -n 5 scripts/search-bench.py --evo build/evo --methods evo --seeds 40 --jobs 2 --json /tmp/ana/$name.json tests/data/*.jsonl > /tmp/ana/$name.txt 2>&1
python3 - /tmp/ana/$name.json <<'P'
import json,sys,statistics as st
d=json.load(open(sys.argv[1]))
out=[]
for r in d['recordings']:
    h=r['methods']['evo']['hits']; cap=r['cap']
    h=[x if x is not None else cap*2 for x in h]
    out.append(f"{r['recording'].split('/')[-1][5:-6]:28s} {st.median(h[:20]):6.1f} {st.median(h[20:]):6.1f} {st.median(h):6.1f} mean {st.mean(h):6.1f}")
print('\n'.join(out))
P
