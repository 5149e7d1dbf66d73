# Issue 15, thirty-fifth session: the nine short anchor rows in fp16 with the re-timing's stricter
# cycles (aed8220), on the lent H200, as long_rows.sh does the four long ones: fresh sdpa_hopper
# searches as users run them (.device/s24/list.txt's time limits), then bench-attention
# --no-search over their databases with the peers in the same process. Output:
# $OUT/short_rows.log, $OUT/table_short_fp16.{txt,json}, $OUT/work_short_fp16.tgz.
set -u
exec > >(tee $OUT/short_rows.log) 2>&1
E=build-bundle/evo
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw,power.limit --format=csv,noheader
mkdir -p runs/work
grep -vE "^(4,16,4096|1,16,16384)" .device/s24/list.txt > runs/work/short.txt
DTYPE=fp16 LIST=runs/work/short.txt bash .device/s14/search.sh 2>&1 | cut -c1-240
timeout 300 python3 scripts/bench-attention.py --evo $E --template sdpa_hopper --no-search \
  --dtype fp16 --work runs/work --shapes 1,8,512,64 1,8,512,64,causal 2,8,512,64 \
  2,8,512,64,causal 2,8,2048,64 2,8,2048,64,causal 2,8,2048,128 2,8,2048,128,causal \
  8,16,1024,64 --json $OUT/table_short_fp16.json > $OUT/table_short_fp16.txt 2>&1
echo "== table rc $?"; cut -c1-330 $OUT/table_short_fp16.txt
tar czf $OUT/work_short_fp16.tgz runs/work/*.db runs/work/run_*.txt
