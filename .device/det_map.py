"""Where the outputs of 20 eager calls of an exported sdpa_hopper (STREAM_K, non-causal, one
problem) differ from the first call's: per tile (BLOCK_M rows of one head) and per consumer
warpgroup's 64 rows, with the tile's place in the persistent schedule (whole round or tail).
Usage: det_map.py PKG B H S_q S_kv D [BLOCK_M] [CTAS]"""
import math, sys, torch
sys.path.insert(0, sys.argv[1])
import evo_attention as ea
b, h, sq, skv, d = map(int, sys.argv[2:7])
block_m = int(sys.argv[7]) if len(sys.argv) > 7 else 128
ctas = int(sys.argv[8]) if len(sys.argv) > 8 else 132
torch.manual_seed(0)
q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.float16) for s in (sq, skv, skv))
outs = [ea.attention(q, k, v) for _ in range(20)]
torch.cuda.synchronize()
rows = torch.zeros(b * h, sq, dtype=torch.int32, device="cuda")  # calls in which a row differs
for o in outs[1:]:
    rows += (o != outs[0]).any(-1).reshape(b * h, sq).int()
rows = rows.cpu()
num_m = math.ceil(sq / block_m)
tiles = b * h * num_m
whole_end = tiles - tiles % ctas
print(f"{tiles} tiles, whole rounds end at {whole_end}; calls differing from the first:",
      sum(int(not torch.equal(outs[0], o)) for o in outs[1:]), "of 19")
hit = {"whole": 0, "tail": 0}
for bh in range(b * h):
    for m in range(num_m):
        t = bh * num_m + m
        part = rows[bh, m * block_m:(m + 1) * block_m]
        halves = [int((part[c * 64:(c + 1) * 64] > 0).sum()) for c in range((len(part) + 63) // 64)]
        if sum(halves):
            kind = "tail" if t >= whole_end else "whole"
            hit[kind] += 1
            worst = max(float((o[bh // h, bh % h, m * block_m:(m + 1) * block_m].float() -
                               outs[0][bh // h, bh % h, m * block_m:(m + 1) * block_m].float()).abs().max())
                        for o in outs[1:])
            print(f"tile {t} (bh {bh}, m {m}) {kind}: rows differing per 64-row half {halves},"
                  f" in up to {int(part.max())} calls, max |diff| {worst:.3g}")
print("tiles with a difference:", hit)
