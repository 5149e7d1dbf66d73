#!/usr/bin/env python3
"""Calls an export of trace_variant.py's copy 30 times and prints where the cycles of each tile of
the first 4 CTAs went (the last call's evo_trace). Usage: trace_read.py EXPORT B H S D"""
import ctypes, os, statistics, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import torch
from evo_launch import ExportedKernel, _cuda, _check
folder = sys.argv[1]
b, h, s, d = map(int, sys.argv[2:6])
q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.float16) for _ in range(3))
o = torch.empty_like(q)
kernel = ExportedKernel(folder)
launch = kernel.bind({"Q": q, "K": k, "V": v, "O": o})
for _ in range(30):
    launch()
torch.cuda.synchronize()
ptr, size = ctypes.c_uint64(), ctypes.c_size_t()
_check(_cuda().cuModuleGetGlobal_v2(ctypes.byref(ptr), ctypes.byref(size), kernel._module, b"evo_trace"), "get global")
host = (ctypes.c_uint64 * (size.value // 8))()
_check(_cuda().cuMemcpyDtoH_v2(host, ptr, size), "copy")
T = lambda cta, role, r, e: host[((cta * 3 + role) * 64 + r) * 24 + e]
names = {0: "start", 7: "K0", 1: "QK0", 6: "sm0", 2: "loop", 3: "PVn", 4: "PVdone", 5: "epi"}
order = [0, 7, 1, 6, 2, 3, 4, 5]
agg = {}
for cta in range(4):
    rounds = [r for r in range(64) if T(cta, 1, r, 0)]
    print(f"CTA {cta}: {len(rounds)} tiles")
    for r in rounds[:-1]:
        base = T(cta, 1, r, 0)
        nxt = T(cta, 1, r + 1, 0)
        line = f"  tile {r:2d} period {nxt - base:7d}"
        for role in (1, 2):
            line += f" | wg{role - 1}: " + " ".join(f"{names[e]} {int(T(cta, role, r, e)) - int(base):+7d}" for e in order)
        line += f" | prod Q {int(T(cta, 0, r, 0)) - int(base):+7d} lastKV {int(T(cta, 0, r, 1)) - int(base):+7d}"
        print(line)
        for role in (1, 2):
            t = [int(T(cta, role, r, e)) for e in range(24)]
            tn = int(T(cta, role, r + 1, 0))
            parts = {"start->K0": t[7] - t[0], "K0->QK0": t[1] - t[7], "QK0->sm0": t[6] - t[1],
                     "sm0->loop": t[2] - t[6], "loop->PVn": t[3] - t[2], "PVn->done": t[4] - t[3],
                     "done->epi": t[5] - t[4], "epi->next": tn - t[5], "period": tn - t[0]}
            if t[8]:
                parts.update({"it:turn->issued": t[9] - t[8], "it:->scores": t[10] - t[9],
                              "it:softmax": t[11] - t[10], "it:->PV": t[12] - t[11],
                              "it:pack": t[13] - t[12]})
            if t[14]:
                parts.update({"ep:done->inv": t[14] - t[4], "ep:bar1": t[15] - t[14],
                              "ep:stores": t[16] - t[15], "ep:bar2": t[17] - t[16],
                              "ep:tma": t[5] - t[17]})
            for key, val in parts.items():
                agg.setdefault((role, key), []).append(val)
print("medians over tiles (cycles):")
for role in (1, 2):
    print(f"  wg{role - 1}: " + "  ".join(f"{key} {statistics.median(vals):.0f}" for (r, key), vals in agg.items() if r == role))
