import sqlite3, sys, json
c = sqlite3.connect(sys.argv[1])
for row in c.execute("select id, status, median_us, confirm_median_us, genome from candidates order by coalesce(median_us, 1e12)"):
    g = json.loads(row[4])
    short = " ".join(f"{k}={v}" for k, v in sorted(g.items()) if k in ("BLOCK_N","NUM_CONSUMERS","PERSISTENT","PINGPONG","STREAM_K","TMA_STORE","PRODUCER_REGS","STAGES","INTRA_OVERLAP","FAST_EXP"))
    print(row[0], row[1], row[2], row[3], short)
