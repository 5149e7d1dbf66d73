#!/usr/bin/python3
"""Candidates per minute of one search on one GPU and on several GPUs of this host.

For each shape (default: the mission shape 2,8,512,64 and 4,16,4096,128) this runs the same
search, same template, seed and budget, twice: `evo run --gpus FIRST` and `evo run --gpus LIST`
(LIST from --gpus, default 0,1), and prints both rates and their ratio beside the target, 0.9 x
the number of GPUs (1.8x for two).

The rate is the search's own (`evo run --json`: candidates finished by the session over its wall
time, from its first proposal to its last candidate), so the workers' start and their reference
runs, which take the same seconds on one GPU or eight, are left out; the whole process's rate is
printed beside it.

Compiles: a search's compiles run ahead of its GPUs on every core, and at D=128 one takes tens of
seconds, so with a cold cache two GPUs can wait for NVRTC and the ratio measures the CPU. By
default (--cache warm) a first, untimed search of each shape on all the GPUs, with --warm-budget
candidates (twice the budget), fills a compile cache, and each timed run starts from its own copy
of it. The cache holds what the warm-up proposed, and a timed run leaves that path as soon as its
measurements differ: on two H200s a third of each timed run's compiles were still new, with a
warm-up of 128 or of 512 (BENCHMARKS.md, issue 20), and where a candidate measures faster than a
compile those set the pace. So the share of compiles each timed run found in the cache is printed
beside the ratio. --cache cold gives each timed run an empty cache.

--replay FILE replays a recording on simulated GPUs instead (`evo run --replay FILE --gpus LIST
--replay-delay-ms N`): the recording's task replaces --shapes, and the script runs where there
is no GPU. --dry-run prints the commands without running them.

  scripts/bench-gpus.py --evo build/evo                       # on a machine with 2+ GPUs
  scripts/bench-gpus.py --evo build/evo --gpus 0,1,2,3 --budget 96
  scripts/bench-gpus.py --evo build/evo --replay tests/data/sdpa_fp16_h100_2x8x512x64.jsonl \\
      --replay-delay-ms 50 --budget 48
"""

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

DEFAULT_SHAPES = ["2,8,512,64", "4,16,4096,128"]


def gpu_list(text):
    """--gpus: two or more distinct GPU numbers."""
    parts = text.split(",")
    if not all(part.isdigit() for part in parts):
        raise argparse.ArgumentTypeError(f"expected GPU numbers like 0,1, not '{text}'")
    gpus = [int(part) for part in parts]
    if len(set(gpus)) != len(gpus):
        raise argparse.ArgumentTypeError(f"a GPU is named twice in '{text}'")
    if len(gpus) < 2:
        raise argparse.ArgumentTypeError("name two or more GPUs: one is the baseline's")
    return gpus


def shape(text):
    parts = text.split(",")
    if len(parts) not in (4, 5) or not all(part.isdigit() and int(part) > 0 for part in parts):
        raise argparse.ArgumentTypeError(f"expected B,H,S,D or B,H,S_q,S_kv,D, not '{text}'")
    return text


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        epilog="See the top of this file for what is measured and how.")
    parser.add_argument("--evo", default="./build/evo", help="the evo binary")
    parser.add_argument("--gpus", type=gpu_list, default=gpu_list("0,1"),
                        help="the GPUs of the run on several (default 0,1); the first alone is "
                             "the baseline")
    parser.add_argument("--shapes", type=shape, nargs="+", default=DEFAULT_SHAPES,
                        help="B,H,S,D shapes (default: %(default)s)")
    parser.add_argument("--template", default="sdpa_fp16")
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--budget", type=int, default=64, help="candidates of each timed run")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cache", choices=["warm", "cold"], default="warm")
    parser.add_argument("--warm-budget", type=int, default=0,
                        help="candidates of the untimed warm-up (default: twice --budget)")
    parser.add_argument("--replay", help="a recording to replay on simulated GPUs instead")
    parser.add_argument("--replay-delay-ms", type=int, default=50,
                        help="what a simulated GPU takes per measurement (with --replay)")
    parser.add_argument("--json", help="write every figure to this file")
    parser.add_argument("--dry-run", action="store_true", help="print the commands only")
    args = parser.parse_args(argv)
    if args.budget < 1:
        parser.error("--budget must be positive")
    if args.warm_budget == 0:
        args.warm_budget = 2 * args.budget
    return args


def run_command(args, gpus, db, cache_dir, budget):
    """The evo run of one search."""
    command = [args.evo, "run", "--new", "--json", "--db", db, "--budget", str(budget),
               "--seed", str(args.seed), "--gpus", ",".join(str(gpu) for gpu in gpus)]
    if args.replay:
        command += ["--replay", args.replay, "--replay-delay-ms", str(args.replay_delay_ms)]
    else:
        command += ["--template", args.template, "--shape", args.shape, "--cache-dir", cache_dir]
        if args.causal:
            command.append("--causal")
    return command


def cached_share(db):
    """Candidates whose compile came from the cache, of those compiled."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as connection:
        rows = connection.execute(
            "SELECT outcome_json FROM candidates WHERE state = 'finished' AND status NOT IN "
            "('invalid')").fetchall()
    compiled = [json.loads(outcome) for (outcome,) in rows]
    return sum(1 for outcome in compiled if outcome.get("compile_cached")), len(compiled)


def timed_run(args, command, db):
    start = time.monotonic()
    result = subprocess.run(command, capture_output=True, text=True)
    wall = time.monotonic() - start
    if result.returncode != 0:
        sys.stderr.write(result.stderr)
        raise SystemExit(f"bench-gpus: {' '.join(command)} failed ({result.returncode})")
    report = json.loads(result.stdout)
    cached, compiled = cached_share(db)
    return {"command": command, "evaluated": report["evaluated_now"],
            "seconds": report["seconds"], "per_minute": report["per_minute"],
            "wall_seconds": wall, "wall_per_minute": 60.0 * report["evaluated_now"] / wall,
            "cached_compiles": cached, "compiled": compiled}


def bench_shape(args, work, label):
    one_gpu = args.gpus[:1]
    runs = {}
    if args.replay:
        for name, gpus in (("one", one_gpu), ("several", args.gpus)):
            db = os.path.join(work, f"{name}.db")
            command = run_command(args, gpus, db, "", args.budget)
            if args.dry_run:
                print(" ".join(command))
            else:
                runs[name] = timed_run(args, command, db)
        return runs
    warm_cache = os.path.join(work, "cache")
    if args.cache == "warm":
        command = run_command(args, args.gpus, os.path.join(work, "warm.db"), warm_cache,
                              args.warm_budget)
        if args.dry_run:
            print(" ".join(command))
        else:
            print(f"bench-gpus: {label}: warming the compile cache ({args.warm_budget} candidates "
                  f"on GPUs {args.gpus})", file=sys.stderr)
            result = subprocess.run(command, capture_output=True, text=True)
            if result.returncode != 0:
                sys.stderr.write(result.stderr)
                raise SystemExit(f"bench-gpus: the warm-up failed ({result.returncode})")
    for name, gpus in (("one", one_gpu), ("several", args.gpus)):
        cache = os.path.join(work, f"cache-{name}")
        if not args.dry_run and args.cache == "warm":
            shutil.copytree(warm_cache, cache)
        db = os.path.join(work, f"{name}.db")
        command = run_command(args, gpus, db, cache, args.budget)
        if args.dry_run:
            print(" ".join(command))
        else:
            print(f"bench-gpus: {label}: {args.budget} candidates on GPUs {gpus}", file=sys.stderr)
            runs[name] = timed_run(args, command, db)
    return runs


def main(argv):
    args = parse_args(argv)
    target = 0.9 * len(args.gpus)
    shapes = ["replay"] if args.replay else args.shapes
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-gpus-") as work:
        for index, label in enumerate(shapes):
            args.shape = label
            folder = os.path.join(work, str(index))
            os.makedirs(folder)
            runs = bench_shape(args, folder, label)
            if args.dry_run:
                continue
            one, several = runs["one"], runs["several"]
            ratio = several["per_minute"] / one["per_minute"] if one["per_minute"] > 0 else 0
            results.append({"shape": label, "gpus": args.gpus, "one": one, "several": several,
                            "ratio": ratio, "target": target, "met": ratio >= target})
    if args.dry_run:
        return 0
    what = f"replay of {args.replay}, {args.replay_delay_ms} ms per measurement" \
        if args.replay else f"{args.template}{' causal' if args.causal else ''}, " \
                            f"{args.cache} compile cache"
    print(f"candidates per minute, {args.budget} candidates per run, seed {args.seed} ({what})")
    several_label = f"{len(args.gpus)} GPUs"
    print(f"{'shape':<16} {'GPU ' + str(args.gpus[0]):>10} {several_label:>10} {'ratio':>7}  "
          f"{'target ' + format(target, '.1f') + 'x':<13} {'whole process':>19}"
          f"{'' if args.replay else '   cached compiles'}")
    for r in results:
        one, several = r["one"], r["several"]
        line = (f"{r['shape']:<16} {one['per_minute']:>10.1f} {several['per_minute']:>10.1f} "
                f"{r['ratio']:>6.2f}x  {'met' if r['met'] else 'NOT met':<13} "
                f"{one['wall_per_minute']:>9.1f} /{several['wall_per_minute']:>8.1f}")
        if not args.replay:
            line += (f"   {one['cached_compiles']}/{one['compiled']}, "
                     f"{several['cached_compiles']}/{several['compiled']}")
        print(line)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(results, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
