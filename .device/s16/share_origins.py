# Issue 17 (sixteenth session): which share of a generation (neighbour, marginal, model, random)
# proposed each replayed candidate, how often its candidates land in the fastest 5 % of the
# recording or fail, and which share made each seed's first candidate within 2 % of the best.
# usage: share_origins.py EVO SEEDS RECORDING...
import json, sqlite3, subprocess, sys, os, collections
sys.path.insert(0, '/work/main/scripts')
import importlib.util
spec = importlib.util.spec_from_file_location('sb', '/work/main/scripts/search-bench.py')
sb = importlib.util.module_from_spec(spec); spec.loader.exec_module(sb)
evo = sys.argv[1]; seeds = int(sys.argv[2]); files = sys.argv[3:]
for f in files:
    L = sb.Landscape(f)
    times = sorted(t for t in L.configs.values() if t is not None)
    best = times[0]
    top5 = times[max(0, len(L.configs)//20)]
    stats = collections.defaultdict(lambda: [0,0,0,0])  # n, top5, fail, hits
    for seed in range(1, seeds+1):
        db = f'/tmp/ana/o{os.path.basename(f)}{seed}.db'
        cmd = [evo, 'run', '--replay', f, '--budget', '100', '--seed', str(seed), '--db', db, '--new', '--no-starting-points'] + sb.task_arguments(L.header)
        subprocess.run(cmd, capture_output=True)
        c = sqlite3.connect(db)
        rows = c.execute("select operator, genome, status from candidates where state='finished' order by id").fetchall()
        c.close()
        for s in ('', '-wal', '-shm', '.lock'):
            if os.path.exists(db+s): os.remove(db+s)
        hit = False
        for op, g, st in rows:
            if st == 'invalid': continue
            src = op.split(' ')[0].rstrip(':')
            t = L.configs[sb.key_of(json.loads(g), L.knobs)]
            s = stats[src]; s[0]+=1
            if t is None: s[2]+=1
            elif t <= top5: s[1]+=1
            if not hit and t is not None and t <= best*1.02:
                s[3]+=1; hit=True
    print(os.path.basename(f))
    for src,(n,t5,fl,h) in sorted(stats.items()):
        print(f'  {src:10s} n={n:5d} top5%={t5/n:6.3f} fail={fl/n:6.3f} hits={h}')
