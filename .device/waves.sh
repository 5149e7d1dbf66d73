#!/usr/bin/env bash
# Does wave quantization cost at S=4096, D=128 on the H100? TF over head counts around 64.
set -u
E=build-bundle/evo
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv | tee $OUT/smi.txt
for P in 0 1; do
  for H in 60 62 64 66 68 64 66; do
    $E bench --template sdpa_hopper --shape 1,$H,4096,128 --set BLOCK_N=160 --set PRODUCER_REGS=40 \
      --set PERSISTENT=$P --json > $OUT/b_${P}_${H}.json 2> $OUT/b_${P}_${H}.err
    python3 - $OUT/b_${P}_${H}.json $H $P <<'PY'
import json,sys
d=json.load(open(sys.argv[1])); H=int(sys.argv[2])
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
us=find(d,'median_us') or find(d,'time_us') or find(d,'us')
fl=4*H*4096*4096*128
print('P',sys.argv[3],'H',H,'tiles',32*H,'waves',round(32*H/132,3),'us',us,'TF',round(fl/us/1e6,1) if us else None)
PY
  done
done
