# Issue 17, twenty-sixth session: one replayed search, candidate by candidate (index, generation, time over the recording's best or FAIL, the proposal, the knobs).
# usage: trace_seed.py EVO RECORDING SEED [ENV=VALUE...]
import json, sqlite3, subprocess, sys, os, importlib.util
spec = importlib.util.spec_from_file_location('sb', '/work/main/scripts/search-bench.py')
sb = importlib.util.module_from_spec(spec); spec.loader.exec_module(sb)
evo, f, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
env = dict(os.environ); 
for a in sys.argv[4:]:
    k, v = a.split('='); env[k] = v
L = sb.Landscape(f)
best = min(t for t in L.configs.values() if t is not None)
db = f'/tmp/ana/t{seed}.db'
cmd = [evo, 'run', '--replay', f, '--budget', '100', '--seed', str(seed), '--db', db, '--new', '--no-starting-points'] + sb.task_arguments(L.header)
subprocess.run(cmd, capture_output=True, env=env)
c = sqlite3.connect(db)
rows = c.execute("select generation, operator, genome, status from candidates where state='finished' order by id").fetchall()
i = 0
for gen, op, g, st in rows:
    if st == 'invalid': continue
    i += 1
    t = L.configs[sb.key_of(json.loads(g), L.knobs)]
    r = 'FAIL' if t is None else '%.3f' % (t / best)
    gg = json.loads(g)
    print(i, gen, r, op[:60], ' '.join(f'{k}={v}' for k, v in sorted(gg.items())))
for s in ('', '-wal', '-shm'):
    if os.path.exists(db + s): os.remove(db + s)
