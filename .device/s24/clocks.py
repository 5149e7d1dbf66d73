#!/usr/bin/env python3
"""Each measured candidate of the given databases: its cycles (median x mean SM clock), time,
mean clock and the probe's clock after the timing, fewest cycles first, then the fastest by time."""
import json, sqlite3, sys

KEYS = ("BLOCK_N", "PERSISTENT", "PINGPONG", "RESCALE_UNDER_QK", "NUM_CONSUMERS", "STAGES",
        "STREAM_K", "SOFTMAX_WARP_SYNC", "TMA_STORE")
for path in sys.argv[1:]:
    rows = []
    for cid, genome, outcome, conf in sqlite3.connect(path).execute(
            "SELECT id, genome, outcome_json, confirmation_json FROM candidates"):
        o = json.loads(outcome or "{}")
        t = o.get("gpu", {}).get("timing")
        if not t or not t.get("mean_sm_clock_mhz"):
            continue
        c = json.loads(conf) if conf else {}
        knobs = " ".join(f"{k}={v}" for k, v in sorted(json.loads(genome).items()) if k in KEYS)
        rows.append((t["median_us"] * t["mean_sm_clock_mhz"] / 1000, cid, t["median_us"],
                     t["mean_sm_clock_mhz"], t["sm_clock_mhz"], c.get("median_us", 0),
                     c.get("mean_sm_clock_mhz", 0), knobs))
    line = "{:9.1f} k cycles #{:>2} {:8.2f} us at {:5.0f} MHz ({:5.0f} after) | conf {:8.2f} us {:5.0f} MHz | {}"
    print("==", path)
    for r in sorted(rows)[:12]:
        print(line.format(*r))
    print("fastest by time:")
    for r in sorted(rows, key=lambda r: r[2])[:5]:
        print(line.format(*r))
