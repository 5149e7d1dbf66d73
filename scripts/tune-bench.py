#!/usr/bin/python3
"""How many candidates `evo tune` saves by opening each shape with the elites of the shapes before.

The recordings (made by `evo sweep`, of one template at several shapes) are tuned in the order
given, as one `evo tune` over their shapes replaying them, for each of --seeds seeds: once as
evo tune runs by default (each new run's first generation opened by the elites of the runs
before it) and once with --no-seed-elites. Both keep the template's starting points, as a user's
tune does. For every shape after the first it prints, per mode, the candidates that shape's run
needed to get within --within (2 %) of its recording's best (median and p90 over seeds, misses
within the cap) and the fraction of the best speed after 10, 25 and 50 candidates; the first
shape has nothing before it and is the same in both modes (a check that the modes differ only
by the seeding). Candidates are counted as evo's budget counts them, and judged by the mean of
their recorded timings, as in search-bench.py.

  scripts/tune-bench.py --evo build/evo tests/data/sdpa_fp16_h100_2x8x512x64.jsonl \\
      tests/data/sdpa_fp16_h100_4x16x1024x64_causal.jsonl tests/data/sdpa_fp16_h100_1x16x4096x128.jsonl
"""

import argparse
import concurrent.futures
import importlib.util
import json
import os
import shutil
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKPOINTS = [10, 25, 50]


def _search_bench():
    """scripts/search-bench.py as a module: one reading of recordings and one set of measures."""
    spec = importlib.util.spec_from_file_location("search_bench",
                                                  os.path.join(HERE, "search-bench.py"))
    module = importlib.util.module_from_spec(spec)
    # Registered by name, so that its BenchError raised in a worker process unpickles here.
    sys.modules["search_bench"] = module
    spec.loader.exec_module(module)
    return module


bench = _search_bench()


def shape_argument(header):
    """The recording's task as one `evo tune --shape` (B,H:H_kv,S_q,S_kv,D[,causal]) and the
    problem parameters beyond the shape, which `evo tune --problem` sets for every shape."""
    problem = dict(header["problem"])
    missing = [k for k in ("B", "H", "S_q", "S_kv", "D") if k not in problem]
    if missing:
        raise bench.BenchError(f"a recording of {header['template']} names no attention shape (no "
                               f"{', '.join(missing)} in its problem); evo tune's --shape takes one")
    b, h, s_q, s_kv, d = (problem.pop(k) for k in ("B", "H", "S_q", "S_kv", "D"))
    h_kv = problem.pop("H_kv", h)
    shape = f"{b},{h}:{h_kv},{s_q},{s_kv},{d}" + (",causal" if problem.pop("CAUSAL", 0) else "")
    return shape, problem


def run_tune(landscapes, replays, evo, seed, cap, seeded, workdir, templates_args):
    """One evo tune over the recordings' shapes: each shape's trace of recorded times."""
    db = os.path.join(workdir, f"tune-{'seeded' if seeded else 'unseeded'}-{seed}.db")
    template = landscapes[0].header["template"]
    command = [evo, "tune", "--template", template, "--budget", str(cap), "--seed", str(seed),
               "--db", db]
    extra = None
    for landscape in landscapes:
        shape, problem = shape_argument(landscape.header)
        if extra is None:
            extra = problem
        command += ["--shape", shape, "--replay", replays[landscape.path]]
    for name, value in sorted(extra.items()):
        command += ["--problem", f"{name}={value}"]
    if not seeded:
        command.append("--no-seed-elites")
    command += templates_args
    rows, run_rows = bench.run_and_read(command, db, [
        "SELECT run_id, genome, status FROM candidates WHERE state = 'finished' ORDER BY id",
        "SELECT id FROM runs ORDER BY id"])
    runs = [r[0] for r in run_rows]
    if len(runs) != len(landscapes):
        raise bench.BenchError(f"evo tune made {len(runs)} runs for {len(landscapes)} shapes")
    traces = {run: [] for run in runs}
    for run, genome_text, status in rows:
        if status == "invalid":
            continue
        traces[run].append(json.loads(genome_text))
    result = []
    for run, landscape in zip(runs, landscapes):
        trace = []
        for genome in traces[run]:
            key = bench.key_of(genome, landscape.knobs)
            if key not in landscape.configs:
                raise bench.BenchError(f"evo proposed {genome}, which {landscape.path} does not hold")
            # Judged as search-bench.py judges: by the mean of the recorded timings.
            trace.append(landscape.judged[key])
        result.append(trace[:cap])
    return result


def run_one(task):
    paths, replays, evo, seed, cap, seeded, workdir, templates_args = task
    landscapes = [bench.Landscape(path) for path in paths]
    try:
        return seeded, seed, run_tune(landscapes, replays, evo, seed, cap, seeded, workdir,
                                      templates_args)
    except bench.BenchError as error:
        mode = "seeded" if seeded else "unseeded"
        raise bench.BenchError(f"the {mode} tune of seed {seed}: {error}") from None


def main():
    return bench.run_main("tune-bench", run_benchmark)


def run_benchmark():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("recordings", nargs="+",
                        help="recordings of one template, tuned in this order (at least two)")
    parser.add_argument("--evo", default="build/evo", help="the evo binary (default: build/evo)")
    parser.add_argument("--seeds", type=bench.whole_number(1), default=20,
                        help="seeds per mode (default: 20)")
    parser.add_argument("--first-seed", type=bench.whole_number(0), default=1,
                        help="seeds run from this (default: 1)")
    parser.add_argument("--cap", type=bench.whole_number(1), default=200,
                        help="candidates per shape (evo tune --budget; default: 200)")
    parser.add_argument("--within", type=bench.fraction, default=0.02,
                        help="the fraction of the best time that counts as found (default: 0.02)")
    parser.add_argument("--jobs", type=bench.whole_number(1), default=os.cpu_count() or 1,
                        help="tunes run at once (default: one per core)")
    parser.add_argument("--templates", action="append", default=[], metavar="DIR",
                        help="a folder of templates of your own (evo --templates; repeatable)")
    parser.add_argument("--json", metavar="FILE", help="also write every figure as JSON")
    args = parser.parse_args()

    if len(args.recordings) < 2:
        parser.error("give at least two recordings: the first opens the set, the others are seeded")
    bench.refuse_repeats(parser, args.recordings)
    bench.require_json_folder(parser, args.json)
    if not os.access(args.evo, os.X_OK):
        parser.error(f"{args.evo} is not an executable evo")
    templates_args = bench.templates_arguments(parser, args.templates)
    landscapes = [bench.Landscape(path) for path in args.recordings]
    templates = {landscape.header["template"] for landscape in landscapes}
    if len(templates) != 1:
        parser.error(f"the recordings are of several templates ({', '.join(sorted(templates))}); "
                     "evo tune seeds a shape from the shapes of its own template")
    shapes = [shape_argument(l.header)[0] for l in landscapes]
    if len(set(shapes)) != len(shapes):
        parser.error("two recordings are of one shape; evo tune makes one run per shape")
    extras = {json.dumps(shape_argument(l.header)[1], sort_keys=True) for l in landscapes}
    if len(extras) != 1:
        parser.error("the recordings differ in problem parameters beyond the shape, which evo tune "
                     "sets for every shape alike")

    workdir = tempfile.mkdtemp(prefix="tune-bench-")
    try:
        seeds = range(args.first_seed, args.first_seed + args.seeds)
        replays = bench.plain_replays(args.recordings, workdir)
        tasks = [(args.recordings, replays, args.evo, seed, args.cap, seeded, workdir,
                  templates_args)
                 for seeded in (True, False) for seed in seeds]
        traces = {True: [], False: []}
        with concurrent.futures.ProcessPoolExecutor(max_workers=args.jobs) as pool:
            try:
                for seeded, seed, per_shape in pool.map(run_one, tasks):
                    traces[seeded].append(per_shape)
            except BaseException:
                pool.shutdown(wait=True, cancel_futures=True)  # not the tunes still queued
                raise
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    figures = []
    print(f"evo tune over {len(landscapes)} shapes of {templates.pop()}, {args.seeds} seeds, "
          f"cap {args.cap} candidates per shape; to {args.within * 100:g} %: candidates a shape's "
          "run needed to get within it of its recording's best")
    columns = ["shape", "configs", "mode", "median", "p90", "misses"] + \
              [f"@{n}" for n in CHECKPOINTS]
    rows = []
    for index, landscape in enumerate(landscapes):
        target = landscape.best * (1 + args.within)
        shape = shape_argument(landscape.header)[0]
        entry = {"recording": landscape.path, "shape": shape, "size": landscape.size,
                 "best_us": landscape.best}
        for seeded in (True, False):
            per_seed = [t[index] for t in traces[seeded]]
            hits = [bench.hit_index(trace, target) for trace in per_seed]
            needed = [h if h is not None else float("inf") for h in hits]
            after = {n: statistics.median(bench.fraction_after(t, landscape.best, n)
                                          for t in per_seed) for n in CHECKPOINTS}
            mode = "seeded" if seeded else "unseeded"
            entry[mode] = {"hits": hits, "median": statistics.median(needed),
                           "p90": bench.p90(needed), "after": after}
            rows.append([shape if seeded else "", str(landscape.size) if seeded else "",
                         mode + (" (first: nothing before it)" if index == 0 and seeded else ""),
                         bench.format_count(statistics.median(needed), args.cap),
                         bench.format_count(bench.p90(needed), args.cap),
                         f"{sum(1 for h in hits if h is None)}/{len(hits)}"] +
                        ["n/a" if n > args.cap else f"{after[n]:.4f}" for n in CHECKPOINTS])
        figures.append(entry)
    widths = [max(len(str(r[i])) for r in rows + [columns]) for i in range(len(columns))]
    print("  " + "  ".join(c.ljust(w) if i < 3 else c.rjust(w)
                           for i, (c, w) in enumerate(zip(columns, widths))))
    for r in rows:
        print("  " + "  ".join(str(c).ljust(w) if i < 3 else str(c).rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths))))
    later = figures[1:]
    saved = [e["unseeded"]["median"] - e["seeded"]["median"] for e in later
             if e["seeded"]["median"] != float("inf") and e["unseeded"]["median"] != float("inf")]
    if saved:
        print(f"seeding saved {sum(saved):g} candidates in all over the {len(later)} later shapes "
              "(differences of medians)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cap": args.cap, "seeds": args.seeds, "within": args.within,
                       "shapes": figures}, f, indent=1, default=str)


if __name__ == "__main__":
    sys.exit(main())
