#!/usr/bin/env python3
"""Prints the latest re-timing of each database given: every candidate's timings by round (us,
mean SM clock), its median, its median cycles, and the elite's order as evo stores it.
Usage: retimings.py DB..."""
import json, sqlite3, statistics, sys

for path in sys.argv[1:]:
    db = sqlite3.connect(path)
    row = db.execute("SELECT MAX(id) FROM retimings").fetchone()
    if not row or row[0] is None:
        print(f"{path}: no re-timing")
        continue
    rid = row[0]
    per = {}
    for cand, rnd, tj in db.execute(
            "SELECT candidate_id, round, timing_json FROM retiming_timings WHERE retiming_id = ? "
            "ORDER BY sequence", (rid,)):
        t = json.loads(tj)
        per.setdefault(cand, []).append((rnd, t["median_us"], t.get("mean_sm_clock_mhz", 0)))
    print(f"{path}: re-timing {rid}")
    for cand, ts in sorted(per.items(), key=lambda kv: statistics.median(x[1] for x in kv[1])):
        ts.sort()
        med = statistics.median(x[1] for x in ts)
        cyc = [x[1] * x[2] for x in ts if x[2] > 0]
        knobs = db.execute("SELECT genome FROM candidates WHERE id = ?", (cand,)).fetchone()
        g = json.loads(knobs[0]) if knobs else {}
        short = " ".join(f"{k}={v}" for k, v in sorted(g.items())
                         if k in ("BLOCK_N", "PERSISTENT", "STREAM_K", "SOFTMAX_WARP_SYNC",
                                  "PINGPONG", "TMA_STORE", "RESCALE_UNDER_QK", "PRODUCER_REGS"))
        rounds = ", ".join(f"r{r} {us:.2f} ({mhz:.0f})" for r, us, mhz in ts)
        kc = f"{statistics.median(cyc) / 1000:.1f} kcyc" if len(cyc) == len(ts) else "no cycles"
        print(f"  #{cand}: median {med:.2f} us, {kc}: {rounds} | {short}")
