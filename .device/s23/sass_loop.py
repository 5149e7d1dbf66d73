#!/usr/bin/env python3
"""Prints the main loops of a cuobjdump -sass listing as runs of instruction kinds, so that the
place of the waits (WARPGROUP.DEPBAR) among the exponentials and the packing is read at a glance.
The main loop: the shortest backward branch whose body holds at least 16 HGMMA."""
import re, sys

KINDS = ("HGMMA", "MUFU", "F2FP", "FMNMX", "FFMA", "FADD", "FMUL", "SHFL", "BAR", "WARPGROUP",
         "SYNCS", "FSEL")
for path in sys.argv[1:]:
    best = None
    ins = []
    for line in open(path):
        m = re.search(r"/\*([0-9a-f]{4,5})\*/\s+(.*?);", line)
        if m:
            ins.append((int(m.group(1), 16), m.group(2).strip()))
    at = {a: i for i, (a, _) in enumerate(ins)}
    for i, (a, text) in enumerate(ins):
        m = re.search(r"BRA (0x[0-9a-f]+)", text)
        if not m or int(m.group(1), 16) >= a or int(m.group(1), 16) not in at:
            continue
        body = ins[at[int(m.group(1), 16)]:i + 1]
        if sum("HGMMA" in t for _, t in body) < 16:
            continue
        if best is None or len(body) < len(best[0]):
            best = (body, a)
    if best:
        body, a = best
        runs = []
        for _, t in body:
            words = t.split()
            op = words[1] if words[0].startswith("@") else words[0]
            kind = next((k for k in KINDS if op.startswith(k)), "other")
            if kind in ("BAR", "WARPGROUP", "SYNCS"):
                kind = op
            if runs and runs[-1][0] == kind:
                runs[-1][1] += 1
            else:
                runs.append([kind, 1])
        print(f"{path}: loop {hex(body[0][0])}..{hex(a)}, {len(body)} instructions")
        print("  " + " ".join(f"{k}x{n}" if n > 1 else k for k, n in runs))
