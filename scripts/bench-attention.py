#!/usr/bin/env python3
"""evo's best kernel beside PyTorch's flash attention, cuDNN and FlexAttention, on the GPU here.

For each shape it runs `evo run` (resuming the shape's database when one is there), exports the
best elite, launches its cubin through the CUDA driver (scripts/evo_launch.py) and times it,
torch flash (FlashAttention-2), cuDNN and FlexAttention (torch.compile of flex_attention, with a
block mask when causal) the same way, in the same process: 20 back-to-back calls captured in a CUDA graph, the graph
replayed back to back for at least 100 ms after a warm-up as long, each replay timed with CUDA
events, the median over replays divided by 20. Before timing, evo's output is checked against
PyTorch's math backend in fp32. Beside evo's time it prints the kernel's score stored by the
search, and evo's own performance gate on it (`evo bench`) right after the graph was timed, with
the SM clock the gate recorded.

With several --template names each shape is searched for each, and the table reports the
fastest template's best (its name leads the knobs column). --dtype bf16 searches the templates
that take bf16 (problem parameter BF16) and skips the others.

Needs PyTorch (on the H100 machine).
  scripts/bench-attention.py --evo build-bundle/evo --budget 60 --work runs/bench
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from evo_launch import ExportedKernel  # noqa: E402

# The shapes of ../shared/anchors.md: (B, H, S, D, causal).
ANCHOR_SHAPES = [
    (1, 8, 512, 64, False), (1, 8, 512, 64, True),
    (2, 8, 512, 64, False), (2, 8, 512, 64, True),
    (2, 8, 2048, 64, False), (2, 8, 2048, 64, True),
    (2, 8, 2048, 128, False), (2, 8, 2048, 128, True),
    (8, 16, 1024, 64, False),
    (4, 16, 4096, 128, False), (4, 16, 4096, 128, True),
    (4, 16, 4096, 64, False),
    (1, 16, 16384, 128, False),
]

CALLS_PER_GRAPH = 20
REPLAYS = 30  # at the least
SUSTAIN_MS = 100  # the warm-up, and the timed replays at the least


def parse_shape(text):
    parts = text.split(",")
    causal = parts[-1] == "causal"
    if causal:
        parts = parts[:-1]
    if len(parts) != 4:
        raise SystemExit(f"bench-attention: shape '{text}' is not B,H,S,D[,causal]")
    b, h, s, d = (int(p) for p in parts)
    return (b, h, s, d, causal)


def shape_name(shape, dtype="fp16"):
    b, h, s, d, causal = shape
    return f"{b}x{h}x{s}x{d}" + ("_causal" if causal else "") + ("" if dtype == "fp16" else "_" + dtype)


def evo(args, *command):
    result = subprocess.run([args.evo, *command], capture_output=True, text=True)
    if result.returncode != 0:
        sys.stderr.write(result.stderr)
        raise SystemExit(f"bench-attention: evo {' '.join(command)} exited {result.returncode}")
    return result.stdout


def search_and_export(args, template, shape):
    """Runs (or resumes) evo's search of the template for the shape; returns the exported folder."""
    b, h, s, d, causal = shape
    # The first template keeps the plain names, so databases of earlier runs stay usable.
    name = shape_name(shape, args.dtype) + ("" if template == args.template[0] else "_" + template)
    db = os.path.join(args.work, name + ".db")
    command = ["run", "--template", template, "--shape", f"{b},{h},{s},{d}",
               "--elite", "3", "--budget", str(args.budget), "--db", db]
    if causal:
        command.append("--causal")
    if args.dtype == "bf16":
        command += ["--problem", "BF16=1"]
    if args.time_limit:
        command += ["--time-limit", args.time_limit]
    if not args.no_search:
        evo(args, *command)
    elif not os.path.exists(db):
        print(f"  {name}: no database, so {template} is left out of this shape", flush=True)
        return None, None
    elite = json.loads(evo(args, "show", "elite", "--db", db, "--json"))["elite"]
    if not elite:
        raise SystemExit(f"bench-attention: the run for {name} has no elite")
    folder = os.path.join(args.work, name)
    evo(args, "export", str(elite[0]["id"]), "--out", folder, "--db", db)
    return folder, elite[0]


def time_graph(torch, launch):
    """Median per-call device time (µs) of back-to-back launches replayed from a CUDA graph.

    The replays run back to back for at least SUSTAIN_MS after as long a warm-up, each between
    two events and without waiting for the host, so the GPU runs as in sustained use."""
    for _ in range(3):
        launch()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(CALLS_PER_GRAPH):
            launch()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    graph.replay()
    end.record()
    end.synchronize()
    replay_ms = max(start.elapsed_time(end), 1e-3)
    replays = max(REPLAYS, math.ceil(SUSTAIN_MS / replay_ms))
    for _ in range(math.ceil(SUSTAIN_MS / replay_ms)):
        graph.replay()
    events = [torch.cuda.Event(enable_timing=True) for _ in range(replays + 1)]
    events[0].record()
    for i in range(replays):
        graph.replay()
        events[i + 1].record()
    events[-1].synchronize()
    times = [events[i].elapsed_time(events[i + 1]) * 1000.0 / CALLS_PER_GRAPH
             for i in range(replays)]
    return statistics.median(times)


def evo_launcher(folder, q, k, v, o):
    kernel = ExportedKernel(folder)
    launch = kernel.bind({"Q": q, "K": k, "V": v, "O": o})
    return launch, kernel.launch_json


def gate_now(args, template, shape, genome):
    """evo's own performance gate on the same kernel, right after the graph was timed: its
    median (µs) and the SM clock it recorded."""
    b, h, s, d, causal = shape
    command = ["bench", "--template", template, "--shape", f"{b},{h},{s},{d}", "--json"]
    if causal:
        command.append("--causal")
    if args.dtype == "bf16":
        command += ["--problem", "BF16=1"]
    for knob, value in sorted(genome.items()):
        command += ["--set", f"{knob}={value}"]
    verdict = json.loads(evo(args, *command))["gpus"][0]
    timing = verdict.get("timing") or {}
    return timing.get("median_us"), timing.get("sm_clock_mhz", 0)


def gate(row):
    """The gate's own figures for a row: its median, its ratio to the graph time, its clock."""
    score = f"{row['score_us']:>9.2f}" if row.get("score_us") else f"{'-':>9}"
    if not row.get("gate_us"):
        return f"{score} {'-':>9} {'-':>8} {'-':>8}"
    clock = f"{row['gate_sm_clock_mhz']:.0f}" if row.get("gate_sm_clock_mhz") else "-"
    return f"{score} {row['gate_us']:>9.2f} {row['gate_us'] / row['evo_us']:>8.3f} {clock:>8}"


def flex_attention_runner(torch):
    """A timer of FlexAttention on the same inputs: flex_attention compiled by torch.compile
    (Triton), with a block mask when causal, checked against the math backend first. Returns
    None for a shape it cannot run, saying why."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    # Every shape is a new specialization; past the default limit (8) dynamo falls back to eager.
    torch._dynamo.config.cache_size_limit = 256
    if hasattr(torch._dynamo.config, "recompile_limit"):
        torch._dynamo.config.recompile_limit = 256
    compiled = torch.compile(flex_attention, dynamic=False)

    def causal_mask(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx

    def run(q, k, v, causal, expected):
        b, h, s, _ = q.shape
        mask = create_block_mask(causal_mask, None, None, s, s, device="cuda") if causal else None
        try:
            out = compiled(q, k, v, block_mask=mask)
        except Exception as error:  # noqa: BLE001 (a peer that cannot run is reported, not fatal)
            print(f"  FlexAttention cannot run {tuple(q.shape)}: {error}", flush=True)
            return None
        torch.cuda.synchronize()
        error = (out.float() - expected).abs().max().item()
        if not math.isfinite(error) or error > 0.05:
            raise SystemExit(f"bench-attention: FlexAttention is off by {error}")
        return time_graph(torch, lambda: compiled(q, k, v, block_mask=mask))

    return run


def flops(shape):
    b, h, s, d, causal = shape
    return 4.0 * b * h * s * s * d / (2.0 if causal else 1.0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evo", default="build/evo", help="the evo binary")
    parser.add_argument("--template", nargs="+", default=["sdpa_fp16"],
                        help="templates to search; each shape reports the fastest one's best")
    parser.add_argument("--budget", type=int, default=60, help="evo run --budget per shape")
    parser.add_argument("--time-limit", default="", help="evo run --time-limit per shape")
    parser.add_argument("--work", default="runs/bench", help="databases and exports")
    parser.add_argument("--shapes", nargs="*", help="B,H,S,D[,causal] (default: anchors.md)")
    parser.add_argument("--no-search", action="store_true",
                        help="use the databases as they are, run no search (a template "
                        "without a database for a shape is left out of that shape)")
    parser.add_argument("--json", help="also write the rows to this JSON file")
    parser.add_argument("--dtype", choices=["fp16", "bf16"], default="fp16",
                        help="Q, K, V and O in fp16 or bf16")
    parser.add_argument("--no-flex", action="store_true", help="leave FlexAttention out")
    args = parser.parse_args()
    shapes = [parse_shape(t) for t in args.shapes] if args.shapes else ANCHOR_SHAPES
    os.makedirs(args.work, exist_ok=True)
    if args.dtype == "bf16":
        known = {t["name"]: t for t in json.loads(evo(args, "templates", "--json"))}
        taking = [t for t in args.template
                  if t in known and any(p["name"] == "BF16" for p in known[t]["problem"])]
        for t in args.template:
            if t not in taking:
                print(f"bench-attention: {t} takes no bf16 (no problem parameter BF16); skipped")
        if not taking:
            raise SystemExit("bench-attention: none of the templates takes bf16")
        args.template = taking

    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F

    flex = None if args.no_flex else flex_attention_runner(torch)
    dtype = torch.float16 if args.dtype == "fp16" else torch.bfloat16
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"cuDNN {torch.backends.cudnn.version()}, {args.dtype}; per-call medians "
          f"of {CALLS_PER_GRAPH} calls in a CUDA graph, {REPLAYS} replays", flush=True)
    rows = []
    for shape in shapes:
        b, h, s, d, causal = shape
        generator = torch.Generator(device="cuda").manual_seed(2026)
        q, k, v = (torch.randn((b, h, s, d), device="cuda", dtype=dtype,
                               generator=generator) for _ in range(3))
        with sdpa_kernel(SDPBackend.MATH):
            expected = F.scaled_dot_product_attention(q.float(), k.float(), v.float(),
                                                      is_causal=causal)
        row = None
        for template in args.template:
            folder, elite = search_and_export(args, template, shape)
            if folder is None:
                continue
            o = torch.empty_like(q)
            launch, launch_json = evo_launcher(folder, q, k, v, o)
            launch()
            torch.cuda.synchronize()
            error = (o.float() - expected).abs().max().item()
            if not math.isfinite(error) or error > (0.02 if args.dtype == "fp16" else 0.05):
                raise SystemExit(f"bench-attention: evo's {template} kernel for "
                                 f"{shape_name(shape)} is off by {error} from PyTorch's math "
                                 "backend")
            evo_us = time_graph(torch, launch)
            if len(args.template) > 1:
                print(f"  {shape_name(shape)}: {template} {evo_us:.2f} us", flush=True)
            if row is None or evo_us < row["evo_us"]:
                gate_us, gate_mhz = gate_now(args, template, shape, launch_json["genome"])
                row = {"shape": [b, h, s, d], "causal": causal, "evo_template": template,
                       "evo_candidate": launch_json["candidate"],
                       "evo_genome": launch_json["genome"], "evo_max_abs_error": error,
                       "evo_us": evo_us, "score_us": elite.get("score_us"), "gate_us": gate_us,
                       "gate_sm_clock_mhz": gate_mhz}
        if row is None:
            raise SystemExit(f"bench-attention: no template has a database for "
                             f"{shape_name(shape, args.dtype)}")
        for key, backend in (("flash_us", SDPBackend.FLASH_ATTENTION),
                             ("cudnn_us", SDPBackend.CUDNN_ATTENTION)):
            with sdpa_kernel(backend):
                row[key] = time_graph(
                    torch, lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
        row["flex_us"] = flex(q, k, v, causal, expected) if flex else None
        rows.append(row)
        flex_text = f", FlexAttention {row['flex_us']:.2f} us" if row["flex_us"] else ""
        print(f"  {shape_name(shape, args.dtype)}: evo {row['evo_us']:.2f} us, flash "
              f"{row['flash_us']:.2f} us, cuDNN {row['cudnn_us']:.2f} us{flex_text}", flush=True)

    header = (f"{'B,H,S,D':<14} {'causal':<6} {'evo us':>9} {'evo TF':>7} {'flash us':>9} "
              f"{'flash TF':>8} {'cuDNN us':>9} {'cuDNN TF':>8} {'flex us':>9} {'flex TF':>8} "
              f"{'vs flash':>8} {'vs cuDNN':>8} {'vs flex':>8}"
              f" {'score us':>9} {'gate us':>9} {'gate/evo':>8} {'gate MHz':>8}  evo's knobs")
    print(header)
    for row in rows:
        shape = (*row["shape"], row["causal"])
        tf = lambda us: flops(shape) / (us * 1e-6) / 1e12  # noqa: E731
        knobs = " ".join(f"{k}={v}" for k, v in sorted(row["evo_genome"].items()))
        if len(args.template) > 1:
            knobs = row["evo_template"] + " " + knobs
        flex_us = row["flex_us"]
        flex_cols = (f"{flex_us:>9.2f} {tf(flex_us):>8.1f}" if flex_us else f"{'-':>9} {'-':>8}")
        vs_flex = f"{flex_us / row['evo_us']:>7.2f}x" if flex_us else f"{'-':>8}"
        print(f"{','.join(map(str, row['shape'])):<14} {'yes' if row['causal'] else 'no':<6} "
              f"{row['evo_us']:>9.2f} {tf(row['evo_us']):>7.1f} {row['flash_us']:>9.2f} "
              f"{tf(row['flash_us']):>8.1f} {row['cudnn_us']:>9.2f} {tf(row['cudnn_us']):>8.1f} "
              f"{flex_cols} "
              f"{row['flash_us'] / row['evo_us']:>7.2f}x {row['cudnn_us'] / row['evo_us']:>7.2f}x"
              f" {vs_flex} {gate(row)}  {knobs}")
    print("vs flash, vs cuDNN, vs flex: the peer's time over evo's (above 1: evo is faster); "
          "flex: FlexAttention, torch.compile of flex_attention (a block mask when causal); "
          "score us: the "
          "kernel's score stored by the search; gate us: evo bench's median for it right after "
          "the graph was timed, gate/evo: that over the CUDA-graph time, gate MHz: the SM clock "
          "the gate recorded")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out, indent=2)


if __name__ == "__main__":
    main()
