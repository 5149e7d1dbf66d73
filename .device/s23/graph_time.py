#!/usr/bin/env python3
"""Times exported sdpa_hopper kernels as bench-attention does (back-to-back calls replayed from a
CUDA graph, sustained), interleaved over rounds, with the SM clock and power that NVML reads while
each runs. Usage: graph_time.py B,H,S,D ROUNDS LABEL=EXPORT..."""
import importlib.util, os, statistics, sys, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(HERE, "..", "..", "scripts")
sys.path.insert(0, SCRIPTS)
spec = importlib.util.spec_from_file_location("bench_attention", os.path.join(SCRIPTS, "bench-attention.py"))
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)
import subprocess
import torch
from evo_launch import ExportedKernel
bench.SUSTAIN_MS = int(os.environ.get("SUSTAIN_MS", bench.SUSTAIN_MS))
try:
    import pynvml
    pynvml.nvmlInit()
    gpu = pynvml.nvmlDeviceGetHandleByIndex(0)
    def clock_and_power():
        return (pynvml.nvmlDeviceGetClockInfo(gpu, pynvml.NVML_CLOCK_SM),
                pynvml.nvmlDeviceGetPowerUsage(gpu) / 1000.0)
except ImportError:
    def clock_and_power():
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,power.draw",
                              "--format=csv,noheader,nounits", "-i", "0"],
                             capture_output=True, text=True).stdout
        c, p = out.split(",")
        return float(c), float(p)

b, h, s, d = map(int, sys.argv[1].split(","))
rounds = int(sys.argv[2])
kernels = [arg.split("=", 1) for arg in sys.argv[3:]]
q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.float16) for _ in range(3))
flops = 4.0 * b * h * s * s * d


def sampled(run):
    """run() while a thread samples the SM clock (MHz) and power (W) every 20 ms."""
    samples, done = [], threading.Event()
    def sample():
        while not done.is_set():
            samples.append(clock_and_power())
            time.sleep(0.02)
    thread = threading.Thread(target=sample)
    thread.start()
    result = run()
    done.set()
    thread.join()
    return result, statistics.median(c for c, _ in samples), statistics.median(p for _, p in samples)


launches = {}
for label, folder in kernels:
    o = torch.empty_like(q)
    launches[label] = (ExportedKernel(folder).bind({"Q": q, "K": k, "V": v, "O": o}), o)
reference = None
for label, (launch, o) in launches.items():
    launch()
    torch.cuda.synchronize()
    if reference is None:
        reference = o.clone()
    print(f"{label}: max abs difference from {kernels[0][0]}: {(o - reference).abs().max().item():.3g}")
for r in range(rounds):
    for label, (launch, _) in launches.items():
        us, mhz, watts = sampled(lambda: bench.time_graph(torch, launch))
        print(f"round {r + 1} {label:>12}: {us:8.2f} us  {flops / us / 1e6:6.1f} TF  {mhz:5.0f} MHz  "
              f"{watts:5.0f} W  {us * mhz / 1e3:8.0f} kcycles")
