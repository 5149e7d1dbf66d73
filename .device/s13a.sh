#!/usr/bin/env bash
# Is sdpa_hopper at 4,16,4096,128 bound by the GPU's power limit at its own clocks, and does a copy
# that reads less shared memory (q_regs_variant.py: Q K^T with Q from registers) run faster there?
# evo bench of the template and the copy, interleaved, while nvidia-smi logs power, SM clock and
# the throttle reasons every 100 ms ($OUT/smi.csv).
set -u
source .device/ncu_prof.sh
source .device/trace_tile.sh
nvidia-smi -q -d POWER | grep -E "Power Limit|Power Draw" | head -8
nvidia-smi --query-gpu=timestamp,power.draw,clocks.sm,temperature.gpu,clocks_throttle_reasons.sw_power_cap,clocks_throttle_reasons.hw_slowdown,clocks_throttle_reasons.sw_thermal_slowdown \
  --format=csv -lms 100 > $OUT/smi.csv 2>&1 &
SMI=$!
for bn in 160 128; do
  K=$(with_knobs "BLOCK_N=$bn STREAM_K=0")
  python3 .device/fixed_template.py /tmp/ref_$bn $K > /dev/null
  python3 .device/q_regs_variant.py /tmp/qr_$bn $K > /dev/null
done
tb() { local label=$1 dir=$2; shift 2; E="build-bundle/evo --templates $dir" bench "$label $(date +%T)" 4,16,4096,128 "$@"; }
for round in 1 2 3; do
  for bn in 160 128; do
    K=$(with_knobs "BLOCK_N=$bn STREAM_K=0")
    tb "ref BLOCK_N=$bn" /tmp/ref_$bn $K
    tb "qr  BLOCK_N=$bn" /tmp/qr_$bn $K
  done
done
kill $SMI
# Summaries of the log: the busiest samples (power above 500 W).
awk -F', ' 'NR>1 && $2+0 > 500 {n++; p+=$2; c+=$3; if ($5 ~ /Active/) cap++} END {printf "samples over 500 W: %d, mean power %.1f W, mean SM clock %.0f MHz, sw power cap active in %d\n", n, p/n, c/n, cap}' $OUT/smi.csv
