#!/usr/bin/env python3
"""Energy per call at the GPU's own clocks: evo exports and cuDNN side by side, alternating.

Each kernel runs as a CUDA graph of 20 calls, replayed back to back for --seconds after a warm-up
of as long; NVML's energy counter, read before and after, gives joules per call, and the SM clock
and power are sampled every 20 ms while the replays run. Thirty-sixth session, issue 15: whether
sdpa_hopper loses to cuDNN under the 700 W limit by drawing more energy for the same work.
  energy.py --shape 2,16,4096,256 [--causal] [--dtype bf16] --export DIR [DIR ...] [--rounds 2]
"""
import argparse
import ctypes
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../scripts"))


class Nvml:
    def __init__(self):
        self.lib = ctypes.CDLL("libnvidia-ml.so.1")
        assert self.lib.nvmlInit_v2() == 0
        self.handle = ctypes.c_void_p()
        assert self.lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(self.handle)) == 0

    def energy_mj(self):
        value = ctypes.c_ulonglong()
        assert self.lib.nvmlDeviceGetTotalEnergyConsumption(self.handle, ctypes.byref(value)) == 0
        return value.value

    def sm_mhz(self):
        value = ctypes.c_uint()
        assert self.lib.nvmlDeviceGetClockInfo(self.handle, 1, ctypes.byref(value)) == 0
        return value.value

    def power_w(self):
        value = ctypes.c_uint()
        assert self.lib.nvmlDeviceGetPowerUsage(self.handle, ctypes.byref(value)) == 0
        return value.value / 1000.0


def measure(torch, nvml, launch, seconds):
    graph = torch.cuda.CUDAGraph()
    for _ in range(3):
        launch()
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        for _ in range(20):
            launch()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    graph.replay()
    end.record()
    end.synchronize()
    replays = max(10, int(seconds * 1000 / start.elapsed_time(end)))
    for _ in range(replays):  # warm-up to the steady clock
        graph.replay()
    torch.cuda.synchronize()
    joules0 = nvml.energy_mj()
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    clocks, powers = [], []
    while not end.query():
        clocks.append(nvml.sm_mhz())
        powers.append(nvml.power_w())
        time.sleep(0.02)
    end.synchronize()
    joules = (nvml.energy_mj() - joules0) / 1000.0
    calls = replays * 20
    return (start.elapsed_time(end) * 1000.0 / calls, joules / calls * 1000.0,
            statistics.median(clocks) if clocks else 0, statistics.median(powers) if powers else 0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", required=True)
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--dtype", choices=["fp16", "bf16"], default="fp16")
    parser.add_argument("--export", nargs="*", default=[])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    b, h, s, d = (int(x) for x in args.shape.split(","))
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from evo_launch import ExportedKernel

    dtype = torch.float16 if args.dtype == "fp16" else torch.bfloat16
    q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=dtype) for _ in range(3))
    o = torch.empty_like(q)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=args.causal)
    launchers = {}
    for folder in args.export:
        launch = ExportedKernel(folder).bind({"Q": q, "K": k, "V": v, "O": o})
        launch()
        torch.cuda.synchronize()
        error = (o.float() - expected.float()).abs().max().item()
        print(f"{folder}: max abs error against SDPA {error:.6f}", flush=True)
        launchers[os.path.basename(folder.rstrip("/"))] = launch

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            F.scaled_dot_product_attention(q, k, v, is_causal=args.causal)
    launchers["cuDNN"] = cudnn
    flops = 4 * b * h * s * s * d / (2 if args.causal else 1)
    nvml = Nvml()
    print(f"{args.shape} causal={int(args.causal)} {args.dtype}: us per call, mJ per call, "
          f"TFLOP/s, TFLOP per kJ, median SM MHz, median W")
    for round_ in range(args.rounds):
        for name, launch in launchers.items():
            us, mj, mhz, watts = measure(torch, nvml, launch, args.seconds)
            print(f"  round {round_ + 1} {name:28s} {us:9.2f} us {mj:8.2f} mJ "
                  f"{flops / us / 1e6:7.1f} TF {flops / mj / 1e9:6.3f} TFLOP/J "
                  f"{mhz:6.0f} MHz {watts:6.1f} W", flush=True)


if __name__ == "__main__":
    main()
