# Sourced by the device scripts that time sdpa_hopper under ncu at its locked clocks.
# prof LABEL TEMPLATES SHAPE KNOB=VALUE...: the launch after 30 of sdpa_hopper_fwd in `evo bench`
# (TEMPLATES: a folder of template copies for --templates, or "" for the shipped one), printed as
# one line: its duration, SM clock and tensor-pipe activity. M may name other metrics;
# PROBLEM=K=V adds a problem parameter (e.g. BF16=1).
E=build-bundle/evo
M=${M:-sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second}
prof() {
  local label=$1 dir=$2 shape=$3; shift 3
  local args=""; for s in "$@"; do args="$args --set $s"; done
  local templates=""; [ -n "$dir" ] && templates="--templates $dir"
  timeout 150 ncu --target-processes all --metrics $M -k regex:sdpa_hopper_fwd --launch-skip 30 -c 1 \
    $E $templates bench --template sdpa_hopper --shape $shape $args ${PROBLEM:+--problem $PROBLEM} > $OUT/ncu.txt 2>&1
  echo "$label $shape $*: $(grep -E "pct_of_peak|duration|per_second|^verdict|^correctness" $OUT/ncu.txt | sed 's/  */ /g' | cut -c1-100 | tr '\n' ';')"
}
