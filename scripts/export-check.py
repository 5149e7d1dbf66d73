#!/usr/bin/env python3
"""Checks a Python package written by `evo export --python` on the GPU here, with PyTorch.

For every entry of its table whose kernel runs on this GPU (fp16 and bf16): the tuned shape, the
same with lengths that leave partial tiles (S_q - 3, S_kv - 5, at least 1) and an untuned shape
between buckets (S_q and S_kv times 1.4) are called through attention() and compared with
torch's SDPA math backend in fp32 (atol + rtol * |ref| per element, fp16 2e-3 + 1e-2, bf16
8e-3 + 2e-2); then the call is captured into a CUDA graph and replayed (its output must be the
eager call's, bit for bit), and the tuned shape through torch.compile(fullgraph=True), which
traces the custom op through its fake implementation (inductor once, then aot_eager).
Each tuned shape is timed beside torch's SDPA (its default backend: flash or cuDNN): 20 calls in
a CUDA graph, replayed for at least 100 ms after a warm-up, median over replays / 20.

It runs once per CUDA driver binding (CUDA Python's cuda.bindings where installed, and ctypes on
libcuda), each in a fresh process. Exits 1 if any check fails.

    scripts/export-check.py runs/export-py/evo_attention
    scripts/export-check.py runs/export-py/evo_attention --driver ctypes --no-time
"""

import argparse
import importlib
import os
import statistics
import subprocess
import sys


def load(package_dir):
    sys.path.insert(0, os.path.dirname(os.path.abspath(package_dir)))
    return importlib.import_module(os.path.basename(os.path.abspath(package_dir)))


def reference(q, k, v, causal, torch):
    """torch's math backend in fp32, grouped heads repeated."""
    group = q.shape[1] // k.shape[1]
    k = k.float().repeat_interleave(group, dim=1)
    v = v.float().repeat_interleave(group, dim=1)
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        return torch.nn.functional.scaled_dot_product_attention(q.float(), k, v,
                                                                is_causal=causal)


def graph_time_us(function, torch, calls=20):
    """Median time of one call: `calls` calls captured in a CUDA graph, replayed back to back."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            function()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            function()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    spent = 0.0
    while spent < 200 or len(times) < 10:  # 100 ms warm-up, then at least 100 ms measured
        start.record()
        graph.replay()
        stop.record()
        stop.synchronize()
        elapsed = start.elapsed_time(stop)
        spent += elapsed
        if spent > 100:
            times.append(elapsed)
    return statistics.median(times) * 1000 / calls


def check(args):
    import torch

    package = load(args.package)
    package.use_driver(args.driver)
    device = torch.device("cuda")
    major, minor = torch.cuda.get_device_capability(device)
    sm = major * 10 + minor
    dtypes = {"f16": torch.float16, "bf16": torch.bfloat16}
    tolerance = {"f16": (2e-3, 1e-2), "bf16": (8e-3, 2e-2)}
    table = package.table
    failures = 0
    print(f"{args.package} on {torch.cuda.get_device_name(device)} (sm_{sm}), driver binding "
          f"{args.driver}, torch {torch.__version__}")
    print(f"{'call':<34} {'kind':<8} {'entry':>5} {'max|err|':>9}  {'graph':<6} {'compile':<7} "
          f"{'evo us':>8} {'sdpa us':>8}")
    package.load()
    torch._dynamo.config.cache_size_limit = 256  # one compile per checked shape
    compiled_once = False
    for index, entry in enumerate(table["entries"]):
        kernel = table["kernels"][entry["kernel"]]
        key = kernel["key"]
        if not package._rule.runs_on(kernel, sm) or key["q_dtype"] not in dtypes or (
                key["kv_dtype"] != key["q_dtype"]):
            continue
        dtype = dtypes[key["q_dtype"]]
        shape = entry["shape"]
        causal = bool(key["causal"])
        variants = [("tuned", shape["S_q"], shape["S_kv"]),
                    ("partial", max(1, shape["S_q"] - 3), max(1, shape["S_kv"] - 5)),
                    ("between", max(1, shape["S_q"] * 7 // 5), max(1, shape["S_kv"] * 7 // 5))]
        for kind, s_q, s_kv in variants:
            generator = torch.Generator(device=device).manual_seed(index)
            q = torch.randn(shape["B"], shape["H"], s_q, key["D"], dtype=dtype, device=device,
                            generator=generator)
            k = torch.randn(shape["B"], shape["H_kv"], s_kv, key["D"], dtype=dtype,
                            device=device, generator=generator)
            v = torch.randn_like(k)
            label = (f"{shape['B']},{shape['H']}:{shape['H_kv']},{s_q},{s_kv},{key['D']}"
                     f"{',causal' if causal else ''},{key['q_dtype']}")
            try:
                picked = package.pick(B=shape["B"], H=shape["H"], H_kv=shape["H_kv"], S_q=s_q,
                                      S_kv=s_kv, D=key["D"], causal=causal,
                                      dtype=key["q_dtype"], sm=sm)
            except package.DispatchError as error:
                print(f"{label:<34} {kind:<8} refused: {error}")
                failures += kind == "tuned"
                continue
            out = package.attention(q, k, v, causal)
            torch.cuda.synchronize()
            expected = reference(q, k, v, causal, torch)
            atol, rtol = tolerance[key["q_dtype"]]
            error = (out.float() - expected).abs()
            bad = bool((~(error <= atol + rtol * expected.abs())).any())
            max_error = float(error.nan_to_num(float("inf")).max())

            # The same call captured into a CUDA graph, and through torch.compile.
            graph = torch.cuda.CUDAGraph()
            static = {}
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                package.attention(q, k, v, causal)
            torch.cuda.current_stream().wait_stream(stream)
            with torch.cuda.graph(graph):
                static["out"] = package.attention(q, k, v, causal)
            graph.replay()
            torch.cuda.synchronize()
            same_graph = torch.equal(static["out"], out)
            # torch.compile traces the custom op through its fake implementation: inductor for
            # the first call, aot_eager (the same tracing, no code generation) for the others.
            same_compile = True
            if kind == "tuned":
                backend = "aot_eager" if compiled_once else "inductor"
                compiled = torch.compile(lambda a, b, c: package.attention(a, b, c, causal),
                                         fullgraph=True, backend=backend)
                same_compile = torch.equal(compiled(q, k, v), out)
                compiled_once = True

            evo_us = sdpa_us = ""
            if kind == "tuned" and not args.no_time:
                evo_us = f"{graph_time_us(lambda: package.attention(q, k, v, causal), torch):.2f}"
                kk, vv = k, v
                if shape["H_kv"] != shape["H"]:
                    kk = k.repeat_interleave(shape["H"] // shape["H_kv"], dim=1)
                    vv = v.repeat_interleave(shape["H"] // shape["H_kv"], dim=1)
                sdpa = torch.nn.functional.scaled_dot_product_attention
                sdpa_us = f"{graph_time_us(lambda: sdpa(q, kk, vv, is_causal=causal), torch):.2f}"
            ok = not bad and same_graph and same_compile
            failures += not ok
            print(f"{label:<34} {kind:<8} {picked['index']:>5} {max_error:>9.2e}  "
                  f"{'same' if same_graph else 'DIFFER':<6} {'same' if same_compile else 'DIFFER':<7}"
                  f" {evo_us:>8} {sdpa_us:>8}{'' if ok else '  FAILED'}")
    print("all checks passed" if failures == 0 else f"{failures} checks FAILED")
    return 0 if failures == 0 else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("package", help="the package folder (DIR/NAME of evo export --python DIR)")
    parser.add_argument("--driver", choices=["cuda-python", "ctypes"],
                        help="one binding only (default: each available one, in turn)")
    parser.add_argument("--no-time", action="store_true", help="check only, time nothing")
    args = parser.parse_args()
    try:
        import torch  # noqa: F401
    except ImportError:
        print("export-check.py needs PyTorch, which is not installed here")
        return 2
    if args.driver:
        return check(args)
    drivers = ["ctypes"]
    try:
        from cuda.bindings import driver  # noqa: F401

        drivers.insert(0, "cuda-python")
    except ImportError:
        print("CUDA Python (cuda.bindings) is not installed: checking the ctypes binding only")
    status = 0
    for driver_name in drivers:
        command = [sys.executable, os.path.abspath(__file__), args.package, "--driver",
                   driver_name] + (["--no-time"] if args.no_time or driver_name != drivers[0]
                                   else [])
        status |= subprocess.call(command)
    print("all checks passed" if status == 0 else "SOME CHECKS FAILED")
    return status


if __name__ == "__main__":
    sys.exit(main())
