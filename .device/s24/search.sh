#!/usr/bin/env bash
# A fresh search as a user runs it (starting points on, the elite re-timed side by side), now
# ranked by SM cycles, then ncu at locked clocks on each member of its elite and on cuDNN's kernel.
# SHAPE (default 4,16,4096,128), BUDGET, LIMIT; every candidate's time, clock and cycles listed.
set -u
source .device/ncu_prof.sh
shape=${SHAPE:-4,16,4096,128}; tag=$(echo $shape | tr ',' 'x'); db=/tmp/s24_$tag.db
rm -f $db*
start=$(date +%s)
$E run --template sdpa_hopper --shape $shape --elite 3 --budget ${BUDGET:-64} --time-limit ${LIMIT:-100s} \
  --db $db > $OUT/run_$tag.txt 2>&1
echo "run: $(( $(date +%s) - start )) s"
tail -6 $OUT/run_$tag.txt
$E show elite --db $db 2>&1 | head -12
cp $db $OUT/
python3 - $db <<'PY' > $OUT/cycles_$tag.txt
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
keys = ("BLOCK_N", "STREAM_K", "SOFTMAX_WARP_SYNC", "PERSISTENT", "RESCALE_UNDER_QK", "NUM_CONSUMERS", "STAGES")
for cid, genome, outcome, conf in db.execute("SELECT id, genome, outcome_json, confirmation_json FROM candidates ORDER BY id"):
    o = json.loads(outcome or "{}")
    t = o.get("gpu", {}).get("timing")
    if not t: continue
    c = json.loads(conf) if conf else {}
    g = json.loads(genome)
    knobs = " ".join(f"{k}={v}" for k, v in sorted(g.items()) if k in keys)
    mhz = t.get("mean_sm_clock_mhz", 0)
    print(f'#{cid:>3} {t["median_us"]:9.2f} us {mhz:6.0f} MHz {t["median_us"]*mhz/1000:9.1f} kcyc | conf {c.get("median_us",0):9.2f} us {c.get("mean_sm_clock_mhz",0):6.0f} MHz | {o["status"]} | {knobs}')
PY
sort -k7 -n $OUT/cycles_$tag.txt | head -15
i=0
$E show elite --db $db --json | python3 -c "
import json, sys
for member in json.load(sys.stdin)['elite']:
    print(' '.join(f'{k}={v}' for k, v in sorted(member['genome'].items())))" |
while read knobs; do
  i=$((i + 1))
  prof "[elite #$i]" "" $shape $knobs
done
[ -n "${CUDNN:-1}" ] && {
timeout 150 ncu --target-processes all --metrics $M -k regex:cudnn --launch-skip 1 -c 1 \
  python3 scripts/attention-once.py --peer cudnn --shape $shape > $OUT/ncu_cudnn_$tag.txt 2>&1
echo "[cuDNN] $(grep -E "pct_of_peak|duration|per_second" $OUT/ncu_cudnn_$tag.txt | sed 's/  */ /g' | tr '\n' ';')"
}
echo "total: $(( $(date +%s) - start )) s"
