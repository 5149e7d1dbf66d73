#!/usr/bin/env python3
"""evo's best kernel beside PyTorch's flash attention, cuDNN and FlexAttention, on the GPU here.

For each shape it runs `evo run` (resuming the shape's database when one is there), exports the
best elite, launches its cubin through the CUDA driver (scripts/evo_launch.py) and times it,
torch flash (FlashAttention-2), cuDNN and FlexAttention (torch.compile of flex_attention, with a
block mask when causal) the same way, in the same process: 20 back-to-back calls captured in a CUDA graph, the graph
replayed back to back for at least 100 ms after a warm-up as long, each replay timed with CUDA
events, the median over replays divided by 20. Before timing, evo's output and each peer's are
checked against PyTorch's math backend in fp32. Beside evo's time it prints the kernel's score
stored by the search, and evo's own performance gate on it (`evo bench`) right after the graph
was timed, with the SM clock the gate recorded.

Each kernel gets its time, TFLOP/s and the bandwidth it reaches: Q, K and V read once and O
written, over the median time, in TB/s and as a share of --peak-tbps (H100 SXM HBM3: 3.35). A
peer that refuses a shape (a backend's constraint, a compile error, an output off the math
backend) is printed n/a, with its reason under the table.

Shapes are B,H,S,D or B,H,S_q,S_kv,D, with ",causal" appended for a causal mask; H:H_kv in the
H field is grouped-query attention (q [B,H,S_q,D], k and v [B,H_kv,S_kv,D]; torch runs it with
enable_gqa=True, evo with --problem H_kv=..., and templates without the problem parameter H_kv
are left out of such shapes). `--shapes decode` is the decode table of ../shared/anchors.md,
`--shapes anchors` (the default) its 13 shapes; presets and shapes mix.

With several --template names each shape is searched for each, and the table reports the
fastest template's best (its name leads the knobs column). --dtype bf16 searches the templates
that take bf16 (problem parameter BF16) and skips the others.

--outlier-keys EVERY:SCALE multiplies one row in EVERY of K (a random draw per row) by SCALE
after the N(0,1) draw, for every kernel alike, as the correctness gate's outlier keys do (32:12):
some scores then jump far above those before them. A kernel whose speed depends on the data
(sdpa_hopper's LAGGED_MAX) shows there what such inputs cost it; the peers' speed should not
move. The default inputs are N(0,1) throughout, as evo's own timings are.

Needs PyTorch (on the H100 machine).
  scripts/bench-attention.py --evo build-bundle/evo --budget 60 --work runs/bench
  scripts/bench-attention.py --evo build-bundle/evo --template sdpa_hopper --shapes decode
  scripts/bench-attention.py --evo build-bundle/evo --shapes 64,32:8,1,8192,128 2,8,2048,128,causal
"""

import argparse
import collections
import json
import math
import os
import re
import statistics
import subprocess
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from evo_launch import ExportedKernel  # noqa: E402

# One attention problem: q [b, h, s_q, d], k and v [b, h_kv, s_kv, d].
Shape = collections.namedtuple("Shape", "b h h_kv s_q s_kv d causal")


def square(b, h, s, d, causal=False):
    return Shape(b, h, h, s, s, d, causal)


# The shapes of ../shared/anchors.md's first tables.
ANCHOR_SHAPES = [
    square(1, 8, 512, 64), square(1, 8, 512, 64, True),
    square(2, 8, 512, 64), square(2, 8, 512, 64, True),
    square(2, 8, 2048, 64), square(2, 8, 2048, 64, True),
    square(2, 8, 2048, 128), square(2, 8, 2048, 128, True),
    square(8, 16, 1024, 64),
    square(4, 16, 4096, 128), square(4, 16, 4096, 128, True),
    square(4, 16, 4096, 64),
    square(1, 16, 16384, 128),
]

# Its decode and grouped-query table (fp16, D=128, not causal): B, H, H_kv, S_q, S_kv.
DECODE_SHAPES = [
    Shape(1, 16, 16, 1, 4096, 128, False),
    Shape(16, 32, 32, 1, 4096, 128, False),
    Shape(64, 32, 8, 1, 8192, 128, False),
    Shape(8, 32, 8, 16, 8192, 128, False),
    Shape(1, 32, 8, 1, 32768, 128, False),
]

PRESETS = {"anchors": ANCHOR_SHAPES, "decode": DECODE_SHAPES}

CALLS_PER_GRAPH = 20
REPLAYS = 30  # at the least
SUSTAIN_MS = 100  # the warm-up, and the timed replays at the least
PEER_TOLERANCE = 0.05  # the largest absolute error a peer's output may show against fp32 math


def parse_shape(text):
    """B,H,S,D or B,H,S_q,S_kv,D, an optional ",causal" after, and H:H_kv for grouped heads."""
    usage = (f"bench-attention: shape '{text}' is not B,H[:H_kv],S,D or B,H[:H_kv],S_q,S_kv,D"
             f"[,causal] nor a preset ({', '.join(PRESETS)})")
    parts = [p.strip() for p in text.split(",")]
    causal = parts[-1] == "causal"
    if causal:
        parts = parts[:-1]
    heads = parts[1].split(":") if len(parts) > 1 else []
    if len(parts) not in (4, 5) or len(heads) not in (1, 2):
        raise SystemExit(usage)
    try:
        b, d = int(parts[0]), int(parts[-1])
        h, h_kv = int(heads[0]), int(heads[-1])
        s_q, s_kv = int(parts[2]), int(parts[-2])
    except ValueError:
        raise SystemExit(usage) from None
    if min(b, h, h_kv, s_q, s_kv, d) < 1:
        raise SystemExit(f"bench-attention: shape '{text}': every size must be at least 1")
    if h % h_kv != 0:
        raise SystemExit(f"bench-attention: shape '{text}': H={h} is not a multiple of H_kv={h_kv}")
    return Shape(b, h, h_kv, s_q, s_kv, d, causal)


def expand_shapes(texts):
    """The --shapes arguments: presets by name, or shapes."""
    shapes = []
    for text in texts or ["anchors"]:
        shapes += PRESETS[text] if text in PRESETS else [parse_shape(text)]
    return shapes


def grouped(shape):
    return shape.h_kv != shape.h


def shape_text(shape, separator=","):
    """The shape as parse_shape reads it (without causal), e.g. 64,32:8,1,8192,128; an ungrouped
    shape with S_q = S_kv keeps the short form B,H,S,D."""
    heads = f"{shape.h}:{shape.h_kv}" if grouped(shape) else str(shape.h)
    lengths = [shape.s_q] if shape.s_q == shape.s_kv else [shape.s_q, shape.s_kv]
    return separator.join([str(shape.b), heads, *map(str, lengths), str(shape.d)])


def shape_name(shape, dtype="fp16"):
    """The name of a shape's database and export folder, e.g. 64x32:8x1x8192x128; shapes of
    B,H,S,D keep the names of earlier runs (4x16x4096x128_causal)."""
    return (shape_text(shape, "x") + ("_causal" if shape.causal else "")
            + ("" if dtype == "fp16" else "_" + dtype))


def evo(args, *command):
    result = subprocess.run([args.evo, *command], capture_output=True, text=True)
    if result.returncode != 0:
        sys.stderr.write(result.stderr)
        raise SystemExit(f"bench-attention: evo {' '.join(command)} exited {result.returncode}")
    return result.stdout


def problem_options(args, shape):
    """evo's options for the shape: --shape, --causal, and --problem for bf16 and grouped heads
    (H_kv only when it differs from H, so templates without H_kv take the other shapes)."""
    evo_shape = [shape.b, shape.h, shape.s_q, shape.d] if shape.s_q == shape.s_kv else [
        shape.b, shape.h, shape.s_q, shape.s_kv, shape.d]
    options = ["--shape", ",".join(map(str, evo_shape))]
    if shape.causal:
        options.append("--causal")
    if args.dtype == "bf16":
        options += ["--problem", "BF16=1"]
    if grouped(shape):
        options += ["--problem", f"H_kv={shape.h_kv}"]
    return options


def search_and_export(args, template, shape):
    """Runs (or resumes) evo's search of the template for the shape; returns the exported folder."""
    # The first template keeps the plain names, so databases of earlier runs stay usable.
    name = shape_name(shape, args.dtype) + ("" if template == args.template[0] else "_" + template)
    db = os.path.join(args.work, name + ".db")
    command = ["run", "--template", template, *problem_options(args, shape),
               "--elite", "3", "--budget", str(args.budget), "--db", db]
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


def evo_launcher(folder, shape, q, k, v, o):
    kernel = ExportedKernel(folder)
    made_for = kernel.launch_json.get("problem", {})
    expected = {"B": shape.b, "H": shape.h, "H_kv": shape.h_kv, "S_q": shape.s_q,
                "S_kv": shape.s_kv, "D": shape.d, "CAUSAL": int(shape.causal)}
    for name, value in expected.items():
        if name in made_for and made_for[name] != value:
            raise SystemExit(f"bench-attention: {folder} was exported for {name}="
                             f"{made_for[name]}, not {value}")
    launch = kernel.bind({"Q": q, "K": k, "V": v, "O": o})
    return launch, kernel.launch_json


def gate_now(args, template, shape, genome):
    """evo's own performance gate on the same kernel, right after the graph was timed: its
    median (µs) and the SM clock it recorded."""
    command = ["bench", "--template", template, *problem_options(args, shape), "--json"]
    for knob, value in sorted(genome.items()):
        command += ["--set", f"{knob}={value}"]
    verdict = json.loads(evo(args, *command))["gpus"][0]
    timing = verdict.get("timing") or {}
    return timing.get("median_us"), timing.get("sm_clock_mhz", 0)


def gate(row):
    """The gate's own figures for a row: its median, its ratio to the graph time, its clock."""
    score = f"{row['score_us']:>9.2f}" if row.get("score_us") else f"{'-':>9}"
    if not row.get("gate_us") or not row.get("evo_us"):
        return f"{score} {'-':>9} {'-':>8} {'-':>8}"
    clock = f"{row['gate_sm_clock_mhz']:.0f}" if row.get("gate_sm_clock_mhz") else "-"
    return f"{score} {row['gate_us']:>9.2f} {row['gate_us'] / row['evo_us']:>8.3f} {clock:>8}"


def first_line(error):
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def sdpa_refusal(label, caught, error):
    """Why an SDPA backend forced by sdpa_kernel refused a call: the warnings PyTorch gives under
    "<label> kernel not used because:", else the error's first line."""
    reasons, mine = [], False
    for warning in caught:
        text = re.sub(r"\s*\(Triggered internally at [^)]*\)\s*$", "",
                      str(warning.message)).strip()
        if text.endswith("not used because:"):
            mine = text.startswith(label)
        elif mine and text:
            reasons.append(text)
    return "; ".join(reasons) if reasons else first_line(error)


def time_peer(torch, call, expected, label, is_sdpa=True):
    """A peer's per-call time (µs) and None, or None and why it cannot run the shape: it refuses
    the call, fails in the graph, or its output is off the math backend."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            out = call()
            torch.cuda.synchronize()
        except Exception as error:  # noqa: BLE001 (a peer that cannot run is reported, not fatal)
            return None, (sdpa_refusal(label, caught, error) if is_sdpa else first_line(error))
    error = (out.float() - expected).abs().max().item()
    if not math.isfinite(error) or error > PEER_TOLERANCE:
        return None, f"{label}: output off PyTorch's math backend by {error:.3g}"
    try:
        return time_graph(torch, call), None
    except Exception as error:  # noqa: BLE001
        return None, f"{label} in a CUDA graph: {first_line(error)}"


def flex_attention_runner(torch):
    """A timer of FlexAttention on the same inputs: flex_attention compiled by torch.compile
    (Triton), with a block mask when causal, grouped heads through enable_gqa, checked against
    the math backend first. Returns (µs, None), or (None, why) for a shape it cannot run."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    # Every shape is a new specialization; past the default limit (8) dynamo falls back to eager.
    torch._dynamo.config.cache_size_limit = 256
    if hasattr(torch._dynamo.config, "recompile_limit"):
        torch._dynamo.config.recompile_limit = 256
    compiled = torch.compile(flex_attention, dynamic=False)

    def causal_mask(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx  # top-left aligned, as is_causal and evo's templates

    def run(q, k, v, shape, expected):
        try:
            mask = (create_block_mask(causal_mask, None, None, shape.s_q, shape.s_kv,
                                      device="cuda") if shape.causal else None)
        except Exception as error:  # noqa: BLE001
            return None, f"FlexAttention's create_block_mask: {first_line(error)}"
        gqa = grouped(shape)
        return time_peer(torch, lambda: compiled(q, k, v, block_mask=mask, enable_gqa=gqa),
                         expected, "FlexAttention", is_sdpa=False)

    return run


def flops(shape):
    """4·B·H·D per (query, key) pair attended. A causal mask is top-left aligned (query i sees
    keys 0..i); a square one counts half the pairs, as anchors.md does."""
    pairs = shape.s_q * shape.s_kv
    if shape.causal:
        if shape.s_q == shape.s_kv:
            pairs /= 2.0
        else:
            n = min(shape.s_q, shape.s_kv)
            pairs = n * (n + 1) / 2.0 + max(shape.s_q - shape.s_kv, 0) * shape.s_kv
    return 4.0 * shape.b * shape.h * shape.d * pairs


def bytes_moved(shape, element_size):
    """Q, K and V read once and O written."""
    q_or_o = shape.b * shape.h * shape.s_q * shape.d
    k_or_v = shape.b * shape.h_kv * shape.s_kv * shape.d
    return float(element_size * (2 * q_or_o + 2 * k_or_v))


KERNELS = (("evo", "evo_us"), ("flash", "flash_us"), ("cuDNN", "cudnn_us"), ("flex", "flex_us"))


def print_table(args, rows, l2_bytes):
    """The table of the rows, then what its columns mean and why a kernel is n/a."""
    notes = []

    def na(reason):
        if reason not in notes:
            notes.append(reason)
        return f"n/a[{notes.index(reason) + 1}]"

    header = f"{'B,H[:H_kv],S_q[,S_kv],D':<24} {'causal':<6}"
    for label, _ in KERNELS:
        header += (f" {label + ' us':>9} {label + ' TF':>8} {label + ' TB/s':>10}"
                   f" {label + ' %pk':>9}")
    header += (f" {'vs flash':>8} {'vs cuDNN':>8} {'vs flex':>8} {'vs best':>8}"
               f" {'score us':>9} {'gate us':>9} {'gate/evo':>8} {'gate MHz':>8}  evo's knobs")
    print(header)
    for row in rows:
        line = f"{row['shape']:<24} {'yes' if row['causal'] else 'no':<6}"
        for label, key in KERNELS:
            us = row[key]
            if us:
                tbps = row["bytes"] / (us * 1e-6) / 1e12
                line += (f" {us:>9.2f} {row['flops'] / (us * 1e-6) / 1e12:>8.1f} {tbps:>10.2f}"
                         f" {100.0 * tbps / args.peak_tbps:>8.1f}%")
            else:
                why = row.get(key.replace("_us", "_na"))
                line += f" {na(why) if why else '-':>9} {'-':>8} {'-':>10} {'-':>9}"
        evo_us = row["evo_us"]
        sdpa = [row[key] for key in ("flash_us", "cudnn_us") if row[key]]
        for peer_us in (row["flash_us"], row["cudnn_us"], row["flex_us"],
                        min(sdpa) if sdpa else None):
            line += f" {peer_us / evo_us:>7.2f}x" if peer_us and evo_us else f" {'-':>8}"
        knobs = ""
        if evo_us:
            knobs = " ".join(f"{k}={v}" for k, v in sorted(row["evo_genome"].items()))
            if len(args.template) > 1:
                knobs = row["evo_template"] + " " + knobs
        print(f"{line} {gate(row)}  {knobs}".rstrip())
    print("vs flash, vs cuDNN, vs flex: the peer's time over evo's (above 1: evo is faster); "
          "vs best: the faster of flash and cuDNN over evo's; "
          "flex: FlexAttention, torch.compile of flex_attention (a block mask when causal); "
          "TF: TFLOP/s (4·B·H·D per query-key pair, half the S² pairs when causal); "
          f"TB/s: Q, K, V read once and O written over the time, %pk: of {args.peak_tbps:g} "
          "TB/s; score us: the "
          "kernel's score stored by the search; gate us: evo bench's median for it right after "
          "the graph was timed, gate/evo: that over the CUDA-graph time, gate MHz: the SM clock "
          "the gate recorded")
    cached = [row["shape"] + (",causal" if row["causal"] else "") for row in rows
              if l2_bytes and row["bytes"] <= l2_bytes]
    if cached:
        print(f"{', '.join(cached)}: Q, K, V and O fit the {l2_bytes / 2**20:.0f} MiB L2, so "
              "back-to-back calls may read part of them from L2 (TB/s past HBM's)")
    for number, reason in enumerate(notes, 1):
        print(f"n/a[{number}]: {reason}")


def outlier_keys(text):
    """--outlier-keys EVERY:SCALE as (every, scale): an integer of at least 2, a factor above 1."""
    every, sep, scale = text.partition(":")
    try:
        parsed = (int(every), float(scale))
    except ValueError:
        parsed = None
    valid = parsed is not None and parsed[0] >= 2 and math.isfinite(parsed[1]) and parsed[1] > 1
    if not sep or not valid:
        raise argparse.ArgumentTypeError(
            f"'{text}' is not EVERY:SCALE with EVERY an integer of at least 2 and SCALE a "
            "factor above 1 (e.g. 32:12)")
    return parsed


def scale_outlier_keys(torch, k, every, scale, generator):
    """K with one row in `every` (of its last dimension, drawn by `generator`) times `scale`."""
    picked = torch.rand(k.shape[:-1] + (1,), device=k.device, generator=generator) * every < 1
    return torch.where(picked, k * scale, k)


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog="shapes: B,H,S,D or B,H,S_q,S_kv,D, optionally ,causal; H:H_kv in the H field "
        "for grouped heads (e.g. 64,32:8,1,8192,128); presets: " + ", ".join(
            f"{name} ({len(shapes)} shapes)" for name, shapes in PRESETS.items()))
    parser.add_argument("--evo", default="build/evo", help="the evo binary")
    parser.add_argument("--template", nargs="+", default=["sdpa_fp16"],
                        help="templates to search; each shape reports the fastest one's best")
    parser.add_argument("--budget", type=int, default=60, help="evo run --budget per shape")
    parser.add_argument("--time-limit", default="", help="evo run --time-limit per shape")
    parser.add_argument("--work", default="runs/bench", help="databases and exports")
    parser.add_argument("--shapes", nargs="*",
                        help="shapes (B,H[:H_kv],S,D or B,H[:H_kv],S_q,S_kv,D, then ,causal "
                        "if causal) and presets (anchors, decode); default: anchors")
    parser.add_argument("--no-search", action="store_true",
                        help="use the databases as they are, run no search (a template "
                        "without a database for a shape is left out of that shape)")
    parser.add_argument("--json", help="also write the rows to this JSON file")
    parser.add_argument("--dtype", choices=["fp16", "bf16"], default="fp16",
                        help="Q, K, V and O in fp16 or bf16")
    parser.add_argument("--no-flex", action="store_true", help="leave FlexAttention out")
    parser.add_argument("--peak-tbps", type=float, default=3.35,
                        help="the memory bandwidth the %%pk columns divide by, TB/s "
                        "(default: H100 SXM HBM3, 3.35)")
    parser.add_argument("--outlier-keys", metavar="EVERY:SCALE", type=outlier_keys,
                        help="scale one row in EVERY of K by SCALE (e.g. 32:12, the gates' "
                        "outlier keys); default: plain N(0,1) inputs")
    args = parser.parse_args()
    shapes = expand_shapes(args.shapes)
    os.makedirs(args.work, exist_ok=True)
    known = {}
    if args.dtype == "bf16" or any(grouped(s) for s in shapes):
        known = {t["name"]: t for t in json.loads(evo(args, "templates", "--json"))}

    def takes(template, parameter):
        return template in known and any(p["name"] == parameter
                                         for p in known[template]["problem"])

    if args.dtype == "bf16":
        taking = [t for t in args.template if takes(t, "BF16")]
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
    element_size = torch.empty((), dtype=dtype).element_size()
    l2_bytes = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0)
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"cuDNN {torch.backends.cudnn.version()}, {args.dtype}; per-call medians "
          f"of {CALLS_PER_GRAPH} calls in a CUDA graph, {REPLAYS} replays; bandwidth: Q, K, V "
          f"read once and O written, % of {args.peak_tbps:g} TB/s", flush=True)
    if args.outlier_keys:
        print(f"inputs: N(0,1), with one row in {args.outlier_keys[0]} of K times "
              f"{args.outlier_keys[1]:g}", flush=True)
    rows = []
    for shape in shapes:
        name = shape_name(shape, args.dtype)
        gqa = grouped(shape)
        generator = torch.Generator(device="cuda").manual_seed(2026)
        q, k, v = (torch.randn((shape.b, heads, length, shape.d), device="cuda", dtype=dtype,
                               generator=generator)
                   for heads, length in ((shape.h, shape.s_q), (shape.h_kv, shape.s_kv),
                                         (shape.h_kv, shape.s_kv)))
        if args.outlier_keys:
            k = scale_outlier_keys(torch, k, *args.outlier_keys, generator)
        with sdpa_kernel(SDPBackend.MATH):
            expected = F.scaled_dot_product_attention(q.float(), k.float(), v.float(),
                                                      is_causal=shape.causal, enable_gqa=gqa)
        # "problem" and "device" as evo stores them, so that `evo report --peers` finds the run
        # of each row (BF16 is a problem parameter of the templates that take bf16).
        problem = {"B": shape.b, "H": shape.h, "H_kv": shape.h_kv, "S_q": shape.s_q,
                   "S_kv": shape.s_kv, "D": shape.d}
        if args.dtype == "bf16":
            problem["BF16"] = 1
        row = {"shape": shape_text(shape), "causal": shape.causal, "dtype": args.dtype,
               "device": torch.cuda.get_device_name(), "problem": problem,
               "bytes": bytes_moved(shape, element_size), "flops": flops(shape),
               "evo_us": None}
        if args.outlier_keys:
            row["outlier_keys"] = {"every": args.outlier_keys[0], "scale": args.outlier_keys[1]}
        templates = args.template
        if gqa:
            templates = [t for t in args.template if takes(t, "H_kv")]
            for t in args.template:
                if t not in templates:
                    print(f"  {name}: {t} has no problem parameter H_kv (grouped heads), so it "
                          "is left out of this shape", flush=True)
        for template in templates:
            folder, elite = search_and_export(args, template, shape)
            if folder is None:
                continue
            o = torch.empty_like(q)
            launch, launch_json = evo_launcher(folder, shape, q, k, v, o)
            launch()
            torch.cuda.synchronize()
            error = (o.float() - expected).abs().max().item()
            if not math.isfinite(error) or error > (0.02 if args.dtype == "fp16" else 0.05):
                raise SystemExit(f"bench-attention: evo's {template} kernel for {name} is off "
                                 f"by {error} from PyTorch's math backend")
            evo_us = time_graph(torch, launch)
            if len(templates) > 1:
                print(f"  {name}: {template} {evo_us:.2f} us", flush=True)
            if row["evo_us"] is None or evo_us < row["evo_us"]:
                genome = launch_json.get("genome", {})
                gate_us, gate_mhz = gate_now(args, template, shape, genome)
                row.update({"evo_template": template,
                            "evo_candidate": launch_json.get("candidate"), "evo_genome": genome,
                            "evo_max_abs_error": error, "evo_us": evo_us,
                            "score_us": elite.get("score_us"), "gate_us": gate_us,
                            "gate_sm_clock_mhz": gate_mhz})
        if row["evo_us"] is None:
            if not templates:
                row["evo_na"] = "no template with the problem parameter H_kv (grouped heads)"
            else:
                row["evo_na"] = "no database of " + " or ".join(templates) + " (--no-search)"
        for key, backend, label in (("flash_us", SDPBackend.FLASH_ATTENTION, "Flash attention"),
                                    ("cudnn_us", SDPBackend.CUDNN_ATTENTION, "cuDNN attention")):
            with sdpa_kernel(backend):
                row[key], why = time_peer(
                    torch, lambda: F.scaled_dot_product_attention(
                        q, k, v, is_causal=shape.causal, enable_gqa=gqa), expected, label)
            if why:
                row[key.replace("_us", "_na")] = why
        row["flex_us"] = None
        if flex:
            row["flex_us"], why = flex(q, k, v, shape, expected)
            if why:
                row["flex_na"] = why
        rows.append(row)
        del q, k, v, expected
        print(f"  {name}: " + ", ".join(
            f"{label} " + (f"{row[key]:.2f} us" if row[key] else "n/a")
            for label, key in KERNELS if key != "flex_us" or flex), flush=True)

    print_table(args, rows, l2_bytes)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out, indent=2)


if __name__ == "__main__":
    main()
