# Issue 15, thirty-fifth session: NARROW_TAIL (the last P V of a ragged last KV tile over its
# first BLOCK_N - 64 keys only). First the SASS of the 160-key kernel: HEAD's against NARROW_TAIL
# 0 and 1 (cubins compiled here). At 4,16,4096,128 fp16: the gates on the kernels with it; ncu
# (locked clocks, as .device/ncu_prof.sh) on 160-, 176- and 192-key kernels with NARROW_TAIL 0
# and 1; then `evo bench` at the GPU's own clocks in ROUNDS rounds (order
# rotating) of the twenty-seventh session's 128-key pick and the 160-key kernel without and with.
# Output: $OUT/narrow.log. NARROW_TAIL was not kept: this runs on a tree with
# .device/s35/narrow_tail_last_pv.diff applied (git apply) and the bundle rebuilt, and the three
# cubins compiled with `evo compile ... --cubin .device/s35/cubins/{head,nt0,nt1}_160_sws.cubin`
# (head: before the patch). The session's first call ran the peeled-tile form
# (narrow_tail_peeled_tile.diff) without the SASS lines and the 192-key kernel:
# out/narrow_peeled_tile.log; the second, this script: out/narrow_last_pv.log.
set -u
exec > >(tee $OUT/narrow.log) 2>&1
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv
for c in head nt0 nt1; do
  cuobjdump -sass .device/s35/cubins/${c}_160_sws.cubin | grep -oE '^\s+/\*[0-9a-f]{4}\*/\s+[^;]+' |
    sed -E 's/^\s+\/\*[0-9a-f]+\*\/\s+//' > $OUT/sass_$c.txt
  echo "[sass $c] $(wc -l < $OUT/sass_$c.txt) instructions, $(grep -c HGMMA $OUT/sass_$c.txt) HGMMA"
done
echo "[sass head vs nt0] $(diff $OUT/sass_head.txt $OUT/sass_nt0.txt | grep -c '^[<>]') lines differ"
echo "[sass nt0 vs nt1] $(diff $OUT/sass_nt0.txt $OUT/sass_nt1.txt | grep -c '^[<>]') lines differ"
source .device/ncu_prof.sh
source .device/s34/knobs.sh
# The 176- and 192-key kernels without the O tile (TMA_STORE=0; with it the tiles do not fit),
# 192 without PINGPONG (with it, it spills).
W176="${HOPPER_BASE/TMA_STORE=1/TMA_STORE=0} BLOCK_N=176 SOFTMAX_WARP_SYNC=0 STREAM_K=1"
W192="${HOPPER_BASE/TMA_STORE=1/TMA_STORE=0} BLOCK_N=192 SOFTMAX_WARP_SYNC=1 STREAM_K=1"
W192="${W192/PINGPONG=1/PINGPONG=0}"
gate "[gate 160 nt1]" 4,16,4096,128 "" $W160 NARROW_TAIL=1
gate "[gate 160 nt1 causal bf16]" 4,16,4096,128 "--causal --problem BF16=1" ${W160/SOFTMAX_WARP_SYNC=1/SOFTMAX_WARP_SYNC=0} NARROW_TAIL=1
gate "[gate 160 nt1 16k]" 1,16,16384,128 "" $W160 NARROW_TAIL=1
for nt in 0 1; do
  prof "[160 nt$nt ncu]" "" 4,16,4096,128 $W160 NARROW_TAIL=$nt
  prof "[176 nt$nt ncu]" "" 4,16,4096,128 $W176 NARROW_TAIL=$nt
  prof "[192 nt$nt ncu]" "" 4,16,4096,128 $W192 NARROW_TAIL=$nt
done
for round in $(seq 1 ${ROUNDS:-4}); do
  case $((round % 3)) in
    1) bench "[r$round pick]" 4,16,4096,128 $S27_PICK
       bench "[r$round 160 nt1]" 4,16,4096,128 $W160 NARROW_TAIL=1
       bench "[r$round 160 nt0]" 4,16,4096,128 $W160 NARROW_TAIL=0 ;;
    2) bench "[r$round 160 nt1]" 4,16,4096,128 $W160 NARROW_TAIL=1
       bench "[r$round 160 nt0]" 4,16,4096,128 $W160 NARROW_TAIL=0
       bench "[r$round pick]" 4,16,4096,128 $S27_PICK ;;
    0) bench "[r$round 160 nt0]" 4,16,4096,128 $W160 NARROW_TAIL=0
       bench "[r$round pick]" 4,16,4096,128 $S27_PICK
       bench "[r$round 160 nt1]" 4,16,4096,128 $W160 NARROW_TAIL=1 ;;
  esac
done
