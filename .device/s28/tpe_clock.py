#!/usr/bin/env python3
"""Issue 17: how long Optuna's TPE would take on one GPU, in the recording's own compile and GPU
times, to get within 2 % of the best. TPE proposes its next configuration only once the last one
is measured, so each candidate's compile and measurement follow one another:
the sum of compile_ms + gpu_ms over its candidates up to the hit (a configuration a constraint
refuses costs nothing). Seeds as scripts/search-bench.py runs them (multivariate TPE, failures
told as twice the worst time, repeats answered from a cache). Usage: tpe_clock.py RECORDING SEEDS"""
import gzip
import json
import statistics
import sys
import warnings

import optuna


def main():
    path, seeds = sys.argv[1], int(sys.argv[2])
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        lines = [line for line in f.read().splitlines() if line.strip()]
    knobs = None
    configs = {}
    for line in lines[1:]:
        record = json.loads(line)
        if knobs is None:
            knobs = sorted(record["genome"])
        key = tuple(record["genome"][k] for k in knobs)
        outcome = record["outcome"]
        timing = (outcome.get("gpu") or {}).get("timing")
        measured = outcome.get("status") == "measured" and timing is not None
        seconds = ((outcome.get("compile_ms") or 0) + (outcome.get("gpu_ms") or 0)) / 1000
        configs[key] = (timing["median_us"] if measured else None, seconds)
    best = min(t for t, _ in configs.values() if t is not None)
    worst = max(t for t, _ in configs.values() if t is not None)
    target = best * 1.02
    domains = {k: sorted({key[i] for key in configs}) for i, k in enumerate(knobs)}
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    hits, clocks = [], []
    for seed in range(1, seeds + 1):
        study = optuna.create_study(direction="minimize",
                                    sampler=optuna.samplers.TPESampler(seed=seed, multivariate=True))
        seen = {}
        candidates, clock = 0, 0.0
        for _ in range(20 * 400):
            trial = study.ask()
            key = tuple(trial.suggest_categorical(k, domains[k]) for k in knobs)
            if key not in seen:
                if key in configs:
                    t, seconds = configs[key]
                    candidates += 1
                    clock += seconds
                    seen[key] = t if t is not None else 2 * worst
                    if t is not None and t <= target:
                        break
                else:
                    seen[key] = 2 * worst
            study.tell(trial, seen[key])
        hits.append(candidates)
        clocks.append(clock)
        print(f"seed {seed}: {candidates} candidates, {clock:.1f} s", flush=True)
    clocks.sort()
    print(f"{path}: TPE to 2 %: median {statistics.median(hits)} candidates, "
          f"{statistics.median(clocks):.1f} s one candidate at a time "
          f"(p90 {clocks[max(0, -(-9 * len(clocks) // 10) - 1)]:.1f} s)")


if __name__ == "__main__":
    main()
