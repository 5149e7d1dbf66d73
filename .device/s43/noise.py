#!/usr/bin/env python3
"""How far a recording's first timings are from their remeasurements, and whether the best by
the first timing stays the best by the mean of both: noise.py RECORDING..."""
import gzip, json, math, statistics, sys
for path in sys.argv[1:]:
    op = gzip.open if path.endswith('.gz') else open
    rows = [json.loads(l) for l in op(path, 'rt') if l.strip()][1:]
    pairs = []
    for r in rows:
        o = r['outcome']
        if o.get('status') != 'measured' or not (o.get('gpu') or {}).get('timing'):
            continue
        first = o['gpu']['timing']['median_us']
        again = [x['timing']['median_us'] for x in r.get('remeasurements') or [] if x.get('timing')]
        if again:
            pairs.append((first, again[0]))
    d = sorted(abs(math.log(a / b)) for a, b in pairs)
    best_first = min(pairs, key=lambda p: p[0])
    mean = [math.sqrt(a * b) for a, b in pairs]
    best_mean = min(mean)
    within_first = sum(1 for a, b in pairs if a <= best_first[0] * 1.02)
    within_mean = sum(1 for m in mean if m <= best_mean * 1.02)
    print('%-48s n=%4d |log ratio| median %.4f p90 %.4f >2%%: %4.1f%%  best first %.2f (again %.2f); best of means %.2f; within 2%%: %d by first, %d by means' % (
        path.split('/')[-1][:48], len(pairs), statistics.median(d), d[int(0.9 * len(d))],
        100 * sum(1 for x in d if x > math.log(1.02)) / len(d), best_first[0], best_first[1], best_mean, within_first, within_mean))
