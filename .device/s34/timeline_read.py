#!/usr/bin/env python3
"""Thirty-fourth session (issue 20): what the databases of .device/s34/timeline.sh say about a
run's wall time: from its first candidate's creation to its last's finish, the workers' time
(gpu_ms summed), the compiles not found in the cache with their NVRTC times, and each
generation's span. Usage: .device/s34/timeline_read.py DB..."""
import json
import sqlite3
import statistics
import sys
from datetime import datetime


def seconds(stamp):
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def main():
    for path in sys.argv[1:]:
        rows = sqlite3.connect(path).execute(
            "select generation, created_at, finished_at, outcome_json from candidates "
            "order by id").fetchall()
        start = seconds(rows[0][1])
        outcomes = [json.loads(r[3]) for r in rows]
        new = [o["compile_ms"] for o in outcomes if not o.get("compile_cached")]
        spans = {}
        for generation, created, finished, _ in rows:
            first, last = spans.get(generation, (seconds(created), 0))
            spans[generation] = (first, max(last, seconds(finished)))
        print(f"{path}: wall {max(s[1] for s in spans.values()) - start:.2f} s, worker time "
              f"{sum(o.get('gpu_ms') or 0 for o in outcomes) / 1000:.2f} s, {len(new)} compiles "
              f"not in the cache: median {statistics.median(new):.0f} ms, max {max(new):.0f}")
        for generation, (first, last) in spans.items():
            print(f"  generation {generation}: {first - start:.2f} to {last - start:.2f} s "
                  f"({last - first:.2f} s)")


if __name__ == "__main__":
    main()
