# Issue 15, thirty-fifth session: how often a search as users run it at 4,16,4096,128 fp16
# (sdpa_hopper, starting points on, elite 3, budget 64, 60 s, re-timed at the end) picks a kernel
# at 80 % of the tensor pipe. SEEDS searches (each its own drawn seed), then ncu (locked clocks,
# .device/ncu_prof.sh) on each search's pick. Output: $OUT/searches.log, databases in
# $OUT/searches.tgz.
set -u
exec > >(tee $OUT/searches.log) 2>&1
source .device/ncu_prof.sh
mkdir -p runs/work
for n in $(seq 1 ${SEEDS:-2}); do
  db=runs/work/search$n.db
  timeout 150 $E run --template sdpa_hopper --shape 4,16,4096,128 --elite 3 --budget 64 \
    --time-limit 60s --db $db < /dev/null > runs/work/run$n.txt 2>&1
  echo "== search $n rc $?: $(grep -E 'seed|stopped|side by side' runs/work/run$n.txt | tr '\n' ' ' | cut -c1-400)"
  $E show elite --db $db 2>&1 | cut -c1-330
  $E show elite --db $db --json > $OUT/elite$n.json
  knobs=$(python3 -c "
import json
m = json.load(open('$OUT/elite$n.json'))['elite'][0]
print(' '.join(f'{k}={v}' for k, v in sorted(m['genome'].items())))")
  prof "[search $n pick]" "" 4,16,4096,128 $knobs
done
tar czf $OUT/searches.tgz runs/work/search*.db runs/work/run*.txt
