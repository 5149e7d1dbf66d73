# Issue 17 (seventeenth session): one replayed seed, candidate by candidate, with its time over the
# recording's best, a star where the best so far improves, and the operator that proposed it.
# usage: trace_seed.py EVO RECORDING SEED BUDGET
import json, sqlite3, subprocess, sys, os
import importlib.util
spec = importlib.util.spec_from_file_location('sb', '/work/main/scripts/search-bench.py')
sb = importlib.util.module_from_spec(spec); spec.loader.exec_module(sb)
evo, f, seed, budget = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
os.makedirs('/tmp/ana', exist_ok=True)
L = sb.Landscape(f)
best = min(t for t in L.configs.values() if t is not None)
db = f'/tmp/ana/t{seed}.db'
cmd = [evo, 'run', '--replay', f, '--budget', str(budget), '--seed', str(seed), '--db', db, '--new', '--no-starting-points'] + sb.task_arguments(L.header)
subprocess.run(cmd, capture_output=True)
c = sqlite3.connect(db)
rows = c.execute("select id, generation, operator, genome, status from candidates where state='finished' order by id").fetchall()
bs = None
short = lambda g: ' '.join(f'{k[:6]}={v}' for k,v in g.items() if k not in ('SPLITS','PACK_GQA','LAST_CTA_COMBINES','WARP_SPECIALIZED'))
for i,(id_, gen, op, g, st) in enumerate(rows):
    g = json.loads(g); t = L.configs.get(sb.key_of(g, L.knobs))
    mark = ''
    if t and (bs is None or t < bs): bs = t; mark = '*'
    print(f'{i+1:4d} g{gen:<3d} {("%.1f"%t) if t else "fail":>7} {t/best if t else 0:5.3f}{mark:1s} {short(g)}  | {op[:60]}')
