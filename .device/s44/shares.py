# Issue 17, forty-fourth session: for seeds 1..N of one recording, per share (neighbour, marginal,
# model, random, default) the candidates up to the first hit, the failures among them, and which share made the first hit
# within 2 % of the best (judged by the means, as search-bench does).
# usage: shares.py EVO RECORDING SEEDS [ENV=VALUE...]
import json, sqlite3, subprocess, sys, os, collections, importlib.util
spec = importlib.util.spec_from_file_location('sb', '/work/main/scripts/search-bench.py')
sb = importlib.util.module_from_spec(spec); spec.loader.exec_module(sb)
evo, f, seeds = sys.argv[1], sys.argv[2], int(sys.argv[3])
env = dict(os.environ)
for a in sys.argv[4:]:
    k, v = a.split('='); env[k] = v
L = sb.Landscape(f)
if f.endswith('.gz'):
    import gzip, shutil
    plain = '/tmp/ana/' + os.path.basename(f)[:-3]
    with gzip.open(f, 'rb') as a, open(plain, 'wb') as b: shutil.copyfileobj(a, b)
    f = plain
judged = L.judged
best = min(t for t in judged.values() if t is not None)
os.makedirs('/tmp/ana', exist_ok=True)
count, fails, hits = collections.Counter(), collections.Counter(), collections.Counter()
hit_at = []
for seed in range(1, seeds + 1):
    db = f'/tmp/ana/s{seed}_{os.getpid()}.db'
    cmd = [evo, 'run', '--replay', f, '--budget', '200', '--seed', str(seed), '--db', db, '--new',
           '--no-starting-points'] + sb.task_arguments(L.header)
    subprocess.run(cmd, capture_output=True, env=env)
    c = sqlite3.connect(db)
    rows = c.execute("select operator, genome, status from candidates where state='finished' order by id").fetchall()
    c.close()
    i, hit = 0, None
    for op, g, st in rows:
        if st == 'invalid': continue
        i += 1
        share = op.split(' ')[0].rstrip(':')
        t = judged.get(sb.key_of(json.loads(g), L.knobs))
        if hit is not None: break
        count[share] += 1
        if t is None: fails[share] += 1
        if hit is None and t is not None and t <= best * 1.02:
            hit = i; hits[share] += 1
    hit_at.append(hit)
    for s in ('', '-wal', '-shm'):
        if os.path.exists(db + s): os.remove(db + s)
print('hits at', hit_at)
for s in count:
    print('%-10s candidates %5d  failures %5d (%.0f %%)  first hits %d' % (s, count[s], fails[s], 100.0 * fails[s] / count[s], hits[s]))
