#!/usr/bin/env python3
"""Launches one attention kernel a few times, for a profiler (ncu) to pick up.

Either an exported evo kernel (`--export DIR`, launched through scripts/evo_launch.py) or a
PyTorch SDPA backend (`--peer cudnn` or `--peer flash`), on random inputs of one shape:
  ncu --clock-control none --metrics sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active \\
      -k regex:'sdpa_hopper|cudnn' --launch-skip 1 -c 1 \\
      scripts/attention-once.py --export runs/bench/4x16x4096x128 --shape 4,16,4096,128
Needs PyTorch (on the H100 machine).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    who = parser.add_mutually_exclusive_group(required=True)
    who.add_argument("--export", help="a folder written by `evo export`")
    who.add_argument("--peer", choices=["cudnn", "flash"], help="a PyTorch SDPA backend")
    parser.add_argument("--shape", default="4,16,4096,128", help="B,H,S,D")
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--dtype", choices=["fp16", "bf16"], default="fp16")
    parser.add_argument("--launches", type=int, default=3)
    args = parser.parse_args()
    try:
        b, h, s, d = (int(x) for x in args.shape.split(","))
    except ValueError:
        raise SystemExit(f"attention-once: shape '{args.shape}' is not B,H,S,D")

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    dtype = torch.float16 if args.dtype == "fp16" else torch.bfloat16
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=dtype) for _ in range(3))
    if args.peer:
        backend = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}
        with sdpa_kernel(backend[args.peer]):
            for _ in range(args.launches):
                F.scaled_dot_product_attention(q, k, v, is_causal=args.causal)
    else:
        from evo_launch import ExportedKernel

        kernel = ExportedKernel(args.export)
        genome_problem = kernel.launch_json.get("problem", {})
        expected = {"B": b, "H": h, "S_q": s, "S_kv": s, "D": d, "CAUSAL": int(args.causal)}
        for name, value in expected.items():
            if name in genome_problem and genome_problem[name] != value:
                raise SystemExit(f"attention-once: the export was made for {name}="
                                 f"{genome_problem[name]}, not {value}")
        o = torch.empty_like(q)
        launch = kernel.bind({"Q": q, "K": k, "V": v, "O": o})
        for _ in range(args.launches):
            launch()
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
