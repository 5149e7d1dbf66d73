#!/usr/bin/env python3
"""Side by side: median candidates to within 2 % per recording, from search-bench JSON files.
usage: medians.py LABEL=FILE.json [LABEL=FILE.json ...] [--method evo]"""
import json, math, statistics, sys
args = [a for a in sys.argv[1:] if not a.startswith('--')]
method = 'evo'
if '--method' in sys.argv:
    method = sys.argv[sys.argv.index('--method') + 1]
    args = [a for a in args if a != method]
cols = []
for arg in args:
    label, path = arg.split('=', 1)
    rows = {}
    for rec in json.load(open(path))['recordings']:
        name = rec['recording'].split('/')[-1].replace('.jsonl.gz', '').replace('.jsonl', '')
        m = rec['methods'].get(method)
        if m:
            hits = [h if h is not None else rec['cap'] * 2 for h in m['hits']]
            rows[name] = (m['median'], statistics.mean(math.log(h) for h in hits), m['misses'])
    cols.append((label, rows))
names = []
for _, rows in cols:
    for n in rows:
        if n not in names: names.append(n)
print('%-44s' % 'recording' + ''.join('%16s' % label for label, _ in cols))
sums = [0.0] * len(cols)
for n in names:
    line = '%-44s' % n[:44]
    for i, (_, rows) in enumerate(cols):
        if n in rows:
            med, ml, miss = rows[n]
            sums[i] += med
            line += '%16s' % ('%g (%.2f)%s' % (med, math.exp(ml), '*' if miss else ''))
        else:
            line += '%16s' % '-'
    print(line)
print('%-44s' % 'sum of medians' + ''.join('%16g' % s for s in sums))
