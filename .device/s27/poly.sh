#!/usr/bin/env bash
# Issue 15, twenty-seventh session: POLY_EXP (some softmax exponentials by a cubic on the FMA pipe
# instead of ex2 on the MUFU). SASS counts per value, the gates on odd problems with it, then
# `evo bench` of each shape's elite of the twenty-sixth session's fp16 table (.device/s26/out/
# table_fp16.json) with POLY_EXP = 0..4, two rounds interleaved, then ncu at 4,16,4096,128.
set -u
source .device/ncu_prof.sh
nvidia-smi --query-gpu=name,serial,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
base() {  # the elite's knobs of SHAPE (fp16 table of the twenty-sixth session)
  python3 -c "
import json
for r in json.load(open('.device/s26/out/table_fp16.json')):
    if r['shape'] == '$1' and r['causal'] == ('$2' == 'causal'):
        print(' '.join(f'{k}={v}' for k, v in sorted(r['evo_genome'].items())))"
}
echo "== SASS"
for shape in 8,16,1024,64 4,16,4096,128; do
  for pe in 0 1 2 3 4; do
    args=""; for kv in $(base $shape -) POLY_EXP=$pe; do args="$args --set $kv"; done
    $E compile --template sdpa_hopper --shape $shape $args --no-cache --cubin $OUT/k.cubin > $OUT/c.txt 2>&1
    cuobjdump -sass $OUT/k.cubin > $OUT/k.sass
    echo "$shape POLY_EXP=$pe $(grep -E '^registers|^spills' $OUT/c.txt | tr '\n' ' ') MUFU.EX2 $(grep -c MUFU.EX2 $OUT/k.sass) FFMA $(grep -c 'FFMA' $OUT/k.sass) FADD $(grep -c FADD $OUT/k.sass) FADD.RM $(grep -c FADD.RM $OUT/k.sass) LEA $(grep -c ' LEA' $OUT/k.sass) SHF $(grep -c SHF $OUT/k.sass) IMAD $(grep -c IMAD $OUT/k.sass) FMNMX $(grep -c FMNMX $OUT/k.sass) HGMMA $(grep -c HGMMA $OUT/k.sass) total $(grep -cE '^ +/\*[0-9a-f]{4}\*/' $OUT/k.sass)"
  done
done
grep -m1 -B3 -A14 FADD.RM $OUT/k.sass > $OUT/poly_sass_excerpt.txt
echo "== gates"
gate "PE4 bf16 causal" 3,5,1500,1300,128 "--causal --problem BF16=1" POLY_EXP=4
gate "PE2 causal D64" 2,8,1000,777,64 "--causal" POLY_EXP=2 NUM_CONSUMERS=3 BLOCK_N=64 STAGES=3
gate "PE3 D256 causal" 2,4,500,1000,256 "--causal" POLY_EXP=3 BLOCK_N=64 TMA_STORE=0
gate "PE2 splits packed" 2,32,3,5000,128 "--problem H_kv=8" POLY_EXP=2 SPLITS=4 PACK_GQA=1 TMA_STORE=0 NUM_CONSUMERS=1 PINGPONG=0
gate "PE1 one KV tile bf16" 2,8,70,60,128 "--problem BF16=1" POLY_EXP=1
gate "PE8 S_kv 129 stream-K" 3,5,1500,129,128 "" POLY_EXP=8 PERSISTENT=1 STREAM_K=1
echo "== bench, two rounds"
for round in 1 2; do
  for row in "8,16,1024,64 -" "4,16,4096,64 -" "2,8,2048,64 -" "2,8,2048,64 causal" "1,8,512,64 -" "4,16,4096,128 -"; do
    set -- $row
    c=""; [ "$2" = causal ] && c="--causal"
    pes="0 1 2 3 4"; [ $1 = 4,16,4096,128 ] && pes="0 1 2"
    for pe in $pes; do
      args=""; for kv in $(base $1 $2) POLY_EXP=$pe; do args="$args --set $kv"; done
      echo "r$round $1 $2 PE=$pe: $($E bench --template sdpa_hopper --shape $1 $c $args 2>&1 | grep -E '^timing|sm clock|^correctness|error' | sed 's/  */ /g' | cut -c1-90 | tr '\n' ';')"
    done
  done
done
echo "== bf16 8,16,1024,64"
for pe in 0 2 3 0 2 3; do
  args=""; for kv in $(base 8,16,1024,64 -) POLY_EXP=$pe; do args="$args --set $kv"; done
  echo "bf16 PE=$pe: $($E bench --template sdpa_hopper --shape 8,16,1024,64 --problem BF16=1 $args 2>&1 | grep -E '^timing|sm clock|^correctness' | sed 's/  */ /g' | cut -c1-90 | tr '\n' ';')"
done
echo "== ncu"
for pe in 0 2; do prof "[PE=$pe]" "" 8,16,1024,64 $(base 8,16,1024,64 -) POLY_EXP=$pe; done
for pe in 0 1; do prof "[PE=$pe]" "" 4,16,4096,128 $(base 4,16,4096,128 -) POLY_EXP=$pe; done
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader
