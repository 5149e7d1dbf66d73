#!/usr/bin/env python3
"""evo's best RMSNorm beside PyTorch's own (eager and torch.compile), on the GPU here.

For each shape (ROWS x COLS) and dtype it runs `evo run` on the rmsnorm template (resuming the
shape's database when one is there), exports the best elite, launches its cubin through the CUDA
driver (scripts/evo_launch.py) and times it, torch.nn.functional.rms_norm eager and the same call
compiled by torch.compile, the same way and in the same process as scripts/bench-attention.py
times attention (its time_graph: 20 back-to-back calls captured in a CUDA graph, the graph
replayed back to back for at least 100 ms after a warm-up as long, each replay timed with CUDA
events, the median over replays divided by 20). Before timing, every output is checked against
rms_norm computed in fp32. Beside evo's time it prints the score stored by the search, and evo's
own performance gate on it (`evo bench`) right after the graph was timed.

Each kernel gets its time and the bandwidth it reaches: x read and y written once, the weight
read once, over the median time, in GB/s and as a share of --peak-tbps (H100 SXM HBM3: 3.35 TB/s).
Shapes whose x and y fit in L2 are marked: back-to-back calls may then read part of them from L2.

Needs PyTorch (on the H100 machine).
  scripts/bench-rmsnorm.py --evo build-bundle/evo --budget 60
  scripts/bench-rmsnorm.py --evo build-bundle/evo --dtype bf16 --shapes 4096x4096 65536x8192
  scripts/bench-rmsnorm.py --evo build-bundle/evo --no-search --json runs/rmsnorm.json
"""

import argparse
import importlib.util
import json
import math
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from evo_launch import ExportedKernel  # noqa: E402


def _bench_attention():
    """scripts/bench-attention.py as a module, for its timing (one method for both tables)."""
    spec = importlib.util.spec_from_file_location("bench_attention",
                                                  os.path.join(HERE, "bench-attention.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench_attention = _bench_attention()
time_graph = bench_attention.time_graph
first_line = bench_attention.first_line

# Rows (tokens) x columns (hidden sizes) of LLM layers: 1k to 8k hidden, 4k to 64k tokens.
DEFAULT_SHAPES = ["4096x1024", "4096x4096", "4096x8192", "16384x4096", "65536x1024",
                  "65536x4096", "65536x8192"]


def parse_shape(text):
    parts = text.lower().split("x")
    try:
        rows, cols = (int(p) for p in parts)
    except ValueError:
        raise SystemExit(f"bench-rmsnorm: shape '{text}' is not ROWSxCOLS") from None
    if rows < 1 or cols < 1:
        raise SystemExit(f"bench-rmsnorm: shape '{text}': both sizes must be at least 1")
    return rows, cols


def evo(args, *command):
    result = subprocess.run([args.evo, *command], capture_output=True, text=True)
    if result.returncode != 0:
        sys.stderr.write(result.stderr)
        raise SystemExit(f"bench-rmsnorm: evo {' '.join(command)} exited {result.returncode}")
    return result.stdout


def problem_options(args, rows, cols, dtype):
    options = ["--problem", f"ROWS={rows}", "--problem", f"COLS={cols}",
               "--problem", f"EPS_INV={args.eps_inv}"]
    if dtype == "bf16":
        options += ["--problem", "BF16=1"]
    return options


def shape_name(rows, cols, dtype, eps_inv):
    """The name of a shape's database and export folder, e.g. rmsnorm_4096x4096_fp16."""
    eps = "" if eps_inv == 1000000 else f"_epsinv{eps_inv}"
    return f"rmsnorm_{rows}x{cols}_{dtype}{eps}"


def search_and_export(args, rows, cols, dtype):
    """Runs (or resumes) evo's search for the shape; returns the export folder and the elite."""
    name = shape_name(rows, cols, dtype, args.eps_inv)
    db = os.path.join(args.work, name + ".db")
    if not args.no_search:
        command = ["run", "--template", "rmsnorm", *problem_options(args, rows, cols, dtype),
                   "--elite", "3", "--budget", str(args.budget), "--db", db]
        if args.time_limit:
            command += ["--time-limit", args.time_limit]
        evo(args, *command)
    elif not os.path.exists(db):
        return None, None
    elite = json.loads(evo(args, "show", "elite", "--db", db, "--json"))["elite"]
    if not elite:
        raise SystemExit(f"bench-rmsnorm: the run for {name} has no elite")
    folder = os.path.join(args.work, name)
    evo(args, "export", str(elite[0]["id"]), "--out", folder, "--db", db)
    return folder, elite[0]


def gate_now(args, rows, cols, dtype, genome):
    """evo's own performance gate on the same kernel, right after the graph was timed: its
    median (µs) and the SM clock it recorded."""
    command = ["bench", "--template", "rmsnorm", *problem_options(args, rows, cols, dtype),
               "--json"]
    for knob, value in sorted(genome.items()):
        command += ["--set", f"{knob}={value}"]
    verdict = json.loads(evo(args, *command))["gpus"][0]
    timing = verdict.get("timing") or {}
    return timing.get("median_us"), timing.get("sm_clock_mhz", 0)


def within(out, expected, tolerance):
    """The largest |out - expected| / (1 + |expected|), and whether it is within tolerance."""
    error = ((out.float() - expected).abs() / (1 + expected.abs())).max().item()
    return error, math.isfinite(error) and error <= tolerance


KERNELS = (("evo", "evo_us"), ("eager", "eager_us"), ("compile", "compile_us"))


def print_table(args, rows, l2_bytes):
    notes = []

    def na(reason):
        if reason not in notes:
            notes.append(reason)
        return f"n/a[{notes.index(reason) + 1}]"

    header = f"{'ROWSxCOLS':<12} {'dtype':<5}"
    for label, _ in KERNELS:
        header += f" {label + ' us':>10} {label + ' GB/s':>12} {label + ' %pk':>11}"
    header += (f" {'vs eager':>8} {'vs compile':>10} {'score us':>9} {'gate us':>9}"
               f" {'gate/evo':>8} {'gate MHz':>8}  evo's knobs")
    print(header)
    for row in rows:
        line = f"{row['shape']:<12} {row['dtype']:<5}"
        for label, key in KERNELS:
            us = row.get(key)
            if us:
                gbps = row["bytes"] / (us * 1e-6) / 1e9
                line += (f" {us:>10.2f} {gbps:>12.1f}"
                         f" {100.0 * gbps / (args.peak_tbps * 1000):>10.1f}%")
            else:
                why = row.get(key.replace("_us", "_na"))
                line += f" {na(why) if why else '-':>10} {'-':>12} {'-':>11}"
        evo_us = row.get("evo_us")
        for key, width in (("eager_us", 8), ("compile_us", 10)):
            peer = row.get(key)
            line += f" {peer / evo_us:>{width - 1}.2f}x" if peer and evo_us else f" {'-':>{width}}"
        score = f"{row['score_us']:>9.2f}" if row.get("score_us") else f"{'-':>9}"
        if row.get("gate_us") and evo_us:
            clock = f"{row['gate_sm_clock_mhz']:.0f}" if row.get("gate_sm_clock_mhz") else "-"
            gate = f"{row['gate_us']:>9.2f} {row['gate_us'] / evo_us:>8.3f} {clock:>8}"
        else:
            gate = f"{'-':>9} {'-':>8} {'-':>8}"
        knobs = " ".join(f"{k}={v}" for k, v in sorted(row.get("evo_genome", {}).items()))
        print(f"{line} {score} {gate}  {knobs}".rstrip())
    print("vs eager, vs compile: the peer's time over evo's (above 1: evo is faster); eager: "
          "torch.nn.functional.rms_norm; compile: torch.compile of it; GB/s: x read and y "
          "written once and the weight read once, over the median time; %pk: of "
          f"{args.peak_tbps:g} TB/s; score us: the kernel's score stored by the search; gate us: "
          "evo bench's median for it right after the graph was timed, gate/evo: that over the "
          "CUDA-graph time, gate MHz: the SM clock the gate recorded")
    cached = [f"{row['shape']} {row['dtype']}" for row in rows
              if l2_bytes and row["bytes"] <= l2_bytes]
    if cached:
        print(f"{', '.join(cached)}: x and y fit the {l2_bytes / 2**20:.0f} MiB L2, so "
              "back-to-back calls may read part of them from L2 (GB/s past HBM's)")
    for number, reason in enumerate(notes, 1):
        print(f"n/a[{number}]: {reason}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evo", default="build/evo", help="the evo binary")
    parser.add_argument("--budget", type=int, default=60, help="evo run --budget per shape")
    parser.add_argument("--time-limit", default="", help="evo run --time-limit per shape")
    parser.add_argument("--work", default="runs/bench-rmsnorm", help="databases and exports")
    parser.add_argument("--shapes", nargs="*", default=DEFAULT_SHAPES,
                        help="ROWSxCOLS shapes (default: " + " ".join(DEFAULT_SHAPES) + ")")
    parser.add_argument("--dtype", choices=["fp16", "bf16", "both"], default="both",
                        help="x, weight and y in fp16, bf16 or each in turn")
    parser.add_argument("--eps", type=float, default=1e-6,
                        help="epsilon; 1/eps must be an integer (evo's EPS_INV)")
    parser.add_argument("--no-search", action="store_true",
                        help="use the databases as they are, run no search (a shape without "
                        "a database has no evo column)")
    parser.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    parser.add_argument("--json", help="also write the rows to this JSON file")
    parser.add_argument("--peak-tbps", type=float, default=3.35,
                        help="the memory bandwidth the %%pk columns divide by, TB/s "
                        "(default: H100 SXM HBM3, 3.35)")
    args = parser.parse_args()
    shapes = [parse_shape(text) for text in args.shapes]
    args.eps_inv = round(1 / args.eps)
    if args.eps_inv < 1 or abs(1 / args.eps_inv - args.eps) > 1e-9 * args.eps:
        raise SystemExit(f"bench-rmsnorm: 1/eps = {1 / args.eps} is not an integer")
    dtypes = ["fp16", "bf16"] if args.dtype == "both" else [args.dtype]
    os.makedirs(args.work, exist_ok=True)

    import torch
    import torch.nn.functional as F

    torch._dynamo.config.cache_size_limit = 256  # every shape and dtype is a specialization
    if hasattr(torch._dynamo.config, "recompile_limit"):
        torch._dynamo.config.recompile_limit = 256
    eps = args.eps

    def rms_norm(x, w):
        return F.rms_norm(x, (x.shape[-1],), w, eps)

    compiled = None if args.no_compile else torch.compile(rms_norm, dynamic=False)
    l2_bytes = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0)
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}; eps {eps:g}; "
          f"per-call medians of {bench_attention.CALLS_PER_GRAPH} calls in a CUDA graph; "
          f"bandwidth: x and y once, % of {args.peak_tbps:g} TB/s", flush=True)
    rows = []
    for dtype_name in dtypes:
        dtype = torch.float16 if dtype_name == "fp16" else torch.bfloat16
        # fp16 rounds y to 2^-11 relative, bf16 to 2^-8; torch rounds x / rms before the weight
        # multiplies it, evo after, so allow a few roundings.
        tolerance = 4e-3 if dtype_name == "fp16" else 3e-2
        for n_rows, n_cols in shapes:
            name = shape_name(n_rows, n_cols, dtype_name, args.eps_inv)
            generator = torch.Generator(device="cuda").manual_seed(2026)
            x = torch.randn((n_rows, n_cols), device="cuda", dtype=dtype, generator=generator)
            w = torch.randn((n_cols,), device="cuda", dtype=dtype, generator=generator)
            expected = F.rms_norm(x.float(), (n_cols,), w.float(), eps)
            element = x.element_size()
            row = {"shape": f"{n_rows}x{n_cols}", "dtype": dtype_name,
                   "device": torch.cuda.get_device_name(),
                   "problem": {"ROWS": n_rows, "COLS": n_cols, "EPS_INV": args.eps_inv,
                               **({"BF16": 1} if dtype_name == "bf16" else {})},
                   "bytes": float(element * (2 * n_rows * n_cols + n_cols)), "evo_us": None}
            folder, elite = search_and_export(args, n_rows, n_cols, dtype_name)
            if folder is None:
                row["evo_na"] = "no database (--no-search)"
            else:
                kernel = ExportedKernel(folder)
                made_for = kernel.launch_json.get("problem", {})
                for key, value in row["problem"].items():
                    if key in made_for and made_for[key] != value:
                        raise SystemExit(f"bench-rmsnorm: {folder} was exported for {key}="
                                         f"{made_for[key]}, not {value}")
                y = torch.empty_like(x)
                launch = kernel.bind({"x": x, "weight": w, "y": y})
                launch()
                torch.cuda.synchronize()
                error, ok = within(y, expected, tolerance)
                if not ok:
                    raise SystemExit(f"bench-rmsnorm: evo's kernel for {name} is off by {error} "
                                     "from rms_norm in fp32")
                row["evo_us"] = time_graph(torch, launch)
                genome = kernel.launch_json.get("genome", {})
                gate_us, gate_mhz = gate_now(args, n_rows, n_cols, dtype_name, genome)
                row.update({"evo_candidate": kernel.launch_json.get("candidate"),
                            "evo_genome": genome, "evo_error": error,
                            "score_us": elite.get("score_us"), "gate_us": gate_us,
                            "gate_sm_clock_mhz": gate_mhz})
            peers = [("eager_us", "eager", rms_norm)]
            if compiled:
                peers.append(("compile_us", "torch.compile", compiled))
            for key, label, function in peers:
                try:
                    out = function(x, w)
                    torch.cuda.synchronize()
                    error, ok = within(out, expected, tolerance)
                    if not ok:
                        row[key.replace("_us", "_na")] = (f"{label}: output off rms_norm in "
                                                          f"fp32 by {error:.3g}")
                        continue
                    row[key] = time_graph(torch, lambda f=function: f(x, w))
                except Exception as caught:  # noqa: BLE001 (a peer that fails is reported)
                    row[key.replace("_us", "_na")] = f"{label}: {first_line(caught)}"
            rows.append(row)
            del x, w, expected
            print(f"  {name}: " + ", ".join(
                f"{label} " + (f"{row[key]:.2f} us" if row.get(key) else "n/a")
                for label, key in KERNELS if key != "compile_us" or compiled), flush=True)

    print_table(args, rows, l2_bytes)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out, indent=2)


if __name__ == "__main__":
    main()
