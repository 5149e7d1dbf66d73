# Sourced by the device scripts that time sdpa_hopper, under ncu at its locked clocks (prof) or
# at the GPU's own (bench). PROBLEM=K=V adds a problem parameter to either (e.g. BF16=1).
# prof LABEL TEMPLATES SHAPE KNOB=VALUE...: the launch after 30 of sdpa_hopper_fwd in `evo bench`
# (TEMPLATES: a folder of template copies for --templates, or "" for the shipped one), printed as
# one line: its duration, SM clock and tensor-pipe activity. M may name other metrics.
# bench LABEL SHAPE KNOB=VALUE...: `evo bench` of those knobs, printed as one line: the verdict,
# the timing and the SM clock evo bench read after it. Neither reads the caller's input, so both
# can run inside a `while read` loop.
E=build-bundle/evo
M=${M:-sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second}
# evo's options for KNOB=VALUE settings and PROBLEM.
bench_options() {
  local kv; for kv in "$@"; do echo -n " --set $kv"; done
  [ -n "${PROBLEM:-}" ] && echo -n " --problem $PROBLEM"
  echo
}
prof() {
  local label=$1 dir=$2 shape=$3; shift 3
  local templates=""; [ -n "$dir" ] && templates="--templates $dir"
  timeout 150 ncu --target-processes all --metrics $M -k regex:sdpa_hopper_fwd --launch-skip 30 -c 1 \
    $E $templates bench --template sdpa_hopper --shape $shape $(bench_options "$@") < /dev/null > $OUT/ncu.txt 2>&1
  echo "$label $shape $*: $(grep -E "pct_of_peak|duration|per_second|^verdict|^correctness" $OUT/ncu.txt | sed 's/  */ /g' | cut -c1-100 | tr '\n' ';')"
}
bench() {
  local label=$1 shape=$2; shift 2
  $E bench --template sdpa_hopper --shape $shape $(bench_options "$@") < /dev/null > $OUT/bench.txt 2>&1
  echo "$label: $(grep -E '^verdict|^timing|sm clock' $OUT/bench.txt | sed 's/  */ /g' | tr '\n' ';')"
}
# gate LABEL SHAPE PROBLEM-ARGS KNOB=VALUE...: `evo bench` of those knobs with the problem options
# given (e.g. "--causal --problem H_kv=2"), printed as one line: compile status, spills, verdict,
# correctness, timing and SM clock.
gate() {
  local label=$1 shape=$2 prob=$3; shift 3
  local args=""; for s in "$@"; do args="$args --set $s"; done
  echo "$label $shape $prob: $($E bench --template sdpa_hopper --shape $shape $prob $args 2>&1 | grep -E "^verdict|^timing|^correctness|^status|error|sm clock|^spills" | cut -c1-150 | tr '\n' ';')"
}
