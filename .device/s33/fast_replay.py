#!/usr/bin/env python3
"""Thirty-third session: the medians of scripts/search-bench.py's evo column, quickly. Each seed
replays `evo run --replay` as search-bench does, but with at most FAST_BUDGET candidates (150),
so a seed past that reads 999; the medians are search-bench's wherever they are below the cap.
Usage: EVO_BIN=build/evo JOBS=2 .device/s33/fast_replay.py FIRST_SEED LAST_SEED RECORDING...
The variants of .device/s33/trigger_experiments.diff take their switches from the environment."""
import importlib.util, json, os, sqlite3, subprocess, sys, statistics, gzip, tempfile
from concurrent.futures import ProcessPoolExecutor
spec = importlib.util.spec_from_file_location("sb", os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../scripts/search-bench.py"))
sb = importlib.util.module_from_spec(spec); spec.loader.exec_module(sb)
EVO = os.environ.get("EVO_BIN", "build/evo")
BUDGET = int(os.environ.get("FAST_BUDGET", "150"))
_l = {}
def land(path):
    if path not in _l:
        L = sb.Landscape(path)
        if path.endswith(".gz"):
            fd, plain = tempfile.mkstemp(suffix=".jsonl", dir=tempfile.gettempdir()); os.close(fd)
            with gzip.open(path, "rt") as f, open(plain, "w") as g: g.write(f.read())
        else:
            plain = path
        _l[path] = (L, plain)
    return _l[path]
def one(task):
    path, seed = task
    L, plain = land(path)
    db = tempfile.gettempdir() + f"/run-{os.getpid()}.db"
    if os.path.exists(db): os.remove(db)
    cap = min(BUDGET, L.size)
    cmd = [EVO, "run", "--replay", plain, "--budget", str(cap), "--seed", str(seed), "--db", db, "--new",
           "--no-starting-points"] + sb.task_arguments(L.header)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0: raise RuntimeError(r.stderr[-2000:])
    c = sqlite3.connect(db)
    rows = c.execute("SELECT genome, status FROM candidates WHERE state='finished' ORDER BY id").fetchall()
    c.close(); os.remove(db)
    trace = [L.configs[sb.key_of(json.loads(g), L.knobs)] for g, st in rows if st != "invalid"]
    return path, seed, sb.hit_index(trace, L.best * 1.02)
def main():
    seeds = range(int(sys.argv[1]), int(sys.argv[2]) + 1)
    paths = sys.argv[3:]
    tasks = [(p, s) for p in paths for s in seeds]
    res = {}
    with ProcessPoolExecutor(int(os.environ.get("JOBS", "2"))) as ex:
        for p, s, h in ex.map(one, tasks, chunksize=4):
            res.setdefault(p, {})[s] = h
    total = 0
    out = {}
    for p in paths:
        hs = [res[p][s] if res[p][s] is not None else 999 for s in seeds]
        m = statistics.median(hs); total += m
        blocks = [statistics.median(hs[i:i+20]) for i in range(0, len(hs), 20)]
        out[p] = hs
        print(f"{os.path.basename(p)[:44]:44s} median {m:6.1f} mean {statistics.mean(hs):6.1f} blocks {blocks}")
    print("sum of medians", total)
    if os.environ.get("FAST_JSON"): json.dump(out, open(os.environ["FAST_JSON"], "w"))
main()
