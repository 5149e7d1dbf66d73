# Issue 15: the search at 4,16,4096,128 fp16 as a user runs it (the anchor table's settings:
# sdpa_hopper, starting points on, elite 3, budget 64, 60 s, re-timed at the end), then ncu on
# each member of its elite, in the elite's order. Output under $OUT.
set -u
exec > >(tee $OUT/one_search.log) 2>&1
source .device/ncu_prof.sh
mkdir -p runs/work
echo "4,16,4096,128 - ${LIMIT:-60}" > runs/work/one.txt
DTYPE=fp16 LIST=runs/work/one.txt bash .device/s14/search.sh 2>&1 | cut -c1-300
$E show elite --db runs/work/4x16x4096x128.db 2>&1 | cut -c1-330
$E show elite --db runs/work/4x16x4096x128.db --json > $OUT/elite.json
python3 -c "
import json
for m in json.load(open('$OUT/elite.json'))['elite']:
    print(' '.join(f'{k}={v}' for k, v in sorted(m['genome'].items())))" > runs/work/elite_knobs.txt
n=0
while read knobs; do
  n=$((n + 1)); prof "[elite #$n]" "" 4,16,4096,128 $knobs
done < runs/work/elite_knobs.txt
