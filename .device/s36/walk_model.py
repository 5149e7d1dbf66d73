#!/usr/bin/env python3
"""Thirty-sixth session: the static walks of sdpa_hopper over causal tiles, counted in KV tiles per
CTA (no tile edges, no clocks): max over mean load for heaviest-first, CAUSAL_PAIRS as committed,
and CAUSAL_PAIRS with an odd head numbered from its middle tile (the lead in note.md). Shapes:
(label, B, H, S, query rows per tile, BLOCK_N)."""
import math
def weights(S,pos,bn):
    n=math.ceil(S/pos); return [math.ceil(min(S,(m+1)*pos)/bn) for m in range(n)], n
def order_heaviest(heads,n): return [(h, n-1-i//heads) for i in range(heads*n) for h in [i%heads]]
def pairs_order(heads,n,middle=False):
    out=[]
    for h in range(heads):
        seq=[(n-1-j//2) if j%2==0 else j//2 for j in range(n)]
        if middle and n%2==1 and h%2==1:
            mid=(n-1)//2
            seq=[mid]+[x for x in seq if x!=mid]
        out+= [(h,m) for m in seq]
    return out
def static(order,w,ctas,pairs):
    load=[0]*ctas
    if pairs:
        for p in range((len(order)+1)//2):
            c=p%ctas
            for t in order[2*p:2*p+2]: load[c]+=w[t[1]]
    else:
        for i,t in enumerate(order): load[i%ctas]+=w[t[1]]
    return max(load), sum(load)/ctas
for name,B,H,S,pos,bn in [("4,16,4096,128 C2",4,16,4096,128,128),("2,16,8192,64 C3",2,16,8192,192,128),("2,16,4096,256 C2",2,16,4096,128,80),("2,8,2048,128 C2",2,8,2048,128,128),("3,12,1500,128 C2",3,12,1500,128,128)]:
    w,n=weights(S,pos,bn); heads=B*H
    a=static(order_heaviest(heads,n),w,132,False)
    b=static(pairs_order(heads,n),w,min(132,(heads*n+1)//2),True)
    c=static(pairs_order(heads,n,True),w,min(132,(heads*n+1)//2),True)
    print(f"{name}: n={n} heaviest-first max/mean {a[0]/a[1]:.3f}; pairs {b[0]/b[1]:.3f} (max {b[0]}); pairs+middle {c[0]/c[1]:.3f} (max {c[0]}); ideal max {a[1]:.1f}")
