#!/usr/bin/python3
"""How many candidates a search needs on a recorded landscape: evo beside random search and TPE.

A recording made by `evo sweep` holds every valid configuration of one task with its outcome,
so a search can be replayed on it without a GPU and judged against the whole space. For each
recording and each of --seeds seeds this runs:

  evo       `evo run --replay FILE --no-starting-points`: the engine alone
  evo+sp    `evo run --replay FILE`: with the template's starting points
  random    uniform without replacement over the recorded configurations
  tpe       Optuna's TPE sampler (seeded, multivariate: one density over all knobs) over the
            same knob domains (each a categorical of the values the recording holds); a
            suggestion the recording does not hold breaks a constraint and is not counted, a
            repeated one is answered from a cache and counted once (Optuna's FAQ does so);
            failed candidates are reported to it as twice the worst time. TPE's default,
            univariate (--tpe-univariate), repeats itself: on tests/data's recording it
            suggested 113 distinct configurations in 2000 trials. A TPE run stops once every
            figure is known (the target hit, 200 candidates spent), or after 20 x cap trials

and prints, per method, the candidates needed to get within --within (2 %) of the recording's
best (median and p90 over seeds, a seed that does not get there within the cap counting as
worse than any that does; and the misses), and the fraction of the best speed reached after
25, 50, 100 and 200 candidates (best time / best time found so far, median over seeds). Every
candidate counts as evo's budget counts it: compile errors, resource rejects and wrong results
are candidates with no speed.

A search sees what a live one would: a configuration's first recorded timing. It is judged by
how fast the configurations it measured are, the geometric mean of every timing the recording
holds of each (the first and `evo sweep`'s remeasurements; --judge first for the first alone,
as before the forty-third session). The fastest of 1000 single timings is often a lucky one: on
tests/data's 1x16x4096x128 the best first timing is 381.66 us and the same kernel's next one
414.78, so a search that found the truly fastest kernels could still be counted as missing.
Each table also prints the medians judged by the first timing alone, and the JSON holds both.

A median over 20 seeds moves by 10 candidates and more from one block of seeds to the next, so
each median comes with a 95 % bootstrap interval (2000 resamples of the seeds, drawn from a
fixed stream), and the engine alone ("evo") is set against every other method: the chance that
one of its seeds needs fewer candidates than one of the other's (all pairs of seeds, ties
counted half, a miss worse than any hit), and a 95 % bootstrap interval of the other's median
minus evo's (a miss counted as cap + 1 there). An interval that holds 0 does not tell the two
apart on these seeds.

With --clock, evo's runs also simulate their wall time (`evo run --replay-clock`: the recorded
compile and GPU times through the GPU pipeline's model, 16 compile threads, one GPU, planning
left out), and evo's rows add the simulated seconds until the hit (median and p90 over seeds).
--evo-args passes more options to evo's runs (--evo-args="--generation-size 4"), and
--templates DIR the folder of a template of your own whose recording is replayed.

Each recording's table is printed as soon as its searches end, and --json is rewritten then
(its "unfinished" names the recordings not reached yet), so a run stopped part of the way keeps
every recording it finished. A recording is read as evo reads a replay, and what evo would refuse
(a torn last line, two recordings joined, a configuration recorded twice with two outcomes) is
refused here first, in one line naming the file and line; a failed evo run is said with evo's own
words and the command.

The cap (--cap) is the candidates each search may spend: by default a quarter of the space, at
least 200 (or the whole space when smaller), so that "no seed missing within 25 % of the space"
reads straight off the misses.

Debian's python3-optuna installs into the system interpreter, hence /usr/bin/python3 above; where
optuna cannot be imported the TPE column is left out and the script says so.

  scripts/search-bench.py --evo build/evo tests/data/*.jsonl
  scripts/search-bench.py --evo build/evo --seeds 5 --methods evo random tests/data/x.jsonl
"""

import argparse
import concurrent.futures
import gzip
import json
import math
import os
import random
import shlex
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import zlib

METHODS = ["evo", "evo+sp", "random", "tpe"]
CHECKPOINTS = [25, 50, 100, 200]


class BenchError(Exception):
    """Bad input or a failed evo run: said in one message, with no traceback."""


def read_lines(path):
    """The recording's lines as (line number, text), blank ones left out; a recording ending in
    .gz is read through gzip (the held-out ones are kept so). What cannot be read is a BenchError
    that says why."""
    try:
        if path.endswith(".gz"):
            with gzip.open(path, "rb") as f:
                data = f.read()
        else:
            with open(path, "rb") as f:
                data = f.read()
    except (gzip.BadGzipFile, EOFError, zlib.error) as error:
        raise BenchError(f"{path} is not a whole gzip file ({error})") from None
    except OSError as error:
        raise BenchError(f"cannot read {path}: {error.strerror or error}") from None
    if data[:2] == b"\x1f\x8b":
        raise BenchError(f"{path} is gzipped; name it .gz to have it read through gzip")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise BenchError(f"{path} is not UTF-8 text ({error.reason} at byte {error.start})") from None
    lines = text.split("\n")
    # A sweep stopped while writing leaves its last line torn; evo refuses such a recording too.
    if lines[-1].strip():
        raise BenchError(f"{path} ends in the middle of a line (a sweep stopped while writing it?); "
                         "continuing the sweep with `evo sweep --out` on it drops the torn line")
    return [(number, line) for number, line in enumerate(lines, start=1) if line.strip()]


def parse_line(path, number, line):
    try:
        return json.loads(line)
    except json.JSONDecodeError as error:
        raise BenchError(f"{path}:{number} is not JSON ({error.msg} at column {error.colno})") from None


def is_whole_number(value):
    return isinstance(value, int) and not isinstance(value, bool)


def load_recording(path):
    """The recording's header, its knobs, {genome key: first time in us, or None for no
    measurement} and {genome key: geometric mean of every recorded timing, or None}. It is read as
    evo reads a replay: one header, then one record per configuration; the same configuration
    recorded twice with different outcomes is refused."""
    lines = read_lines(path)
    if not lines:
        raise BenchError(f"{path} is empty")
    header = parse_line(path, *lines[0])
    if not isinstance(header, dict) or "evo_recording" not in header:
        raise BenchError(f"{path} does not start with an evo recording header")
    problem = header.get("problem")
    if not isinstance(header.get("template"), str) or not isinstance(problem, dict) or not all(
            is_whole_number(v) for v in problem.values()):
        raise BenchError(f"{path}:{lines[0][0]}: the header names no template and problem "
                         "(\"template\": a name, \"problem\": whole numbers by name)")
    configs = {}
    means = {}
    texts = {}
    knobs = None
    for number, line in lines[1:]:
        record = parse_line(path, number, line)
        if isinstance(record, dict) and "template" in record and "genome" not in record:
            raise BenchError(f"{path}:{number} is a second header: recordings are not joined by "
                             "concatenating their files")
        genome = record.get("genome") if isinstance(record, dict) else None
        outcome = record.get("outcome") if isinstance(record, dict) else None
        if not isinstance(genome, dict) or not genome or not all(
                is_whole_number(v) for v in genome.values()) or not isinstance(outcome, dict):
            raise BenchError(f"{path}:{number} is not a configuration's record (a \"genome\" of "
                             "whole numbers by knob and an \"outcome\")")
        if knobs is None:
            knobs = sorted(genome)
        elif sorted(genome) != knobs:
            raise BenchError(f"{path}:{number} has other knobs than line {lines[1][0]}")
        key = key_of(genome, knobs)
        if key in texts:
            if texts[key][1] == line:
                continue  # the same line twice says nothing new
            raise BenchError(f"{path}:{number} records {json.dumps(genome, sort_keys=True)} again, "
                             f"as line {texts[key][0]} did, with another outcome; a recording "
                             "holds one per configuration")
        texts[key] = (number, line)
        gpu = outcome.get("gpu")
        timing = gpu.get("timing") if isinstance(gpu, dict) else None
        measured = (outcome.get("status") == "measured" and isinstance(timing, dict)
                    and positive_time(timing.get("median_us")))
        configs[key] = timing["median_us"] if measured else None
        means[key] = None
        if measured:
            times = [timing["median_us"]] + [
                again["timing"]["median_us"] for again in record.get("remeasurements") or []
                if isinstance(again, dict) and again.get("status") == "measured"
                and isinstance(again.get("timing"), dict)
                and positive_time(again["timing"].get("median_us"))]
            means[key] = math.exp(statistics.fmean(math.log(t) for t in times))
    if not configs:
        raise BenchError(f"{path} holds no configuration")
    return header, knobs, configs, means


def positive_time(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(
        value) and value > 0


def key_of(genome, knobs):
    return tuple(genome[k] for k in knobs)


def task_arguments(header):
    """The `evo run` options that name the recording's task: every problem parameter as
    --problem, which any template takes (an attention shape and an RMSNorm's ROWS and COLS alike),
    so that evo refuses a recording whose header does not match the template."""
    args = ["--template", header["template"]]
    for name, value in sorted(header["problem"].items()):
        args += ["--problem", f"{name}={value}"]
    return args


class Landscape:
    """A recording as the searches see it (`configs`: first timings) and as they are judged
    (`judged`: the means of all timings, or the first timings with judge="first")."""

    def __init__(self, path, judge="mean"):
        self.path = path
        self.header, self.knobs, self.configs, means = load_recording(path)
        self.judged = means if judge == "mean" else self.configs
        self.first = Judge(self.configs)
        self.judge = Judge(self.judged)
        if self.judge.best is None:
            raise BenchError(f"{path} holds no measured configuration")
        self.measured = sum(1 for t in self.configs.values() if t is not None)
        self.size = len(self.configs)

    @property
    def best(self):
        return self.judge.best

    def within(self, fraction):
        return self.judge.within(fraction)


class Judge:
    """Times by which a search's measured configurations are judged."""

    def __init__(self, times):
        self.times = times
        measured = [t for t in times.values() if t is not None]
        self.best = min(measured) if measured else None

    def within(self, fraction):
        return sum(1 for t in self.times.values() if t is not None and t <= self.best * (1 + fraction))

    def trace(self, keys):
        return [self.times[k] for k in keys]

    def target(self, fraction):
        return self.best * (1 + fraction)


def run_and_read(command, db, queries):
    """Runs an evo command that writes the database `db`, returns the rows of each query on it,
    and removes the database."""
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        said = result.stderr.strip() or result.stdout.strip() or "nothing on stderr"
        raise BenchError(f"evo failed (exit {result.returncode}): {said}\n  the command: "
                         f"{shlex.join(command)}")
    connection = sqlite3.connect(db)
    try:
        return [connection.execute(query).fetchall() for query in queries]
    finally:
        connection.close()
        for suffix in ("", "-wal", "-shm", ".lock"):
            if os.path.exists(db + suffix):
                os.remove(db + suffix)


def run_evo(landscape, replay, evo, seed, cap, starting_points, workdir, evo_args, clock):
    """evo's trace of times, and with `clock` the simulated seconds at which each candidate's
    measurement ended (else None). `replay`: the recording as plain JSON lines, which evo reads."""
    name = f"evo-{'sp' if starting_points else 'nosp'}-{seed}-{os.getpid()}"
    db = os.path.join(workdir, name + ".db")
    command = [evo, "run", "--replay", replay, "--budget", str(cap), "--seed", str(seed),
               "--db", db, "--new"] + task_arguments(landscape.header) + evo_args
    if not starting_points:
        command.append("--no-starting-points")
    clock_log = os.path.join(workdir, name + ".clock") if clock else None
    if clock_log:
        command += ["--replay-clock", clock_log]
    (rows,) = run_and_read(
        command, db, ["SELECT genome, status FROM candidates WHERE state = 'finished' ORDER BY id"])
    ended = {}
    if clock_log:
        with open(clock_log) as f:
            for line in f:
                entry = json.loads(line)
                ended[key_of(entry["genome"], landscape.knobs)] = entry["seconds"]
        os.remove(clock_log)
    trace = []  # the keys of the configurations measured, in order
    seconds = []
    for genome_text, status in rows:
        if status == "invalid":  # not a candidate by evo's budget
            continue
        genome = json.loads(genome_text)
        key = key_of(genome, landscape.knobs)
        if key not in landscape.configs:
            raise BenchError(f"evo proposed {genome}, which {landscape.path} does not hold")
        trace.append(key)
        seconds.append(ended.get(key))
    return trace[:cap], (seconds[:cap] if clock else None)


def run_random(landscape, seed, cap):
    keys = sorted(landscape.configs)
    random.Random(seed).shuffle(keys)
    return keys[:cap]


def run_tpe(landscape, seed, cap, within, multivariate):
    import warnings

    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    domains = {k: sorted({key[i] for key in landscape.configs}) for i, k in enumerate(landscape.knobs)}
    worst = max(t for t in landscape.configs.values() if t is not None)
    # Failures and constraint breaks must rank below every measurement; TPE splits by rank, so
    # any value past the worst time does.
    failure_value = 2 * worst
    seen = {}
    trace = []
    sampler = optuna.samplers.TPESampler(seed=seed, multivariate=multivariate)
    study = optuna.create_study(direction="minimize", sampler=sampler)
    # Every figure is known once the target is hit and the last checkpoint passed: stopping
    # there saves TPE's time, which grows with the square of its trials.
    settled = min(cap, max(CHECKPOINTS))
    # TPE repeats itself once it has settled; the trials it may take in all, repeats and
    # constraint breaks included, are bounded so that a stuck sampler ends the run.
    max_trials = 20 * cap
    trials = 0
    judges = [landscape.judge, landscape.first]
    while len(trace) < min(cap, landscape.size) and trials < max_trials:
        if len(trace) >= settled and all(
                hit_index(j.trace(trace), j.target(within)) is not None for j in judges):
            break
        trial = study.ask()
        trials += 1
        key = tuple(trial.suggest_categorical(k, domains[k]) for k in landscape.knobs)
        if key not in seen:
            if key in landscape.configs:
                t = landscape.configs[key]
                trace.append(key)
                seen[key] = t if t is not None else failure_value
            else:
                seen[key] = failure_value
        study.tell(trial, seen[key])
    return trace


_landscapes = {}  # per worker process: a recording is read once


def run_one(task):
    method, path, replay, seed, cap, evo, workdir, within, multivariate, evo_args, clock, judge = task
    if path not in _landscapes:
        _landscapes[path] = Landscape(path, judge)
    landscape = _landscapes[path]
    started = time.monotonic()
    seconds = None
    if method in ("evo", "evo+sp"):
        try:
            trace, seconds = run_evo(landscape, replay, evo, seed, cap, method == "evo+sp",
                                     workdir, evo_args, clock)
        except BenchError as error:
            raise BenchError(f"{method} on {path}, seed {seed}: {error}") from None
    elif method == "random":
        trace = run_random(landscape, seed, cap)
    else:
        trace = run_tpe(landscape, seed, cap, within, multivariate)
    return trace, seconds, time.monotonic() - started


def hit_index(trace, target):
    for i, t in enumerate(trace):
        if t is not None and t <= target:
            return i + 1
    return None


def fraction_after(trace, best, n):
    times = [t for t in trace[:n] if t is not None]
    return best / min(times) if times else 0.0


def nearest_rank(ordered, fraction):
    """The value at `fraction` of the sorted values, by nearest rank."""
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def p90(values):
    """Nearest rank: the value that 90 % of the seeds reach or beat."""
    return nearest_rank(sorted(values), 0.9)


BOOTSTRAP_RESAMPLES = 2000


def percentile_interval(values):
    """The 2.5th and 97.5th percentiles (nearest rank) of the bootstrap's values."""
    ordered = sorted(values)
    return nearest_rank(ordered, 0.025), nearest_rank(ordered, 0.975)


def resampled_median(values, stream):
    """The median of one bootstrap resample of the seeds' values."""
    return statistics.median(stream.choice(values) for _ in values)


def median_interval(needed, stream):
    """A 95 % bootstrap interval of the median of the seeds' candidates needed (inf: a miss)."""
    return percentile_interval(
        resampled_median(needed, stream) for _ in range(BOOTSTRAP_RESAMPLES))


def compare(needed, other, cap, stream):
    """evo's seeds (`needed`) against another method's: the chance that a seed of evo needs fewer
    candidates than a seed of the other (ties half; a miss, inf, is worse than any hit and ties
    with a miss), and a 95 % bootstrap interval of the other's median minus evo's, with a miss
    counted as cap + 1."""
    wins = sum(1.0 if a < b else 0.5 if a == b else 0.0 for a in needed for b in other)
    capped = [min(v, cap + 1) for v in needed]
    other_capped = [min(v, cap + 1) for v in other]
    differences = (resampled_median(other_capped, stream) - resampled_median(capped, stream)
                   for _ in range(BOOTSTRAP_RESAMPLES))
    return {"p_fewer": wins / (len(needed) * len(other)),
            "difference_interval": list(percentile_interval(differences))}


def needed_of(hits):
    """Candidates needed per seed, a miss (None) as inf: worse than any hit."""
    return [h if h is not None else math.inf for h in hits]


def summarize(landscape, keys, cap, within, clocks=None):
    """`keys`: per seed, the configurations measured in order."""
    traces = [landscape.judge.trace(k) for k in keys]
    target = landscape.judge.target(within)
    hits = [hit_index(trace, target) for trace in traces]
    needed = needed_of(hits)
    summary = {
        "seeds": len(traces),
        "median": statistics.median(needed),
        "p90": p90(needed),
        "misses": sum(1 for h in hits if h is None),
        "hits": hits,
        "after": {},
        "median_interval": median_interval(needed, random.Random(f"{landscape.path} {within}")),
    }
    # The same searches judged by the first timing alone, the measure before the forty-third
    # session, so that figures of both kinds can be set side by side.
    first_hits = [hit_index(landscape.first.trace(k), landscape.first.target(within)) for k in keys]
    summary["first_timing"] = {"hits": first_hits, "median": statistics.median(needed_of(first_hits)),
                               "misses": sum(1 for h in first_hits if h is None)}
    if clocks is not None:
        # The simulated wall time at which the hit's measurement ended (inf: a miss).
        seconds = [clock[h - 1] if h is not None and clock[h - 1] is not None else math.inf
                   for h, clock in zip(hits, clocks)]
        summary["seconds_to_hit"] = seconds
        summary["seconds_median"] = statistics.median(seconds)
        summary["seconds_p90"] = p90(seconds)
    for n in CHECKPOINTS:
        if n <= cap or cap >= landscape.size:
            summary["after"][n] = statistics.median(fraction_after(t, landscape.best, n) for t in traces)
        else:
            summary["after"][n] = None  # the runs stopped at the cap, before n
    return summary


def format_count(value, cap):
    if value == math.inf:
        return f">{cap}"
    return f"{value:g}"


def comparisons(summaries, cap, within, path):
    """evo against every other method (see compare), when evo ran."""
    if "evo" not in summaries:
        return {}
    return {m: compare(needed_of(summaries["evo"]["hits"]), needed_of(s["hits"]), cap,
                       random.Random(f"{path} {within} evo {m}"))
            for m, s in summaries.items() if m != "evo"}


def finite_or_none(value):
    """JSON has no infinity: a miss (inf) is written as null."""
    return None if value == math.inf else value


def method_json(summary):
    """A method's summary as the JSON report writes it."""
    first = summary["first_timing"]
    figures = {**summary, "median": finite_or_none(summary["median"]),
               "first_timing": {**first, "median": finite_or_none(first["median"])},
               "p90": finite_or_none(summary["p90"]),
               "median_interval": [finite_or_none(v) for v in summary["median_interval"]],
               "after": {str(n): v for n, v in summary["after"].items()}}
    for key in ("seconds_median", "seconds_p90"):
        if key in summary:
            figures[key] = finite_or_none(summary[key])
    if "seconds_to_hit" in summary:
        figures["seconds_to_hit"] = [finite_or_none(v) for v in summary["seconds_to_hit"]]
    return figures


def format_seconds(value):
    if value is None:
        return ""
    return ">cap" if value == math.inf else f"{value:.1f}"


def format_interval(interval, cap):
    return f"[{format_count(interval[0], cap)}, {format_count(interval[1], cap)}]"


def print_table(landscape, summaries, against, cap, within, seeds, elapsed):
    header = landscape.header
    problem = ",".join(f"{k}={v}" for k, v in sorted(header["problem"].items()))
    print(f"recording {landscape.path}")
    print(f"  {header['template']} {problem} on {header['device']}: {landscape.size} configurations, "
          f"{landscape.measured} measured; best {landscape.best} us; "
          f"{landscape.within(within)} within {within * 100:g} % of it")
    if landscape.judged is not landscape.configs:
        print(f"  judged by the mean of each configuration's timings; by its first timing alone the "
              f"best is {landscape.first.best} us, {landscape.first.within(within)} within "
              f"{within * 100:g} %")
    print(f"  {seeds} seeds, cap {cap} candidates ({cap / landscape.size * 100:.1f} % of the space); "
          f"10 % of the space is {landscape.size / 10:g}, 25 % is {landscape.size / 4:g}")
    columns = ["method", f"to {within * 100:g}%: median", "95 % interval", "p90", "misses",
               "median % space", "random / median"] + [f"@{n}" for n in CHECKPOINTS] + ["seconds"]
    clocked = any("seconds_median" in s for s in summaries.values())
    if clocked:
        columns += [f"sim. s to {within * 100:g}%", "p90 s"]
    rows = []
    random_median = summaries.get("random", {}).get("median")
    for method, s in summaries.items():
        ratio = ""
        if random_median is not None and s["median"] not in (0, math.inf) and random_median != math.inf:
            ratio = f"{random_median / s['median']:.2f}"
        share = "" if s["median"] == math.inf else f"{s['median'] / landscape.size * 100:.2f}"
        after = ["n/a" if s["after"][n] is None else f"{s['after'][n]:.4f}" for n in CHECKPOINTS]
        row = [method, format_count(s["median"], cap),
               format_interval(s["median_interval"], cap), format_count(s["p90"], cap),
               f"{s['misses']}/{s['seeds']}", share, ratio] + after + [f"{elapsed[method]:.0f}"]
        if clocked:
            row += [format_seconds(s.get("seconds_median")), format_seconds(s.get("seconds_p90"))]
        rows.append(row)
    widths = [max(len(str(r[i])) for r in rows + [columns]) for i in range(len(columns))]
    line = "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(columns, widths)))
    print("  " + line)
    for r in rows:
        print("  " + "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths))))
    if landscape.judged is not landscape.configs:
        print("  judged by the first timing alone: " + ", ".join(
            f"{method} {format_count(s['first_timing']['median'], cap)}"
            f" ({s['first_timing']['misses']} misses)" for method, s in summaries.items()))
    for method, c in against.items():
        lo, hi = c["difference_interval"]
        print(f"  evo against {method}: a seed of evo needs fewer candidates than one of {method} "
              f"with chance {c['p_fewer']:.2f}; {method}'s median minus evo's, 95 % interval "
              f"[{lo:g}, {hi:g}]")
    print()


def whole_number(least):
    """An argparse type: a whole number, at least `least`."""
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be at least {least}, not {value}")
        return value
    return parse


def fraction(text):
    """An argparse type: how near the best counts as found, a finite fraction from 0 to 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (0 <= value < 1):
        raise argparse.ArgumentTypeError(f"must be a fraction from 0 (the best alone) to below 1 "
                                         f"(0.02: within 2 %), not {text}")
    return value


def refuse_repeats(parser, paths):
    """A recording given twice, also under another spelling, is an argparse error."""
    named = {}
    for path in paths:
        same = named.setdefault(os.path.realpath(path), path)
        if same != path or paths.count(path) > 1:
            parser.error(f"{path} is given twice" + ("" if same == path else f" (as {same})"))


def require_json_folder(parser, path):
    """--json FILE must go into a folder that exists and can be written, checked before the runs."""
    if path:
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
            parser.error(f"--json: cannot write into {folder}")


def templates_arguments(parser, folders):
    """evo's --templates for each folder of --templates, which must exist."""
    arguments = []
    for folder in folders:
        if not os.path.isdir(folder):
            parser.error(f"--templates: {folder} is not a folder")
        arguments += ["--templates", os.path.abspath(folder)]
    return arguments


def plain_replays(paths, workdir):
    """{recording: the file evo replays}: evo reads plain JSON lines, so a gzipped recording is
    decompressed once into workdir."""
    replays = {}
    for index, path in enumerate(paths):
        replays[path] = path
        if path.endswith(".gz"):
            replays[path] = os.path.join(workdir, f"{index}-" + os.path.basename(path)[:-3])
            with gzip.open(path, "rb") as source, open(replays[path], "wb") as target:
                shutil.copyfileobj(source, target)
    return replays


def run_main(name, benchmark):
    """Runs `benchmark`, saying a BenchError in one line on stderr (exit 1) and ^C as such (130)."""
    try:
        return benchmark()
    except BenchError as error:
        sys.stdout.flush()
        print(f"{name}: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        sys.stdout.flush()
        print(f"{name}: interrupted; the tables above (and --json) hold what finished",
              file=sys.stderr)
        return 130


def write_json(path, report, methods, unfinished):
    """The report so far, replacing the file whole: a run stopped part of the way (a failed evo
    run, ^C) keeps the recordings it finished, and names those it did not."""
    temporary = path + ".partial"
    with open(temporary, "w") as f:
        json.dump({"recordings": report, "methods": methods, "unfinished": unfinished}, f, indent=1)
    os.replace(temporary, path)


def main():
    return run_main("search-bench", run_benchmark)


def run_benchmark():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("recordings", nargs="+",
                        help="recordings made by `evo sweep` (JSON lines, or gzipped: .gz)")
    parser.add_argument("--evo", default="build/evo", help="the evo binary (default: build/evo)")
    parser.add_argument("--seeds", type=whole_number(1), default=20,
                        help="seeds per method (default: 20)")
    parser.add_argument("--first-seed", type=whole_number(0), default=1,
                        help="seeds run from this (default: 1)")
    parser.add_argument("--cap", type=whole_number(0), default=0,
                        help="candidates per search (default: a quarter of the space, at least 200)")
    parser.add_argument("--within", type=fraction, default=0.02,
                        help="how near the best counts as found (default: 0.02)")
    parser.add_argument("--methods", nargs="+", default=METHODS, choices=METHODS)
    parser.add_argument("--jobs", type=whole_number(1), default=os.cpu_count() or 1,
                        help="searches run at once (default: one per core)")
    parser.add_argument("--tpe-univariate", action="store_true",
                        help="TPE's default, one density per knob, instead of the multivariate TPE")
    parser.add_argument("--json", metavar="FILE", help="also write every figure and hit as JSON")
    parser.add_argument("--judge", choices=["mean", "first"], default="mean",
                        help="judge the configurations a search measured by the mean of their "
                             "recorded timings (default) or by the first timing alone")
    parser.add_argument("--templates", action="append", default=[], metavar="DIR",
                        help="a folder of templates of your own (evo --templates; repeatable), "
                             "for recordings of them")
    parser.add_argument("--evo-args", default="", metavar="ARGS",
                        help="more options for evo's runs, e.g. \"--generation-size 4\"")
    parser.add_argument("--clock", action="store_true",
                        help="evo's runs also simulate their wall time on one GPU from the "
                             "recorded compile and GPU times (`evo run --replay-clock`, 16 "
                             "compile threads): the seconds to get within --within, per method "
                             "of evo")
    args = parser.parse_args()

    methods = list(dict.fromkeys(args.methods))
    if "tpe" in methods:
        try:
            import optuna  # noqa: F401
        except ImportError:
            print(f"search-bench: optuna is not importable by {sys.executable} (Debian: "
                  "python3-optuna, which scripts/install-deps.sh installs); the tpe column is left out",
                  file=sys.stderr)
            methods.remove("tpe")
    if any(m.startswith("evo") for m in methods) and not os.access(args.evo, os.X_OK):
        raise BenchError(f"there is no evo binary at {args.evo} (--evo)")
    evo = os.path.abspath(args.evo)
    try:
        evo_args = shlex.split(args.evo_args)
    except ValueError as error:
        parser.error(f"--evo-args: {error}")
    evo_args += templates_arguments(parser, args.templates)
    require_json_folder(parser, args.json)
    refuse_repeats(parser, args.recordings)

    landscapes = [Landscape(path, args.judge) for path in args.recordings]
    caps = {}
    for landscape in landscapes:
        cap = args.cap or max(math.ceil(landscape.size / 4), 200)
        caps[landscape.path] = min(cap, landscape.size)

    # Databases on tmpfs where there is one: each candidate is its own synced transaction.
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    workdir = tempfile.mkdtemp(prefix="evo-search-bench-", dir=base)
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    report = []
    try:
        evo_paths = [l.path for l in landscapes] if any(m.startswith("evo") for m in methods) else []
        replays = {l.path: l.path for l in landscapes} | plain_replays(evo_paths, workdir)
        with concurrent.futures.ProcessPoolExecutor(max_workers=args.jobs) as pool:
            futures = {l.path: [(m, s, pool.submit(run_one, (
                m, l.path, replays[l.path], s, caps[l.path], evo, workdir, args.within,
                not args.tpe_univariate, evo_args, args.clock, args.judge)))
                for m in methods for s in seeds] for l in landscapes}
            try:
                # Each recording's table as soon as its searches are done, so that a long
                # benchmark shows its progress and a failure later loses nothing finished.
                for number, landscape in enumerate(landscapes):
                    traces, clocks, elapsed = {}, {}, {}
                    for method, seed, future in futures[landscape.path]:
                        trace, clock, seconds = future.result()
                        traces.setdefault(method, {})[seed] = trace
                        if clock is not None:
                            clocks.setdefault(method, {})[seed] = clock
                        elapsed[method] = elapsed.get(method, 0) + seconds
                    report.append(report_recording(landscape, methods, seeds, caps[landscape.path],
                                                   args, traces, clocks, elapsed))
                    sys.stdout.flush()
                    if args.json:
                        write_json(args.json, report, methods,
                                   [l.path for l in landscapes[number + 1:]])
            except BaseException:
                pool.shutdown(wait=True, cancel_futures=True)
                raise
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


def report_recording(landscape, methods, seeds, cap, args, traces, clocks, elapsed):
    """Prints one recording's table and returns its entry of the JSON report."""
    summaries = {}
    for method in methods:
        by_seed = traces[method]
        clocked = clocks.get(method)
        summaries[method] = summarize(landscape, [by_seed[s] for s in seeds], cap, args.within,
                                      [clocked[s] for s in seeds] if clocked else None)
    against = comparisons(summaries, cap, args.within, landscape.path)
    print_table(landscape, summaries, against, cap, args.within, len(seeds), elapsed)
    return {
        "recording": landscape.path, "template": landscape.header["template"],
        "problem": landscape.header["problem"], "configurations": landscape.size,
        "measured": landscape.measured, "best_us": landscape.best,
        "within": args.within, "near_best": landscape.within(args.within), "cap": cap,
        "judge": args.judge, "best_first_us": landscape.first.best,
        "near_best_first": landscape.first.within(args.within),
        "seeds": seeds,
        "methods": {m: method_json(s) for m, s in summaries.items()},
        "evo_against": against,
    }


if __name__ == "__main__":
    sys.exit(main())
