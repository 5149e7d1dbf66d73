#!/usr/bin/env python3
"""Thirty-third session: the medians of evo's column in scripts/search-bench.py --json outputs, by
blocks of 20 seeds, and their sum over the recordings. A miss (None) counts as 999.
Usage: .device/s33/blocks.py SEARCH_BENCH_JSON...

The quick figures of BENCHMARKS.md ("Thirty-third session") are search-bench's evo runs capped
at 150 candidates, e.g. `scripts/search-bench.py --evo E --methods evo --cap 150 --seeds 60
--json F tests/data/sdpa_fp8_h100_2x8x4096x128_qfp8.jsonl`, with the switches of
.device/s33/trigger_experiments.diff in the environment; every median there is below the cap."""
import json
import statistics
import sys


def main():
    total = 0
    for path in sys.argv[1:]:
        with open(path) as f:
            report = json.load(f)
        for recording in report["recordings"]:
            hits = [h if h is not None else 999 for h in recording["methods"]["evo"]["hits"]]
            median = statistics.median(hits)
            total += median
            blocks = [statistics.median(hits[i:i + 20]) for i in range(0, len(hits), 20)]
            name = recording["recording"].rsplit("/", 1)[-1]
            print(f"{name[:44]:44s} median {median:6.1f} mean {statistics.mean(hits):6.1f} "
                  f"blocks {blocks}")
    print("sum of medians", total)


if __name__ == "__main__":
    main()
