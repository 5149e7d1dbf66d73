#!/usr/bin/env bash
# Evidence that every knob of a template (sdpa_fp16, sdpa_fp8 or sdpa_fp16_wgmma) changes the
# machine code: compiles a base configuration and one variant per knob value, and counts SASS
# instructions of the kinds the knobs are about (tensor-core HMMA / HGMMA = wgmma / QMMA, LDSM =
# ldmatrix, LDGSTS = cp.async, MUFU.EX2 = exp2, BAR = __syncthreads, SYNCS = mbarrier, VOTE = warp
# vote, F2FP = packing conversions such as e4m3 -> fp16, UTMA = tensor memory accelerator copies
# and prefetches, STG = global stores, SETMAXREG = setmaxnreg). Needs cuobjdump (CUDA toolkit; the H100
# machine has it).
#   scripts/sass-knobs.sh [EVO] [B,H,S,D] [--causal]
# TEMPLATE=sdpa_fp8, sdpa_fp16_wgmma or sdpa_hopper for the others; PROBLEM="Q_FP8=1" for other
# problem parameters.
set -euo pipefail
evo=${1:-./build/evo}
shape=${2:-2,8,2048,64}
causal=${3:-}
template=${TEMPLATE:-sdpa_fp16}
problem=()
for kv in ${PROBLEM:-}; do problem+=(--problem "$kv"); done
cuobjdump=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
[ -x "$cuobjdump" ] || { echo "sass-knobs: cuobjdump not found" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

common=("BLOCK_M=128 NUM_WARPS=8" "BLOCK_N=32" "BLOCK_N=128" "NUM_WARPS=2" "STAGES=1" "STAGES=3"
  "FAST_EXP=0")
case "$template" in
  sdpa_fp16)
    base="BLOCK_M=64 BLOCK_N=64 NUM_WARPS=4 STAGES=2 FAST_EXP=1 WARP_SPECIALIZED=0 PERSISTENT=0 LAZY_RESCALE=0"
    variants=("" "${common[@]}" "WARP_SPECIALIZED=1" "PERSISTENT=1" "LAZY_RESCALE=1")
    ;;
  sdpa_fp8)
    base="BLOCK_M=64 BLOCK_N=64 NUM_WARPS=4 STAGES=2 FAST_EXP=1 PERSISTENT=0 QK_FP8_MMA=0"
    variants=("" "${common[@]}" "PERSISTENT=1" "QK_FP8_MMA=1")
    ;;
  sdpa_fp16_wgmma)
    # Compiled for sm_90a (the manifest is arch_specific); wgmma shows up as HGMMA.
    base="NUM_WG=1 BLOCK_N=128 STAGES=2 FAST_EXP=1"
    variants=("" "NUM_WG=2" "BLOCK_N=64" "STAGES=1" "STAGES=3" "STAGES=4" "FAST_EXP=0")
    ;;
  sdpa_hopper)
    base="NUM_CONSUMERS=2 BLOCK_N=128 STAGES=2 FAST_EXP=1 PINGPONG=1 INTRA_OVERLAP=1 PERSISTENT=0 TMA_STORE=1 PRODUCER_REGS=24 RESCALE_UNDER_QK=0"
    # At D=128 some knobs need a partner to fit: the base's shared memory is nearly full.
    variants=("" "NUM_CONSUMERS=3 BLOCK_N=64" "NUM_CONSUMERS=1 PINGPONG=0" "BLOCK_N=64"
      "BLOCK_N=176 TMA_STORE=0" "STAGES=1" "STAGES=3 BLOCK_N=96" "FAST_EXP=0" "PINGPONG=0"
      "INTRA_OVERLAP=0" "PERSISTENT=1" "TMA_STORE=0" "PRODUCER_REGS=56" "RESCALE_UNDER_QK=1"
      "SOFTMAX_WARP_SYNC=1")
    ;;
  *) echo "sass-knobs: no knob list for template '$template'" >&2; exit 2 ;;
esac
printf "%-26s %5s %6s %6s %5s %6s %6s %8s %5s %5s %5s %5s %5s %5s %9s %6s  %s\n" "change from base" \
  "regs" "HMMA" "HGMMA" "QMMA" "LDSM" "LDGSTS" "MUFU.EX2" "BAR" "SYNCS" "VOTE" "F2FP" "UTMA" "STG" \
  "SETMAXREG" "total" "status"
for variant in "${variants[@]}"; do
  settings="$base"
  for kv in $variant; do
    settings=$(echo "$settings" | sed -E "s/(^| )${kv%%=*}=[0-9]+/\1$kv/")
  done
  args=()
  for kv in $settings; do args+=(--set "$kv"); done
  cubin="$work/k.cubin"
  rm -f "$cubin"
  report=$("$evo" compile --template "$template" --arch sm_90 --no-cache --allow-spills \
    --shape "$shape" $causal "${problem[@]}" \
    "${args[@]}" --cubin "$cubin" 2>&1 || true)
  status=$(echo "$report" | awk '/^status/ {$1=""; print substr($0, 2); exit}')
  # A configuration refused before compiling (a violated constraint) has no status line.
  [ -n "$status" ] || status=$(echo "$report" | tail -n 1)
  if [ ! -s "$cubin" ]; then
    printf "%-26s %s\n" "${variant:-base}" "$status"
    continue
  fi
  regs=$(echo "$report" | awk '/^registers/ {print $2; exit}')
  sass=$("$cuobjdump" -sass "$cubin" | grep -oE '^\s+/\*[0-9a-f]{4}\*/\s+[^;]+' |
    sed -E 's/^\s+\/\*[0-9a-f]+\*\/\s+(@!?U?P[0-9T] )?//')
  count() { echo "$sass" | grep -cE "^$1" || true; }
  printf "%-26s %5s %6s %6s %5s %6s %6s %8s %5s %5s %5s %5s %5s %5s %9s %6s  %s\n" \
    "${variant:-base}" "$regs" "$(count HMMA)" "$(count HGMMA)" "$(count QMMA)" "$(count LDSM)" \
    "$(count LDGSTS)" "$(count 'MUFU\.EX2')" "$(count BAR)" "$(count SYNCS)" "$(count VOTE)" \
    "$(count F2FP)" "$(count UTMA)" "$(count STG)" "$(count USETMAXREG)" "$(echo "$sass" | wc -l)" \
    "$status"
done
echo "$template base: $base; shape $shape ${causal:-(not causal)} ${PROBLEM:-}; sm_90; counts are static instructions"
