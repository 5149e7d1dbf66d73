#!/usr/bin/env python3
"""The events of sdpa_hopper's steady loop in a cuobjdump -sass listing: from the first Q K^T
issue that is followed by a P V issue (HGMMA with a register A operand), in order, the MMAs,
waits (WARPGROUP.DEPBAR), barriers, branches, and how many FMNMX / MUFU.EX2 / F2FP / FADD /
FMUL / FFMA lie between them. Usage: sass_loop.py FILE.sass[.gz]"""
import gzip, re, sys
opener = gzip.open if sys.argv[1].endswith(".gz") else open
lines = [l for l in opener(sys.argv[1], "rt") if re.search(r"/\*[0-9a-f]{4}\*/", l)]
ops = []
for l in lines:
    m = re.search(r"/\*([0-9a-f]{4})\*/\s+(.*?);", l)
    if m: ops.append((m.group(1), m.group(2).strip()))
# the loop: the first P V HGMMA (register A operand, "tnspB") and the QK group before it
pv = next(i for i, (_, t) in enumerate(ops) if "HGMMA" in t and ".tnspB" in t and re.search(r"HGMMA\S* R\d+, R\d+", t))
start = max(i for i in range(pv) if ops[i][1].startswith("BAR.SYNC"))
counts = {}
out = []
def flush():
    if counts:
        out.append("    " + " ".join(f"{k}x{v}" for k, v in sorted(counts.items())))
        counts.clear()
key = ("FMNMX", "MUFU.EX2", "F2FP", "FADD", "FMUL", "FFMA", "FSEL", "SHFL")
for addr, t in ops[start:start + 900]:
    op = t.split()[0] if not t.startswith("@") else t.split()[1]
    if any(op.startswith(k) for k in ("HGMMA", "WARPGROUP", "BAR", "BRA", "SYNCS", "WARPSYNC", "EXIT")):
        flush(); out.append(f"{addr} {t[:70]}")
        if op.startswith("BRA") and "0x" in t and int(t.split("0x")[-1], 16) < int(addr, 16) and len(out) > 40: break
    else:
        k = next((k for k in key if op.startswith(k)), "other")
        counts[k] = counts.get(k, 0) + 1
flush()
# collapse runs of identical HGMMA lines
prev = None; n = 0
for o in out + [None]:
    sig = o.split()[1] if o and "HGMMA" in o else o
    if sig == prev and o and "HGMMA" in o: n += 1; continue
    if prev is not None: print(prev_line + (f"  (x{n})" if n > 1 else ""))
    prev, prev_line, n = sig, o, 1
